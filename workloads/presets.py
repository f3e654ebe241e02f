"""Model presets (package data in workloads/presets/*.yaml, one ModelSpec per file with each figure's
source in a comment), HuggingFace config.json import, and the resolution of a `--model NAME|FILE`
argument to a ModelSpec.

`resolve_model` is the one function of this package that reads a user file; everything else takes text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simulator.core.errors import ConfigError
from simulator.core.input_file import MAX_INT, read_input_text
from simulator.core.json_text import load_json_text
from simulator.core.yaml_text import load_yaml_text, package_yaml_texts
from workloads.model import transformer
from workloads.spec import ModelSpec

_PRESET_DIR = "presets"

# HuggingFace config.json layouts: ModelSpec field -> required config key.
_LLAMA_KEYS = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
               "ffn_hidden": "intermediate_size", "vocab": "vocab_size", "max_seq_len": "max_position_embeddings"}
_GPT2_KEYS = {"layers": "n_layer", "hidden": "n_embd", "heads": "n_head", "vocab": "vocab_size",
              "max_seq_len": "n_positions"}
_MPT_KEYS = {"layers": "n_layers", "hidden": "d_model", "heads": "n_heads", "vocab": "vocab_size",
             "max_seq_len": "max_seq_len"}

# model_type -> (keys, fields fixed by the architecture, tie_word_embeddings default in transformers)
_HF_FAMILIES: dict[str, tuple[dict[str, str], dict[str, bool], bool]] = {
    "llama": (_LLAMA_KEYS, {"gated_mlp": True, "bias": False, "learned_positions": False}, False),
    "mistral": (_LLAMA_KEYS, {"gated_mlp": True, "bias": False, "learned_positions": False}, False),
    "mixtral": (_LLAMA_KEYS, {"gated_mlp": True, "bias": False, "learned_positions": False}, False),
    "qwen3": (_LLAMA_KEYS, {"gated_mlp": True, "bias": False, "learned_positions": False}, False),
    "qwen3_moe": (_LLAMA_KEYS, {"gated_mlp": True, "bias": False, "learned_positions": False}, False),
    "deepseek_v2": (_LLAMA_KEYS, {"gated_mlp": True, "bias": False, "learned_positions": False}, False),
    "deepseek_v3": (_LLAMA_KEYS, {"gated_mlp": True, "bias": False, "learned_positions": False}, False),
    "kimi_k2": (_LLAMA_KEYS, {"gated_mlp": True, "bias": False, "learned_positions": False}, False),
    "gpt_neox": (_LLAMA_KEYS, {"gated_mlp": False, "bias": True, "learned_positions": False}, False),
    "bert": (_LLAMA_KEYS, {"gated_mlp": False, "bias": True, "learned_positions": True}, True),
    "gpt2": (_GPT2_KEYS, {"gated_mlp": False, "bias": True, "learned_positions": True}, True),
    "mpt": (_MPT_KEYS, {"gated_mlp": False}, True),
}


def _preset_texts() -> dict[str, str]:
    return package_yaml_texts("workloads", _PRESET_DIR)


def _describe(exc: ValidationError) -> str:
    """One line: `field: message` per error, joined by '; '."""
    parts = []
    for err in exc.errors():
        path = ".".join(str(p) for p in err["loc"]) or "model"
        parts.append(f"{path}: {str(err['msg']).removeprefix('Value error, ')}")
    return "; ".join(parts).replace("\n", " ")


def _mapping(data: Any, source: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of model fields, got {type(data).__name__}")
    return data


def _validated(data: Mapping[str, Any], source: str) -> ModelSpec:
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc)}") from None


def _summary(spec: ModelSpec) -> str:
    """E.g. '6.74B params: 32 layers x 4096, 32 heads, gated MLP 11008, vocab 32000'."""
    model = transformer(spec)
    n = model.total_params
    count = f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"
    kv = f" ({model.kv_heads} kv)" if model.kv_heads != spec.heads else ""
    mlp = f"{'gated ' if spec.gated_mlp else ''}MLP {model.expert_ffn_hidden}"
    active = ""
    if spec.moe:
        active = f" ({model.active_params / 1e9:.1f}B active)"
        shared = f" + {spec.shared_experts} shared" if spec.shared_experts else ""
        mlp = f"{spec.experts} experts (top-{spec.experts_per_token}){shared} x {mlp}"
    width = f" of {spec.head_dim}" if spec.head_dim else " (MLA)" if spec.mla else ""
    dense = f" ({spec.dense_layers} dense, MLP {model.ffn_hidden})" if spec.dense_layers else ""
    return (f"{count} params{active}: {spec.layers} layers{dense} x {spec.hidden}, {spec.heads} heads{width}{kv}, "
            f"{mlp}, vocab {spec.vocab}")


def list_models() -> list[tuple[str, str]]:
    """(name, one-line summary with the parameter count) of every preset, sorted by name."""
    return [(name, _summary(load_model(name))) for name in sorted(_preset_texts())]


def model_from_yaml_text(text: str, source: str) -> ModelSpec:
    """A ModelSpec from YAML text holding its fields; `source` names the text in errors."""
    return _validated(_mapping(load_yaml_text(text, source), source), source)


def load_model(name: str) -> ModelSpec:
    """The preset `name` (see list_models)."""
    texts = _preset_texts()
    if name not in texts:
        raise ConfigError(f"model preset {name!r} unknown; available: {', '.join(sorted(texts))}")
    return model_from_yaml_text(texts[name], f"model preset {name}")


def _required(data: Mapping[str, Any], key: str, source: str) -> Any:
    if data.get(key) is None:
        raise ConfigError(f"{source}: config.json lacks {key!r}, needed for model_type {data.get('model_type')!r}")
    return data[key]


def _number(data: Mapping[str, Any], key: str, source: str, default: float | None = None,
            integer: bool = True) -> Any:
    """data[key] (or `default` where absent or null) where the layout's own arithmetic needs a number: an
    integer (`integer`) or any real; a string, list or boolean there is refused, naming the key."""
    value = data.get(key)
    if value is None:
        if default is None:
            raise ConfigError(f"{source}: config.json lacks {key!r}, needed for model_type {data.get('model_type')!r}")
        return default
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise ConfigError(f"{source}: {key} should be {'an integer' if integer else 'a number'}, got {value!r}")
    return value


def _family_fields(model_type: str, data: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The fields a layout spells its own way: GQA, MLP width, biases, positions."""
    if model_type == "mixtral":  # MixtralConfig: num_local_experts 8, num_experts_per_tok 2 by default
        return {**_family_fields("mistral", data, source), "experts": data.get("num_local_experts", 8),
                "experts_per_token": data.get("num_experts_per_tok", 2)}
    if model_type == "qwen3_moe":  # Qwen3MoeConfig: every block a mixture unless told otherwise
        listed = data.get("mlp_only_layers") or []
        if not isinstance(listed, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in listed):
            raise ConfigError(f"{source}: mlp_only_layers must be a list of block indices, got {listed!r}")
        dense, step = sorted(listed), data.get("decoder_sparse_step") or 1
        if dense != list(range(len(dense))) or step != 1:
            raise ConfigError(f"{source}: mlp_only_layers {dense} / decoder_sparse_step {step}: dense blocks among "
                              "the MoE ones other than the first ones are not modelled")
        return {**_family_fields("qwen3", data, source), "experts": _required(data, "num_experts", source),
                "experts_per_token": _required(data, "num_experts_per_tok", source),
                "expert_ffn_hidden": _required(data, "moe_intermediate_size", source), "dense_layers": len(dense)}
    if model_type in ("deepseek_v2", "deepseek_v3", "kimi_k2"):  # DeepseekV3Config; Kimi K2 has its layout
        if (data.get("moe_layer_freq") or 1) != 1:
            raise ConfigError(f"{source}: moe_layer_freq {data['moe_layer_freq']}: mixtures only every few blocks "
                              "are not modelled")
        if data.get("attention_bias"):
            raise ConfigError(f"{source}: attention_bias true is not modelled (bias-free attention only)")
        fields: dict[str, Any] = {"mla": {"q_lora_rank": data.get("q_lora_rank"),
                                          **{key: _required(data, key, source) for key in (
                                              "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")}}}
        if data.get("n_routed_experts"):  # the multi-token prediction module (num_nextn_predict_layers) is left out
            fields.update(experts=data["n_routed_experts"],
                          experts_per_token=_required(data, "num_experts_per_tok", source),
                          expert_ffn_hidden=_required(data, "moe_intermediate_size", source),
                          shared_experts=data.get("n_shared_experts") or 0,
                          dense_layers=data.get("first_k_dense_replace") or 0)
        return fields
    if model_type in ("llama", "mistral", "qwen3"):  # Qwen3's per-head q/k RMSNorm (2 d a layer) is left out
        if data.get("attention_bias") or data.get("mlp_bias"):
            raise ConfigError(f"{source}: attention_bias/mlp_bias true is not modelled (only bias-free llama)")
        head_dim = _number(data, "head_dim", source) if data.get("head_dim") is not None else None
        apart = head_dim is not None and head_dim * _number(data, "num_attention_heads", source) != _number(
            data, "hidden_size", source)
        return {"kv_heads": data.get("num_key_value_heads"), "head_dim": head_dim if apart else None}
    if model_type == "gpt2":
        return {"ffn_hidden": data.get("n_inner")}
    if model_type == "mpt":  # MPTConfig defaults: no_bias false, learned_pos_emb true, alibi false
        attn_config = data.get("attn_config") or {}
        if not isinstance(attn_config, dict):
            raise ConfigError(f"{source}: attn_config should be a mapping, got {attn_config!r}")
        alibi = bool(attn_config.get("alibi", False))
        ratio, width = _number(data, "expansion_ratio", source, 4, integer=False), _number(data, "d_model", source)
        if not 0 < ratio * width <= MAX_INT:  # also NaN and infinity, which json reads from NaN and Infinity
            raise ConfigError(f"{source}: expansion_ratio {ratio!r} x d_model {width} is no MLP width "
                              "(expected e.g. expansion_ratio 4)")
        return {
            "ffn_hidden": int(ratio * width),
            "bias": not data.get("no_bias", False),
            "learned_positions": bool(data.get("learned_pos_emb", True)) and not alibi,
        }
    return {}


def model_from_hf_config(text: str, source: str) -> ModelSpec:
    """A ModelSpec from a HuggingFace config.json (text), by its model_type: llama, mistral, qwen3 (head_dim
    besides), mixtral (num_local_experts, num_experts_per_tok), qwen3_moe (num_experts, num_experts_per_tok,
    moe_intermediate_size, mlp_only_layers), deepseek_v2, deepseek_v3 and kimi_k2 (the MLA widths q_lora_rank,
    kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim; n_routed_experts, n_shared_experts,
    first_k_dense_replace; the multi-token prediction module left out) (num_hidden_layers, hidden_size,
    num_attention_heads, num_key_value_heads, intermediate_size, vocab_size, max_position_embeddings,
    tie_word_embeddings), gpt_neox and bert (same keys), gpt2 (n_layer, n_embd, n_head, n_inner,
    n_positions) and mpt (n_layers, d_model, n_heads, expansion_ratio, max_seq_len, no_bias,
    attn_config.alibi). Defaults are transformers'."""
    try:
        data = load_json_text(text, source)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: not valid JSON: {exc.msg} (line {exc.lineno})") from None
    data = _mapping(data, source)
    model_type = data.get("model_type")
    if not isinstance(model_type, str) or model_type not in _HF_FAMILIES:
        raise ConfigError(f"{source}: model_type {model_type!r} not supported; "
                          f"supported: {', '.join(sorted(_HF_FAMILIES))}")
    keys, fixed, tied_default = _HF_FAMILIES[model_type]
    fields: dict[str, Any] = {field: _required(data, key, source) for field, key in keys.items()}
    fields.update(fixed)
    fields["tied_embeddings"] = data.get("tie_word_embeddings", tied_default)
    fields.update({k: v for k, v in _family_fields(model_type, data, source).items() if v is not None})
    fields["name"] = data.get("_name_or_path") or source
    fields["source"] = source
    return _validated(fields, source)


def resolve_model(name_or_path: str) -> ModelSpec:
    """A preset name, a YAML file of ModelSpec fields, or a HuggingFace config.json (a .json file, or
    a folder holding config.json), read here."""
    if name_or_path in _preset_texts():
        return load_model(name_or_path)
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    if path.suffix == ".json":
        return model_from_hf_config(read_input_text(path, "model file"), str(path))
    if path.suffix in (".yaml", ".yml") or path.exists():
        return model_from_yaml_text(read_input_text(path, "model file"), str(path))
    return load_model(name_or_path)
