"""A case's attention shape and a mixture's dense blocks: head_dim where heads x head_dim is not the hidden size,
multi-head latent attention, and the leading dense blocks, read rather than dropped."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from simulator.training.predict import predict_step
from simulator.validation.training_cases import map_case, parse_cases
from workloads.model import transformer
from workloads.spec import MlaSpec

# Qwen3-235B-A22B as a Megatron-Core run states it: 64 heads of 128 over a hidden size of 4,096
# (Qwen/Qwen3-235B-A22B config.json: head_dim 128), so the attention is twice as wide as hidden / heads implies
QWEN3_CASE: dict[str, Any] = {
    "id": "user-qwen3-235b-ep8-64gpu",
    "model": {"name": "Qwen3-235B-A22B", "layers": 94, "hidden": 4096, "heads": 64, "kv_heads": 4, "head_dim": 128,
              "ffn": 1536, "seq_len": 4096, "vocab": 151936, "num_experts": 128, "experts_per_token": 8},
    "training": {"framework": "Megatron-Core", "strategy": ["pp", "ep", "dp"], "pp": 8, "ep": 8, "micro_batch": 1,
                 "global_batch": 512, "precision": "bf16"},
    "cluster": {"gpu": "H100 80GB", "gpus_per_node": 8, "num_gpus": 64},
    "metrics": {"tokens_per_s_per_GPU": 1000},
}
# DeepSeek-V3 as a write-up states it: its shape in numbers, its attention in words
DSV3_MODEL: dict[str, Any] = {"name": "DeepSeek-V3", "layers": 61, "hidden": 7168, "heads": 128, "ffn": 18432,
                              "expert_ffn": 2048, "seq_len": 4096, "vocab": 129280, "num_experts": 256,
                              "experts_per_token": 8, "shared_experts": 1, "dense_layers": 3,
                              "attention": "MLA (q_lora_rank 1536, kv_lora_rank 512, qk head 128 + rope 64)"}
DSV3_MLA = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
            "v_head_dim": 128}


def mapped(model: dict[str, Any], drop: tuple[str, ...] = (), base: dict[str, Any] = QWEN3_CASE) -> Any:
    entry = copy.deepcopy(base)
    entry["model"] = {**{k: v for k, v in entry["model"].items() if k not in drop}, **model}
    return map_case(parse_cases(yaml.safe_dump([entry]), "test")[0])


@pytest.mark.parametrize("name", ["head_dim", "kv_channels", "head_size"])
def test_a_stated_head_dim_sets_the_attentions_width(name: str):
    """heads x head_dim = 8,192 where hidden is 4,096: q and the output projection are 4,096 x 8,192, and the score
    FLOPs a token attends with are 2 x 2 x s x 8,192 a layer (Megatron-LM's --kv-channels; Hugging Face's head_dim)."""
    case = mapped({name: 128}, drop=("head_dim",))
    assert case.skipped is None and case.model is not None and case.model.head_dim == 128
    block = transformer(case.model).blocks[0][0]
    assert (block.q_dim, block.out_dim) == (8192, 8192)
    assert block.attention_forward_flops(1, 4096) == pytest.approx(2 * 2 * 4096 * 8192)


def test_a_head_dim_of_hidden_over_heads_changes_nothing():
    """Metamorphic: stating the width hidden / heads already implies predicts the same step, to the bit."""
    stated, implied = mapped({"head_dim": 4096 // 64}), mapped({}, drop=("head_dim",))
    assert stated.training is not None and implied.training is not None
    assert predict_step(stated.topology, stated.training, stated.model).step_time_s == \
        predict_step(implied.topology, implied.training, implied.model).step_time_s


def test_the_wider_attention_costs_more_and_counts_more_flops():
    """Qwen3's width (128) against what hidden / heads would give (64): more FLOPs a token, a longer step."""
    wide, narrow = mapped({}), mapped({"head_dim": 64})
    assert wide.model is not None and narrow.model is not None and wide.training is not None
    assert transformer(wide.model).model_flops_per_token(4096) > transformer(narrow.model).model_flops_per_token(4096)
    assert predict_step(wide.topology, wide.training, wide.model).step_time_s > \
        predict_step(narrow.topology, narrow.training, narrow.model).step_time_s


@pytest.mark.parametrize("name", ["dense_layers", "first_k_dense_replace"])
def test_a_mixtures_leading_dense_blocks_are_read(name: str):
    case = mapped({**DSV3_MODEL, name: 3, **({"dense_layers": None} if name != "dense_layers" else {})},
                  drop=("head_dim", "kv_heads"))
    assert case.model is not None and case.model.dense_layers == 3
    counts = sorted(n for _, n in transformer(case.model).blocks)
    assert counts == [3, 58]


def test_mla_stated_by_its_widths():
    case = mapped({**DSV3_MODEL, "attention": None, **DSV3_MLA}, drop=("head_dim", "kv_heads"))
    assert case.skipped is None and case.model is not None and case.model.mla == MlaSpec(**DSV3_MLA)


def test_mla_described_in_words_takes_the_released_models_flagged():
    """'MLA (...)' in prose, the name a released model whose shape the case agrees with: its preset's MLA, said so."""
    case = mapped(DSV3_MODEL, drop=("head_dim", "kv_heads"))
    assert case.skipped is None and case.model is not None and case.model.mla == MlaSpec(**DSV3_MLA)
    assert any("multi-head latent attention" in d for d in case.defaults)


@pytest.mark.parametrize(("model", "needle"), [
    ({"name": "In-house MoE"}, "state its widths as q_lora_rank, kv_lora_rank"),  # no released model to take it from
    ({"layers": 60}, "state its widths as"),  # the released model's name, another shape
    ({"attention": None, **DSV3_MLA, "v_head_dim": None}, "multi-head latent attention: v_head_dim not stated"),
])
def test_mla_the_case_does_not_pin_down_is_refused_saying_what_to_state(model: dict[str, Any], needle: str):
    case = mapped({**DSV3_MODEL, **model}, drop=("head_dim", "kv_heads"))
    assert case.skipped is not None and needle in case.skipped


@pytest.mark.parametrize("key", ["rope_head_dim", "num_dense_blocks", "kv_latent_dim", "qk_head_dim"])
def test_an_attention_shape_field_not_read_stops_the_case_naming_it(key: str):
    """Left unread, the attention would be priced at hidden / heads a head, silently."""
    case = mapped({key: 96})
    assert case.skipped is not None and f"model.{key}: not a field this tool reads" in case.skipped


UNKNOWN_FAMILY: dict[str, Any] = {"name": "In-house 7B", "layers": 32, "hidden": 4096, "heads": 32, "ffn": 11008,
                                  "vocab": 32000, "head_dim": None, "kv_heads": None, "num_experts": None,
                                  "experts_per_token": None}


@pytest.mark.parametrize(("stated", "gated", "tied"), [
    ({}, False, False),  # a family the reader does not know: plain MLP, flagged
    ({"gated_mlp": True}, True, False),
    ({"activation": "swiglu"}, True, False),
    ({"mlp_activation": "fast-geglu"}, True, False),
    ({"activation": "silu"}, False, False),  # an activation alone does not say whether the MLP is gated
    ({"tie_word_embeddings": True}, False, True),
    ({"gated_mlp": True, "share_embeddings_and_output_weights": False}, True, False),
])
def test_a_stated_mlp_gate_and_tied_output_are_read(stated: dict[str, Any], gated: bool, tied: bool):
    """A model of a family the reader does not know takes the MLP gate and the output tie the case states."""
    case = mapped({**UNKNOWN_FAMILY, **stated})
    assert case.skipped is None and case.model is not None
    assert (case.model.gated_mlp, case.model.tied_embeddings) == (gated, tied)
    # flagged where the case leaves the gate open (no gated_mlp, no GLU named)
    assert any("MLP not gated" in d for d in case.defaults) == (not gated and "gated_mlp" not in stated)


def test_a_stated_gate_overrides_the_family():
    """A Llama-named model whose case says its MLP is not gated is priced so (the case over the family's default)."""
    llama = {**UNKNOWN_FAMILY, "name": "Llama 2 7B"}
    assert mapped(llama).model.gated_mlp is True
    assert mapped({**llama, "gated_mlp": False}).model.gated_mlp is False
