"""Parameter counts: the formulas by hand on a tiny model, and the presets against published totals."""

from __future__ import annotations

import pytest

from workloads.model import transformer
from workloads.presets import load_model
from workloads.spec import ModelSpec


def _tiny(**fields: object) -> ModelSpec:
    base: dict[str, object] = {"name": "tiny", "layers": 2, "hidden": 8, "heads": 2, "kv_heads": 1,
                               "ffn_hidden": 12, "gated_mlp": True, "vocab": 10, "max_seq_len": 16}
    return ModelSpec.model_validate(base | fields)


def test_tiny_gated_gqa_model_by_hand():
    """h=8, a=2 (d=4), kv=1, f=12 gated, V=10, untied: attention 2*64 + 2*8*4 = 192, MLP 3*8*12 = 288,
    norms 2*8 = 16 per layer; embedding 80, output 80, final norm 8: 2*496 + 168 = 1160."""
    model = transformer(_tiny())
    assert (model.attention_params_per_layer, model.mlp_params_per_layer, model.norm_params_per_layer) == (192, 288, 16)
    assert (model.embedding_params, model.output_params, model.final_norm_params) == (80, 80, 8)
    assert model.total_params == 1160


def test_biases_learned_positions_and_tying_by_hand():
    """With biases (q 8, k 4, v 4, o 8; gate 12, up 12, down 8), LayerNorm bias (2h per norm), a learned
    16 x 8 position table and tied output: 216 + 320 + 32 = 568 per layer, embedding 80 + 128, final 16."""
    model = transformer(_tiny(bias=True, learned_positions=True, tied_embeddings=True))
    assert (model.attention_params_per_layer, model.mlp_params_per_layer, model.norm_params_per_layer) == (216, 320, 32)
    assert (model.embedding_params, model.output_params, model.final_norm_params) == (208, 0, 16)
    assert model.total_params == 2 * 568 + 208 + 16


def test_defaults_resolve_to_multi_head_and_four_h():
    """Without kv_heads and ffn_hidden a plain MLP model has kv = heads and f = 4 h."""
    model = transformer(ModelSpec(name="m", layers=1, hidden=64, heads=4, vocab=100))
    assert (model.kv_heads, model.ffn_hidden, model.kv_dim) == (4, 256, 64)


# (preset, published total, relative tolerance, source of the published figure)
PUBLISHED = [
    ("llama2-7b", 6.74e9, 0.005, "HF meta-llama/Llama-2-7b-hf: 6.74B"),
    ("llama2-13b", 13.0e9, 0.005, "HF meta-llama/Llama-2-13b-hf: 13.0B"),
    ("llama2-70b", 69.0e9, 0.005, "HF meta-llama/Llama-2-70b-hf: 69.0B"),
    ("llama3-8b", 8.03e9, 0.005, "HF meta-llama/Meta-Llama-3-8B: 8.03B"),
    ("llama3-70b", 70.6e9, 0.005, "HF meta-llama/Meta-Llama-3-70B: 70.6B"),
    ("llama3-405b", 405.9e9, 0.005, "HF meta-llama/Llama-3.1-405B: 406B (405.9e9)"),
    ("gpt3-175b", 175e9, 0.01, "Brown et al. 2020, Table 2.1: 175.0B"),
    ("nemotron4-340b", 340e9, 0.005, "NVIDIA Nemotron-4 340B Technical Report: 340B (we count 341.0B)"),
    ("gpt3-13b", 13.0e9, 0.015, "Brown et al. 2020, Table 2.1: 13.0B (we use d_model 5120, not the printed 5140)"),
    ("mpt-7b", 6.7e9, 0.01, "MosaicML MPT-7B model card: 6.7B"),
    ("mpt-30b", 30e9, 0.005, "MosaicML MPT-30B model card: 30B"),
    ("bert-large", 335e6, 0.005, "HF google-bert/bert-large-uncased: 335M (pooler, token types not modelled)"),
    ("gpt2-xl", 1.56e9, 0.005, "HF openai-community/gpt2-xl: 1.56B"),
    ("mixtral-8x7b", 46.7e9, 0.005, "Jiang et al. 2024 (Mixtral of Experts), section 2: 46.7B"),
    ("mixtral-8x22b", 141e9, 0.005, "Mistral AI, Mixtral 8x22B announcement: 141B"),
    ("qwen3-30b-a3b", 30.5e9, 0.005, "Qwen/Qwen3-30B-A3B model card: 30.5B (per-head q/k norms not modelled)"),
    ("qwen3-235b-a22b", 235e9, 0.005, "Qwen/Qwen3-235B-A22B model card: 235B, 234B non-embedding (we count 235.1B "
     "and 233.8B)"),
    ("deepseek-v3", 671e9, 0.001, "DeepSeek-V3 README_WEIGHTS: 671B in the main model (the MTP module apart)"),
    ("mistral-7b", 7.24e9, 0.005, "HF mistralai/Mistral-7B-v0.1: 7.24B"),
    ("qwen2.5-7b", 7.61e9, 0.005, "Qwen/Qwen2.5-7B model card: 7.61B (we count 7.615B less the 0.1M q/k/v biases)"),
    ("qwen2.5-72b", 72.7e9, 0.005, "Qwen/Qwen2.5-72B model card: 72.7B"),
    ("gemma-7b", 8_538_074_112, 0.0001, "Gemma Team 2024, Table 2: 786,825,216 + 7,751,248,896 (its embedding "
     "counts 256,128 rows, the checkpoint 256,000)"),
    ("llama3.2-1b", 1.23e9, 0.005, "meta-llama/Llama-3.2-1B model card: 1.23B (we count 1.236B: the card's figure is "
     "cut, not rounded)"),
    ("llama3.2-3b", 3.21e9, 0.005, "meta-llama/Llama-3.2-3B model card: 3.21B"),
    ("opt-175b", 175e9, 0.01, "Zhang et al. 2022 (OPT), Table 1: 175B"),
    # NeMo's GPT and Nemotron configs name a nominal size (GPTConfig5B "a 5B parameter GPT model", the performance
    # tables' GPT3-5B, Nemotron-8B, ...): within a few percent, each tolerance stated against our count.
    ("gpt3-5b", 5e9, 0.015, "NeMo GPTConfig5B docstring: 5B (we count 5.05B)"),
    ("gpt3-20b", 20e9, 0.015, "NeMo GPTConfig20B docstring: 20B (we count 20.26B)"),
    ("nemotron3-8b", 8e9, 0.07, "nvidia/nemotron-3-8b-base-4k model card: 8 billion, a nominal size (we count 8.54B, "
     "of which 2.1B in the untied 256k-row embedding and output)"),
    ("nemotron3-22b", 22e9, 0.04, "NeMo Nemotron3Config22B, the performance tables' Nemotron-22B: 22B (we count "
     "21.27B)"),
    ("nemotron4-15b", 15.7e9, 0.005, "Parmar et al. 2024, Nemotron-4 15B Technical Report, Table 1: 3.2B embedding + "
     "12.5B non-embedding (we count 15.63B)"),
    ("llama4-scout-17b-16e", 109e9, 0.015, "meta-llama/Llama-4-Scout-17B-16E model card: 109B total (we count 107.8B)"),
    ("grok1-314b", 314e9, 0.007, "xai-org/grok-1 README: 314B parameters (we count 315.7B, its extra norms left out)"),
]

# (preset, published active parameters per token, relative tolerance, source)
ACTIVE = [
    ("mixtral-8x7b", 12.9e9, 0.005, "Jiang et al. 2024, section 2: 13B active (12.9B in its abstract's figure)"),
    ("grok1-314b", 83.76e9, 0.001, "xai-org/grok-1 run.py: 2 of 8 experts a token; by hand 64 x (2 x 3 x 6144 x "
     "32768 + 2 x 6144 x 6144 + 2 x 6144 x 1024 + 6144 x 8) + 131072 x 6144 = 83.76B"),
    ("mixtral-8x22b", 39e9, 0.005, "Mistral AI, Mixtral 8x22B announcement: 39B active"),
    ("qwen3-30b-a3b", 3.3e9, 0.02, "Qwen/Qwen3-30B-A3B model card: 3.3B activated, 29.9B non-embedding (we count "
     "3.35B and 29.9B: the card's figure is cut, not rounded)"),
    ("qwen3-235b-a22b", 22e9, 0.01, "Qwen/Qwen3-235B-A22B model card: 22B activated (we count 22.2B)"),
    ("llama4-scout-17b-16e", 17e9, 0.015, "meta-llama/Llama-4-Scout-17B-16E model card: 17B activated (we count "
     "17.17B)"),
    ("deepseek-v3", 36.6e9 + 129280 * 7168, 0.002, "DeepSeek-V3 README_WEIGHTS: 36.6B activated, the output head's "
     "0.9B among them but not the input embedding's 0.93B, which active_params counts"),
]


@pytest.mark.parametrize(("preset", "published", "rel", "source"), ACTIVE, ids=[a[0] for a in ACTIVE])
def test_moe_active_params_match_published(preset, published, rel, source):
    """A mixture of experts' active parameters (what one token meets) are within tolerance of the published figure."""
    assert transformer(load_model(preset)).active_params == pytest.approx(published, rel=rel), source


def test_tiny_moe_by_hand():
    """The tiny model with 4 experts, top-2, one shared expert of width 6: per expert 3*8*6 = 144; routed 4*144
    = 576, shared 144, router 8*4 = 32: MLP 752; a layer 192 + 752 + 16 = 960; total 2*960 + 168 = 2088.
    A token meets 2 of the 4 routed experts: active = 2088 - 2 * 2 * 144 = 1512."""
    model = transformer(_tiny(experts=4, experts_per_token=2, expert_ffn_hidden=6, shared_experts=1))
    assert (model.expert_params_per_layer, model.mlp_params_per_layer) == (576, 752)
    assert (model.total_params, model.active_params) == (2088, 1512)
    # the GEMMs a token meets: qkv 8x16, attn_out 8x8, router 8x4, shared 8x12 + 6x8, 2 routed x (8x12 + 6x8)
    assert model.matmul_params_per_layer == 128 + 64 + 32 + 144 + 2 * 144


def test_moe_fields_are_checked():
    """top-k above the expert count, or expert fields on a dense model, are refused with the field named."""
    with pytest.raises(ValueError, match=r"experts_per_token \(3\) exceeds experts \(2\)"):
        _tiny(experts=2, experts_per_token=3)
    with pytest.raises(ValueError, match="set experts > 1"):
        _tiny(shared_experts=1)
    with pytest.raises(ValueError, match="set experts > 1"):
        _tiny(dense_layers=1)
    with pytest.raises(ValueError, match=r"dense_layers \(2\) must leave some of the 2 blocks"):
        _tiny(experts=4, experts_per_token=2, dense_layers=2)


def test_dense_first_blocks_by_hand():
    """The tiny MoE (4 experts of 6, top-2, one shared) with its first block dense (gated MLP of f = 12): the
    dense block 192 + 288 + 16 = 496, the mixture 960, roots 168: 1624; a token meets the mixture's 2 of 4
    routed experts: active 1624 - 2 * 144 = 1336. Forward FLOPs per token: 2 x (qkv 128 + attn_out 64 + MLP
    288) + 4 s a d = 960 + 512 (s 16) for the dense block, 2 x 656 + 512 for the mixture; the blocks come dense
    first (block_counts of a pipeline chunk)."""
    model = transformer(_tiny(experts=4, experts_per_token=2, expert_ffn_hidden=6, shared_experts=1,
                              dense_layers=1))
    dense = model.dense_block
    assert not dense.spec.moe and dense.params_per_layer == 496 and model.params_per_layer == 960
    assert [(block.spec.moe, n) for block, n in model.blocks] == [(False, 1), (True, 1)]
    assert (model.total_params, model.active_params, model.moe_layers) == (1624, 1336, 1)
    assert model.model_flops_per_token(16) == 3 * ((960 + 512) + (2 * 656 + 512) + 2 * 8 * 10)
    assert [(block.spec.moe, n) for block, n in model.block_counts(0, 1)] == [(False, 1)]
    assert [(block.spec.moe, n) for block, n in model.block_counts(1, 2)] == [(True, 1)]
    assert [n for _, n in transformer(_tiny(experts=4, experts_per_token=2)).block_counts(0, 2)] == [2]


def test_head_dim_apart_from_hidden_over_heads_by_hand():
    """h = 8, a = 2 heads of d = 6 (a d = 12 != h), kv = 1: Q and O 8 x 12 each, K and V 8 x 6: 96 + 96 + 48 + 48
    = 288; the fused qkv GEMM is n = 12 + 2 x 6 = 24 wide, attn_out k = 12; attention FLOPs 4 s a d per token."""
    model = transformer(_tiny(head_dim=6))
    assert (model.q_dim, model.kv_dim, model.attention_params_per_layer) == (12, 6, 288)
    assert model.layer_gemms(5)[:2] == [("qkv", 5, 24, 8), ("attn_out", 5, 8, 12)]
    assert model.attention_forward_flops(5, 16) == 4 * 5 * 16 * 12


@pytest.mark.parametrize(("preset", "published", "rel", "source"), PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_preset_total_matches_published(preset, published, rel, source):
    """Each preset's total parameter count is within tolerance of its published figure."""
    total = transformer(load_model(preset)).total_params
    assert total == pytest.approx(published, rel=rel), source


def test_mpt70b_matches_llm_foundry_exactly():
    """The mpt-70b preset has exactly the 64,862,437,376 parameters of LLM Foundry's benchmark README
    (../shared/data/training/cases.yaml)."""
    assert transformer(load_model("mpt-70b")).total_params == 64_862_437_376


# LLM Foundry benchmark shapes (scripts/train/yamls/pretrain/mpt-<size>.yaml, MPTConfig defaults: biases,
# learned positions at max_seq_len, tied, vocab 50368) and the README's counts, as in cases.yaml.
FOUNDRY = [
    ("MPT-30b", 48, 7168, 56, 2048, 29_975_214_080),
    ("MPT-13b", 40, 5120, 40, 2048, 12_853_954_560),
    ("MPT-7b", 32, 4096, 32, 2048, 6_658_859_008),
    ("MPT-1b", 24, 2048, 16, 2048, 1_315_950_592),
    ("MPT-125m", 12, 768, 12, 65536, 174_070_272),
]


@pytest.mark.parametrize(("name", "layers", "hidden", "heads", "seq_len", "count"), FOUNDRY,
                         ids=[f[0] for f in FOUNDRY])
def test_llm_foundry_conventions_reproduce_benchmark_counts(name, layers, hidden, heads, seq_len, count):
    """With LLM Foundry's conventions every benchmark model's README count is reproduced exactly."""
    spec = ModelSpec(name=name, layers=layers, hidden=hidden, heads=heads, vocab=50368, max_seq_len=seq_len,
                     learned_positions=True, tied_embeddings=True, bias=True)
    assert transformer(spec).total_params == count


def test_multi_head_latent_attention_by_hand():
    """MLA on the tiny model (h = 8, a = 2): query latent 4, key/value latent 3, per head 2 + 1 rotary for q/k
    and 2 for v. GEMMs q_down 8 -> 4, q_up 4 -> 2 x 3 = 6, kv_down 8 -> 3 + 1, kv_up 3 -> 2 x (2 + 2) = 8,
    attn_out 2 x 2 = 4 -> 8: 32 + 24 + 32 + 24 + 32 = 144 weights and the latents' norms 4 + 3: 151 a block.
    Attention FLOPs 2 x tokens x s x (q 6 + out 4); widths q 6, k 6, v 4, out 4. Without a query latent, q_up
    reads the hidden state (8 -> 6). kv_heads, head_dim and biases do not apply to it."""
    mla = {"q_lora_rank": 4, "kv_lora_rank": 3, "qk_nope_head_dim": 2, "qk_rope_head_dim": 1, "v_head_dim": 2}
    model = transformer(_tiny(kv_heads=None, mla=mla))
    assert model.layer_gemms(5)[:5] == [("q_down", 5, 4, 8), ("q_up", 5, 6, 4), ("kv_down", 5, 4, 8),
                                        ("kv_up", 5, 8, 3), ("attn_out", 5, 8, 4)]
    assert model.attention_params_per_layer == 144 + 7
    assert (model.q_dim, model.k_dim, model.v_dim, model.out_dim) == (6, 6, 4, 4)
    assert model.attention_forward_flops(5, 16) == 2 * 5 * 16 * (6 + 4)
    direct = transformer(_tiny(kv_heads=None, mla=mla | {"q_lora_rank": None}))
    assert direct.layer_gemms(5)[0] == ("q_up", 5, 6, 8)
    for field in ({"kv_heads": 1}, {"head_dim": 4}, {"bias": True}):
        with pytest.raises(ValueError, match="do not apply to multi-head latent attention"):
            _tiny(**({"kv_heads": None} | field), mla=mla)
