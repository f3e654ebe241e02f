"""HuggingFace config.json import: llama, gpt2 and mpt layouts, and the errors for what it cannot read."""

from __future__ import annotations

import json

import pytest

from simulator.core.errors import ConfigError
from workloads.model import transformer
from workloads.presets import load_model, model_from_hf_config

SHAPE = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "gated_mlp", "vocab", "max_seq_len",
         "tied_embeddings", "learned_positions", "bias", "experts", "experts_per_token", "expert_ffn_hidden")

def _shape(spec):
    """The spec's shape with defaults resolved (kv_heads, head_dim, ffn_hidden, expert_ffn_hidden)."""
    model = transformer(spec)
    return {field: getattr(model, field, getattr(spec, field)) for field in SHAPE}


def test_llama_config_round_trips_to_the_preset(llama2_70b_config):
    """A Llama-2-70B config.json gives the llama2-70b preset's shape, name and parameter count."""
    spec = model_from_hf_config(llama2_70b_config, "config.json")
    assert _shape(spec) == _shape(load_model("llama2-70b"))
    assert spec.name == "meta-llama/Llama-2-70b-hf" and spec.source == "config.json"
    assert transformer(spec).total_params == 68_976_648_192


def test_gpt2_config_defaults_to_four_h_biases_and_tied():
    """gpt2-xl's config (n_inner null) gives f = 4 h, biases, learned positions and tied embeddings."""
    text = json.dumps({"model_type": "gpt2", "n_layer": 48, "n_embd": 1600, "n_head": 25, "n_inner": None,
                       "n_positions": 1024, "vocab_size": 50257})
    assert _shape(model_from_hf_config(text, "gpt2-xl")) == _shape(load_model("gpt2-xl"))


def test_mpt_config_reads_no_bias_and_alibi():
    """mosaicml/mpt-7b's config (no_bias, alibi, expansion_ratio 4) gives the mpt-7b preset's shape."""
    text = json.dumps({"model_type": "mpt", "n_layers": 32, "d_model": 4096, "n_heads": 32, "expansion_ratio": 4,
                       "max_seq_len": 2048, "vocab_size": 50432, "no_bias": True, "learned_pos_emb": True,
                       "attn_config": {"alibi": True, "attn_impl": "torch"}})
    assert _shape(model_from_hf_config(text, "mpt-7b")) == _shape(load_model("mpt-7b"))


def test_missing_key_is_named(llama2_70b_config):
    """A llama config without intermediate_size is refused, naming the key."""
    data = json.loads(llama2_70b_config)
    del data["intermediate_size"]
    with pytest.raises(ConfigError, match="cfg.json: config.json lacks 'intermediate_size'"):
        model_from_hf_config(json.dumps(data), "cfg.json")


@pytest.mark.parametrize(("change", "message"), [
    ({"d_model": "64"}, "d_model should be an integer, got '64'"),  # was repeated as a string: f = 64646464
    ({"expansion_ratio": "x"}, "expansion_ratio should be a number, got 'x'"),
    ({"attn_config": "alibi"}, "attn_config should be a mapping, got 'alibi'"),
])
def test_mpt_fields_of_the_wrong_type_are_named(change, message):
    """An MPT config whose MLP width or attention settings have the wrong type is refused, naming the key (a
    string d_model had silently given a model with a 64-million-wide MLP)."""
    data = {"model_type": "mpt", "n_layers": 2, "d_model": 64, "n_heads": 4, "max_seq_len": 128, "vocab_size": 100,
            **change}
    with pytest.raises(ConfigError, match=f"mpt.json: {message}"):
        model_from_hf_config(json.dumps(data), "mpt.json")


def test_llama_head_dim_of_the_wrong_type_is_named(llama2_70b_config):
    """A llama config whose head_dim is a string is refused, naming the key."""
    data = {**json.loads(llama2_70b_config), "head_dim": "128"}
    with pytest.raises(ConfigError, match="cfg.json: head_dim should be an integer, got '128'"):
        model_from_hf_config(json.dumps(data), "cfg.json")


def test_unknown_model_type_lists_the_supported():
    """An unsupported model_type (or none) is refused with the supported list."""
    with pytest.raises(ConfigError, match="model_type 't5' not supported; supported: bert, deepseek_v2, "
                                          "deepseek_v3, gpt2, gpt_neox"):
        model_from_hf_config('{"model_type": "t5", "d_model": 1024}', "t5.json")


def test_head_dim_other_than_hidden_over_heads_is_kept(llama2_70b_config):
    """A config whose head_dim x heads differs from hidden_size (Mistral-Nemo style) keeps its head_dim: Q and O
    are 8192 x (64 x 256) and K, V 8192 x (8 x 256), not hidden x hidden; a head_dim equal to hidden / heads is
    the default and left unset."""
    data = json.loads(llama2_70b_config) | {"model_type": "mistral", "head_dim": 256}
    spec = model_from_hf_config(json.dumps(data), "nemo.json")
    assert spec.head_dim == 256
    assert transformer(spec).attention_params_per_layer == 2 * 8192 * 64 * 256 + 2 * 8192 * 8 * 256
    same = json.loads(llama2_70b_config) | {"head_dim": 128}
    assert model_from_hf_config(json.dumps(same), "70b.json").head_dim is None


def test_invalid_json_is_a_config_error():
    """Text that is not JSON is refused with the source and line."""
    with pytest.raises(ConfigError, match=r"broken.json: not valid JSON: .* \(line 1\)"):
        model_from_hf_config("{not json", "broken.json")


def test_mixtral_config_imports_its_experts():
    """A Mixtral config.json (model_type mixtral) gives the experts and top-k: the preset's shape."""
    config = ('{"model_type": "mixtral", "_name_or_path": "mistralai/Mixtral-8x7B-v0.1", "num_hidden_layers": 32, '
              '"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, '
              '"vocab_size": 32000, "max_position_embeddings": 32768, "num_local_experts": 8, '
              '"num_experts_per_tok": 2}')
    spec = model_from_hf_config(config, "config.json")
    assert (spec.experts, spec.experts_per_token) == (8, 2)
    assert _shape(spec) == _shape(load_model("mixtral-8x7b"))


def test_qwen3_moe_config_imports_head_dim_and_experts():
    """Qwen3-30B-A3B's config.json (model_type qwen3_moe): head_dim 128 apart from hidden / heads = 64, 128 experts
    of width 768, 8 per token: the preset's shape; dense first blocks (mlp_only_layers 0 .. k - 1) are read as
    dense_layers, other dense blocks among the MoE ones are refused."""
    data = {"model_type": "qwen3_moe", "_name_or_path": "Qwen/Qwen3-30B-A3B", "num_hidden_layers": 48,
            "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
            "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
            "vocab_size": 151936, "max_position_embeddings": 32768, "tie_word_embeddings": False,
            "decoder_sparse_step": 1, "mlp_only_layers": []}
    spec = model_from_hf_config(json.dumps(data), "config.json")
    assert _shape(spec) == _shape(load_model("qwen3-30b-a3b"))
    with pytest.raises(ConfigError, match="mlp_only_layers"):
        model_from_hf_config(json.dumps(data | {"mlp_only_layers": [3]}), "config.json")
    with pytest.raises(ConfigError, match="decoder_sparse_step 2"):
        model_from_hf_config(json.dumps(data | {"decoder_sparse_step": 2}), "config.json")
    first = model_from_hf_config(json.dumps(data | {"mlp_only_layers": [1, 0]}), "config.json")
    assert first.dense_layers == 2  # dense first blocks: of intermediate_size
    with pytest.raises(ConfigError, match="mlp_only_layers must be a list of block indices, got 3"):
        model_from_hf_config(json.dumps(data | {"mlp_only_layers": 3}), "config.json")  # was a TypeError
    assert model_from_hf_config(json.dumps(data | {"decoder_sparse_step": None}), "config.json").dense_layers == 0


def test_qwen3_235b_config_imports_as_the_preset():
    """Qwen3-235B-A22B's config.json: 94 blocks of 4096, 64 heads of 128 (4 kv), 128 experts of width 1536, 8 per
    token (HF Qwen/Qwen3-235B-A22B): the qwen3-235b-a22b preset's shape."""
    data = {"model_type": "qwen3_moe", "_name_or_path": "Qwen/Qwen3-235B-A22B", "num_hidden_layers": 94,
            "hidden_size": 4096, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
            "intermediate_size": 12288, "moe_intermediate_size": 1536, "num_experts": 128, "num_experts_per_tok": 8,
            "vocab_size": 151936, "max_position_embeddings": 32768, "tie_word_embeddings": False,
            "decoder_sparse_step": 1, "mlp_only_layers": []}
    assert _shape(model_from_hf_config(json.dumps(data), "config.json")) == _shape(load_model("qwen3-235b-a22b"))


def test_deepseek_v3_config_imports_as_the_preset():
    """DeepSeek-V3's config.json (model_type deepseek_v3): MLA widths, 256 routed experts of 2048 (8 per token), one
    shared, the first 3 blocks dense of 18432: the deepseek-v3 preset's shape (its multi-token prediction module,
    num_nextn_predict_layers, left out); mixtures only every few blocks (moe_layer_freq 2) are refused."""
    data = {"model_type": "deepseek_v3", "_name_or_path": "deepseek-ai/DeepSeek-V3", "num_hidden_layers": 61,
            "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
            "num_attention_heads": 128, "num_key_value_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1,
            "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1, "q_lora_rank": 1536,
            "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
            "vocab_size": 129280, "max_position_embeddings": 4096, "tie_word_embeddings": False,
            "num_nextn_predict_layers": 1}
    spec = model_from_hf_config(json.dumps(data), "config.json")
    preset = load_model("deepseek-v3")
    assert _shape(spec) == _shape(preset)
    assert (spec.mla, spec.dense_layers, spec.shared_experts) == (preset.mla, 3, 1)
    with pytest.raises(ConfigError, match="moe_layer_freq 2"):
        model_from_hf_config(json.dumps(data | {"moe_layer_freq": 2}), "config.json")
    with pytest.raises(ConfigError, match="attention_bias"):
        model_from_hf_config(json.dumps(data | {"attention_bias": True}), "config.json")
    assert model_from_hf_config(json.dumps(data | {"moe_layer_freq": None}), "config.json").dense_layers == 3
