"""Published training-throughput cases (../shared/data/training/cases.yaml): parsing, and the lowering
of each case onto the specs the predictor takes, or the reason it cannot be expressed.

A case is lowered to (TopologySpec, TrainingSpec, ModelSpec): data parallelism (FSDP, ZeRO-1/2/3, DDP)
with tensor and pipeline parallelism (training_parallel: degrees, placement, schedule and the framework's
conventions) and context parallelism (cp). A layout must fit: tp x pp x cp divides the GPUs and a stated
dp gives tp x pp x cp x dp = GPUs, else skipped.
Every field a case does not state and that had to be filled in is named in the
mapped case's `defaults` ("flagged" cases). The fillers, in one place:

- GPUs per node: the preset's (8; 16 on DGX-2). Inter-node network: the preset's NICs and transport.
- seq_len: 8192 for torchtitan (its llama3 train configs), else 2048. Precision: bf16, or fp16 on GPUs
  without bf16 (V100). Activation checkpointing: none. FFN: 4 x hidden. FSDP sharding: FULL_SHARD.
- Batch: micro-batch = global batch / (data-parallel ranks x grad_accum); no global batch: no
  accumulation. With PP the micro-batch is one pipeline micro-step's, global = micro x dp x micro-steps,
  and an unstated one is 1 (Megatron-LM's pipeline-parallel example scripts).
- A strategy list naming no data-parallel strategy ('tp', 'pp'): ddp, or the framework's (zero1 for
  Megatron-Core's distributed optimizer, NeMo, Megatron-DeepSpeed bf16). LoRA fine-tuning takes its stated
  rank (lora_rank), or NeMo's default 32 for NeMo; packed sequences whose sample length
  (packed_sample_len) is not stated: skipped. A released model
  named without its shape ("LLAMA2-7B") takes its model preset's public config, flagged. Fields a source
  states once for a table or document fill its rows (_STATED_ONCE), and a stated size gives the layer
  count (_layers_from_size), flagged. A model stated by its size alone takes Megatron-LM's GPT shape at
  that size (_shape_from_size), flagged; a micro-batch stated in tokens (micro_batch_tokens_per_GPU) is whole
  sequences, one of those tokens where no sequence length is stated and they are fewer than the default.
- The optimizer is AdamW for every case (no source names another): not flagged.
- Attention: fused (flash) except in Megatron-LM and Megatron-DeepSpeed runs, which predate their
  flash-attention support and pass the score matrix through memory (not flagged: a fact of the era);
  cuDNN's kernel in Megatron-Core and NeMo runs (Transformer Engine's choice on Hopper and later),
  FlashAttention-2 elsewhere.
Free text is read with a few patterns: "A100 80GB (Selene, DGX A100)" -> A100-SXM4-80GB on dgx-a100,
"4 x 100 Gbps IB" -> 4 NICs of 100 Gb/s, "400 Gb/s per GPU" -> one 400 Gb/s NIC per GPU ("50 GB/s": bytes), "1600 Gbps"
-> the node total over the preset's NIC count; "8K" tokens = 8192, "250k" vocabulary = 250000.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast, get_args

from pydantic import ValidationError

from simulator.core.errors import ClusterSimError, ConfigError
from simulator.core.units import binary_count_text, parse_count
from simulator.core.yaml_text import load_yaml_text
from simulator.scenario import with_framework
from simulator.validation.training_cluster import SAYS_NONE, UNSTATED, Unexpressible, topology_of
from simulator.validation.training_parallel import VENDOR_PREFIX, framework_of, lower_parallel
from simulator.validation.training_strategy import (
    FAMILY_OF_KIND,
    KNOWN_STRATEGIES,
    Family,
    model_parallel_degrees,
    stated_degrees,
    strategy_family,
    strategy_names,
    strategy_spec,
)
from topologies.hardware import gpu_spec
from topologies.spec import TopologySpec
from workloads.frameworks import FRAMEWORKS, Framework
from workloads.pipeline_layout import layout_counts
from workloads.presets import load_model
from workloads.remat import is_remat_policy
from workloads.spec import (
    AttentionKernel,
    Checkpointing,
    Fp8Recipe,
    MlaSpec,
    ModelSpec,
    Precision,
    RoutingSpec,
    StrategyKind,
    StrategySpec,
    TrainingSpec,
    checkpointing_of,
    fp8_recipe_of,
)

_SECTIONS = ("model", "training", "cluster", "metrics")
# Field -> what parse_cases accepts besides null ("int", "str", "bool", "number", "int|str", "bool|str", "str-list").
_FIELD_TYPES: dict[str, dict[str, str]] = {
    "model": {"name": "str", "layers": "int", "hidden": "int", "heads": "int", "kv_heads": "int", "ffn": "int",
              "vocab": "int|str", "seq_len": "int|str", "experts": "int", "experts_per_token": "int",
              "expert_ffn": "int", "shared_experts": "int", "head_dim": "int", "dense_layers": "int",
              "q_lora_rank": "int", "kv_lora_rank": "int", "qk_nope_head_dim": "int", "qk_rope_head_dim": "int",
              "v_head_dim": "int", "attention": "str", "gated_mlp": "bool", "tied_embeddings": "bool",
              "activation": "str"},
    "training": {"strategy": "str-list", "tp": "int", "pp": "int", "cp": "int", "ep": "int", "etp": "int", "dp": "int",
                 "fsdp": "int", "vp": "int", "layers_per_virtual_stage": "int",
                 "model_parallel_size_tp_x_pp": "int", "micro_batch": "int", "global_batch": "int",
                 "grad_accum": "int", "gradient_accumulation_steps": "int", "micro_num": "int",
                 "num_microbatches": "int", "zero_stage": "int|str", "zeropp": "bool", "precision": "str",
                 "activation_checkpointing": "bool|str", "fsdp_sharding_strategy": "str", "offload": "bool|str",
                 "fsdp_mixed_precision_mode": "str", "packed_sample_len": "int", "lora_rank": "int",
                 "lora_targets": "str-list", "fp8": "bool|str", "fp8_recipe": "str", "overlap_grad_reduce": "bool",
                 "overlap_param_gather": "bool", "use_distributed_optimizer": "bool",
                 "recompute_layers": "int", "recompute_num_layers": "int", "tp_comm_overlap": "bool",
                 "capacity_factor": "number", "moe_expert_capacity_factor": "number", "pad_to_capacity": "bool",
                 "moe_pad_expert_input_to_capacity": "bool", "pack_sample_into_one": "bool",
                 "zero1_group_size": "int", "torch_compile": "bool", "async_tp": "bool",
                 "sequence_parallel": "bool", "moe_token_dispatcher": "str", "recompute_modules": "str-list",
                 "pipeline_split": "str", "pipeline_layout": "str", "num_layers_in_first_pipeline_stage": "int",
                 "num_layers_in_last_pipeline_stage": "int", "account_for_embedding_in_pipeline_split": "bool",
                 "account_for_loss_in_pipeline_split": "bool", "flops_counting": "str"},
    "cluster": {"gpu": "str", "num_gpus": "int", "gpus_per_node": "int", "nodes": "int", "intra_node": "str",
                "inter_node": "str", "inter_node_bw_per_node": "str", "ib_links": "str"},
}
# training.flops_counting: whether the source's FLOP counter counts causal attention's score FLOPs whole or half
FLOPS_COUNTING = ("full", "causal")
_K_NUMBER = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kK])?\s*(?:tokens?|sequences?|samples?)?\s*$")


@dataclass(frozen=True)
class TrainingCase:
    """One published measurement, its sections kept as written (see the data README)."""

    id: str
    model: Mapping[str, Any]
    training: Mapping[str, Any]
    cluster: Mapping[str, Any]
    metrics: Mapping[str, Any]
    note: str = ""
    where: str = ""  # the source section's url and table, as written ("" when the case has none)
    title: str = ""  # the source section's title, as written
    problem: str | None = None  # why the entry could not be read (its sections are then empty): parse_cases

    @property
    def source(self) -> str:
        """The publisher: the id's first dash-separated token (llmfoundry, zeropp, torchtitan, ...)."""
        return self.id.split("-", 1)[0]


def _type_ok(value: Any, kind: str) -> bool:
    if value is None:
        return True
    is_int = isinstance(value, int) and not isinstance(value, bool)
    checks = {
        "int": is_int,
        "str": isinstance(value, str),
        "bool": isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "int|str": is_int or isinstance(value, str),
        "bool|str": isinstance(value, bool | str),
        "str-list": isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value)),
    }
    return checks[kind]


_WHOLE_NUMBER = re.compile(r"^\s*\d{1,3}(?:[,_]\d{3})+\s*$|^\s*\d+\s*$")
# a yes or no written as text ('false' in quotes, 'off', 'enabled')
_SAID_BOOL = {**dict.fromkeys(("true", "yes", "on", "enabled"), True),
              **dict.fromkeys(("false", "no", "off", "disabled", "none"), False)}
# a count written with its label or noun: 'GBS 128', 'TP4', 'MBS=1', 'top-2', '128 sequences', '64 GPUs',
# '1 (per GPU)'; a count of tokens ('4M tokens', '128 (tokens)') is not one of sequences and is left to be refused
_LABELLED_COUNT = re.compile(r"^\s*(?:(?:[GM]BS|TP|PP|DP|CP|EP|VP|top)\s*[-=:]?\s*)?(\d{1,3}(?:,\d{3})+|\d+)\s*"
                             r"(?:(?:sequences|seqs|samples|GPUs|nodes|layers|heads)\b)?\s*(?:\((?![^)]*token)[^)]*\))?\s*$",
                             re.IGNORECASE)


def _coerced(value: Any, kind: str) -> Any:
    """A value written in another type than its field's but meaning the same: a whole number written as text
    ('2048', '4,096'), with its label or noun ('GBS 128', '64 GPUs': _LABELLED_COUNT) or as a float (2048.0) for an
    integer field; a number for a text field (400 -> '400'); a yes or no in words ('false', 'off', 'enabled') for a
    yes-or-no field."""
    if "int" in kind and isinstance(value, str) and _WHOLE_NUMBER.match(value) and "str" not in kind:
        return int(re.sub(r"[,_\s]", "", value))
    if kind == "int" and isinstance(value, str) and (labelled := _LABELLED_COUNT.match(value)) is not None:
        return int(labelled.group(1).replace(",", ""))
    if "int" in kind and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind == "str" and isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:g}"
    if kind == "bool" and isinstance(value, str) and (said := _SAID_BOOL.get(value.strip().lower())) is not None:
        return said
    return value


# other names of the sections' fields, matched in any case; a schema name the case also gives wins. Model: a
# mixture of experts' fields as configs write them (Hugging Face: Mixtral's num_local_experts, num_experts_per_tok;
# Qwen-MoE's num_experts, moe_intermediate_size; DeepSeek's n_routed_experts, n_shared_experts; Megatron-Core's
# --num-experts, --moe-router-topk, --moe-ffn-hidden-size; tables' top_k). Training: the frameworks' configs and
# flags (Megatron-LM / NeMo: tensor_model_parallel_size, micro_batch_size, global_batch_size, recompute_granularity;
# DeepSpeed: train_micro_batch_size_per_gpu, train_batch_size (the global batch); Hugging Face:
# per_device_train_batch_size, gradient_checkpointing). Cluster: the counts and parts as other tables head them.
_ALIASES: dict[str, dict[str, tuple[str, ...]]] = {
    "model": {
        # the shape under Megatron-LM's flags, Hugging Face config.json's, GPT-2's and torchtitan's names
        "layers": ("num_layers", "num_hidden_layers", "n_layers", "n_layer"),
        "hidden": ("hidden_size", "d_model", "n_embd", "dim"),
        "heads": ("num_attention_heads", "n_heads", "n_head"),
        "kv_heads": ("num_key_value_heads", "num_query_groups", "n_kv_heads"),
        "ffn": ("ffn_hidden_size", "intermediate_size", "d_ff", "ffn_dim"),
        "vocab": ("vocab_size", "padded_vocab_size"),
        "experts": ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts", "routed_experts"),
        "experts_per_token": ("top_k", "topk", "num_experts_per_tok", "num_experts_per_token", "experts_per_tok",
                              "moe_router_topk", "moe_topk", "router_topk", "active_experts"),
        "expert_ffn": ("moe_intermediate_size", "moe_ffn_hidden_size", "expert_ffn_hidden",
                       "expert_intermediate_size"),
        "shared_experts": ("n_shared_experts", "num_shared_experts"),
        # a head's width where heads x head_dim is not the hidden size (Megatron-LM's --kv-channels), and the
        # leading dense blocks of a mixture (DeepSeek's first_k_dense_replace)
        "head_dim": ("kv_channels", "head_size", "attention_head_dim"),
        "dense_layers": ("first_k_dense_replace", "num_dense_layers"),
        # the output layer's weight shared with the embedding (Hugging Face's tie_word_embeddings, NeMo's
        # share_embeddings_and_output_weights), and the MLP's activation as configs name it
        "tied_embeddings": ("tie_word_embeddings", "share_embeddings_and_output_weights", "tie_embeddings"),
        "activation": ("mlp_activation", "activation_function", "ffn_activation")},
    "training": {
        "tp": ("tensor_model_parallel_size", "tensor_parallel_size", "tensor_parallel", "tp_size", "tp_degree"),
        "pp": ("pipeline_model_parallel_size", "pipeline_parallel_size", "pipeline_parallel", "pp_size", "pp_degree"),
        "cp": ("context_parallel_size", "context_parallel", "cp_size", "cp_degree"),
        "ep": ("expert_model_parallel_size", "expert_parallel_size", "ep_size", "ep_degree"),
        "etp": ("expert_tensor_parallel_size",),
        "dp": ("data_parallel_size", "dp_size", "dp_degree"),
        "vp": ("virtual_pipeline_model_parallel_size", "virtual_pipeline_parallel_size", "vpp", "virtual_stages"),
        "pipeline_layout": ("pp_layout", "pipeline_model_parallel_layout"),
        # Megatron-Core's TransformerConfig names and Megatron-LM's flags for the uneven first and last stages
        "num_layers_in_first_pipeline_stage": ("decoder_first_pipeline_num_layers",),
        "num_layers_in_last_pipeline_stage": ("decoder_last_pipeline_num_layers",),
        "layers_per_virtual_stage": ("num_layers_per_virtual_pipeline_stage", "num_layers_per_virtual_stage",
                                     "layers_per_virtual_pipeline_stage"),
        "micro_batch": ("micro_batch_size", "mbs", "micro_batch_size_per_gpu", "train_micro_batch_size_per_gpu",
                        "per_device_train_batch_size"),
        "global_batch": ("global_batch_size", "gbs", "train_batch_size"),
        # Megatron-LM's --use-distributed-optimizer (DistributedDataParallelConfig's use_distributed_optimizer)
        "use_distributed_optimizer": ("distributed_optimizer",),
        "activation_checkpointing": ("recompute_granularity", "gradient_checkpointing", "activation_recomputation"),
        "lora_rank": ("lora_r", "lora_dim", "adapter_dim", "lora_adapter_dim"),
        "lora_targets": ("target_modules", "lora_target_modules", "lora_target"),
        "fp8": ("fp8_format", "use_fp8", "fp8_training", "float8", "enable_fp8"),
        # Megatron-LM's --use-flash-attn, Hugging Face's attn_implementation, Megatron-Core's attention_backend
        "flash_attention": ("use_flash_attn", "use_flash_attention", "flash_attn", "attn_implementation",
                            "attention_implementation", "attention_backend"),
        # Megatron-Core's --moe-token-dispatcher-type and --moe-flex-dispatcher-backend
        "moe_token_dispatcher": ("moe_token_dispatcher_type", "token_dispatcher", "moe_flex_dispatcher_backend")},
    "cluster": {
        "gpu": ("gpu_type", "gpu_model", "accelerator", "accelerator_type"),
        "num_gpus": ("gpus", "total_gpus", "gpu_count", "n_gpus", "world_size", "num_devices"),
        "nodes": ("num_nodes", "node_count", "n_nodes"),
        "gpus_per_node": ("gpus_per_host", "gpus_per_server", "devices_per_node", "nproc_per_node"),
        "inter_node": ("network", "inter_node_network")},
}
# keys that, unread, would change the job silently: a mixture of experts' (the model priced dense) and a
# parallel degree's (the layout); a case giving one under a name not read is refused, naming it
_UNREAD_MATTERS = (("model", re.compile(r"expert|moe|topk|top_k", re.IGNORECASE),
                    "a mixture of experts states experts, experts_per_token, expert_ffn, shared_experts"),
                   ("model", re.compile(r"head[_ -]?(dim|size)|channels|lora[_ -]?rank|latent|dense", re.IGNORECASE),
                    "the attention's shape is head_dim (where heads x head_dim is not hidden) or, for multi-head "
                    "latent attention, q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim; "
                    "a mixture's leading dense blocks are dense_layers"),
                   ("training", re.compile(r"(tensor|pipeline|context|expert|data|sequence)[_ -]?(model[_ -]?)?"
                                           r"parallel", re.IGNORECASE),
                    "state the degrees as tp, pp, cp, ep, dp (or etp, vp)"),
                   ("training", re.compile(r"pipeline.*(layout|num[_ -]?layers)|pp[_ -]?layout", re.IGNORECASE),
                    "state how layers split over the stages as pipeline_layout (Megatron-Core's "
                    "--pipeline-model-parallel-layout, e.g. Et|(tt|)*30L), pipeline_split, or "
                    "num_layers_in_first_pipeline_stage / num_layers_in_last_pipeline_stage"))
# where a case gives its sequence length in the training section, as configs do
_TRAINING_SEQ_LEN = ("seq_len", "seq_length", "sequence_length", "encoder_seq_length")


def _schema_keys(sections: dict[str, dict[str, Any]], where: str) -> None:
    """The sections' fields under their schema names (_ALIASES), in place; a key that matters but is not read
    (_UNREAD_MATTERS) is a ConfigError naming it; a sequence length the training section gives is the model's
    where the model section leaves it out."""
    for name, aliases in _ALIASES.items():
        section = sections[name]
        for field, names in aliases.items():
            for key in [key for key in section if key != field and str(key).lower() in (field, *names)]:
                value = section.pop(key)
                if section.get(field) is None:
                    section[field] = value
    for name, pattern, hint in _UNREAD_MATTERS:
        unread = [key for key, value in sections[name].items()
                  if pattern.search(str(key)) and value is not None and key not in _FIELD_TYPES[name]]
        if unread:
            raise ConfigError(f"{where}: {name}.{unread[0]}: not a field this tool reads; {hint}")
    stated = next((sections["training"][key] for key in _TRAINING_SEQ_LEN
                   if sections["training"].get(key) is not None), None)
    if stated is not None and sections["model"].get("seq_len") is None:
        sections["model"]["seq_len"] = stated


def _parse_one(entry: Any, source: str, index: int) -> TrainingCase:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{source}: case #{index}: expected a mapping with id, model, training, cluster, metrics")
    case_id = entry.get("id")
    if not isinstance(case_id, str) or not case_id.strip():
        raise ConfigError(f"{source}: case #{index}: id: expected a non-empty string, got {case_id!r}")
    where = f"{source}: case {case_id}"
    sections: dict[str, dict[str, Any]] = {}
    for name in _SECTIONS:
        section = entry.get(name)
        if not isinstance(section, Mapping):
            raise ConfigError(f"{where}: {name}: expected a mapping, got {type(section).__name__}")
        sections[name] = dict(section)
    _schema_keys(sections, where)
    for name, fields in _FIELD_TYPES.items():
        for key, kind in fields.items():
            value = sections[name].get(key)
            if value is not None:
                value = sections[name][key] = _coerced(value, kind)
            if not _type_ok(value, kind):
                raise ConfigError(f"{where}: {name}.{key}: expected {kind.replace('|', ' or ')} or null, "
                                  f"got {value!r}")
    counting = sections["training"].get("flops_counting")
    if counting is not None and str(counting).strip().lower() not in FLOPS_COUNTING:
        raise ConfigError(f"{where}: training.flops_counting: expected {' or '.join(FLOPS_COUNTING)} (how the "
                          f"source's FLOP counter counts causal attention), got {counting!r}")
    for key in ("seq_len", "vocab"):
        value = sections["model"].get(key)
        if isinstance(value, str) and not _k_match(value):
            raise ConfigError(f"{where}: model.{key}: expected an integer or a count like '8K', got {value!r}")
    for key, value in sections["metrics"].items():
        if value is not None and not isinstance(value, int | float | str):
            raise ConfigError(f"{where}: metrics.{key}: expected a number or a string, got {value!r}")
    note = entry.get("note") or ""
    if not isinstance(note, str):
        raise ConfigError(f"{where}: note: expected a string, got {type(note).__name__}")
    reference = entry.get("source")
    where_published = " | ".join(str(reference.get(key) or "") for key in ("url", "table")) \
        if isinstance(reference, Mapping) else ""
    title = str(reference.get("title") or "") if isinstance(reference, Mapping) else ""
    return TrainingCase(case_id, sections["model"], sections["training"], sections["cluster"],
                        sections["metrics"], note, where_published, title)


def parse_cases(text: str, source: str, strict: bool = False) -> list[TrainingCase]:
    """The cases of a YAML list in the schema of training/cases.yaml; `source` names the text in errors.

    A text that is no YAML list is a ConfigError. A malformed case (a section missing, a field of the wrong type,
    an id used before) is kept as a case with empty sections and its `problem`, a message naming the case (id, or
    index when the id is unusable) and the field, which the evaluation reports as the reason it is skipped: one
    bad entry does not hide the others. `strict`: a malformed case is that ConfigError instead.
    """
    data = load_yaml_text(text, source)
    if not isinstance(data, list):
        raise ConfigError(f"{source}: expected a YAML list of cases, got {type(data).__name__}")
    cases: list[TrainingCase] = []
    seen: set[str] = set()
    for index, entry in enumerate(data):
        try:
            case = _parse_one(entry, source, index)
            if case.id in seen:
                raise ConfigError(f"{source}: case {case.id}: id: duplicate")
        except ConfigError as exc:
            if strict:
                raise
            raw_id = entry.get("id") if isinstance(entry, Mapping) else None
            label = raw_id if isinstance(raw_id, str) and raw_id.strip() and raw_id not in seen \
                else f"case #{index}"
            case = TrainingCase(label, {}, {}, {}, {}, problem=str(exc))
        seen.add(case.id)
        cases.append(case)
    return cases


@dataclass(frozen=True)
class MappedCase:
    """A case lowered onto the predictor's specs, or the reason it is skipped (specs then None).

    family: the data-parallel strategy family (fsdp / zero / ddp; None: none understood).
    model_parallel: the case uses tensor, pipeline or context parallelism (a degree above 1, or unknown).
    """

    case: TrainingCase
    family: Family | None
    model_parallel: bool
    gpu: str | None
    defaults: tuple[str, ...]
    skipped: str | None = None
    topology: TopologySpec | None = None
    training: TrainingSpec | None = None
    model: ModelSpec | None = None

    @property
    def in_scope(self) -> bool:
        """A case whose data-parallel family is understood: what this tool should express (with or without
        tensor, pipeline and context parallelism)."""
        return self.family is not None


# --- model, batch, precision ----------------------------------------------------------------------

_DEFAULT_SEQ_LEN = 2048
_TORCHTITAN_SEQ_LEN = 8192  # torchtitan train_configs/llama3_*.toml: seq_len = 8192


def _k_match(text: str) -> re.Match[str] | None:
    """`text` read as a count (_K_NUMBER), its thousands separators (',' or '_') dropped."""
    return _K_NUMBER.match(text.replace(",", "").replace("_", ""))


def _k_count(value: int | str, unit: int) -> int:
    """A count written as a number or text: '8K' (x `unit`), '8192', '4,096 tokens'."""
    if isinstance(value, int):
        return value
    match = _k_match(value)
    if not match:
        raise Unexpressible(f"count {value!r} not understood")
    return int(float(match.group(1)) * (unit if match.group(2) else 1))


def _micro_batch_tokens(training: Mapping[str, Any]) -> int | None:
    """Tokens a GPU's micro-batch holds, where a case states its batch that way ("1K": 1,024)."""
    value = training.get("micro_batch_tokens_per_GPU")
    return None if value is None else _k_count(value, 1024)


def _seq_len(case: TrainingCase, defaults: list[str]) -> int:
    """The stated sequence length; else the framework's default, or a stated micro-batch's tokens where fewer
    (one sequence a micro-batch)."""
    value = case.model.get("seq_len")
    if value is not None:
        return _k_count(value, 1024)
    default = _TORCHTITAN_SEQ_LEN if "torchtitan" in str(case.training.get("framework", "")).lower() \
        else _DEFAULT_SEQ_LEN
    tokens = _micro_batch_tokens(case.training)
    if tokens is not None and tokens < default:
        defaults.append(f"seq_len not stated: {tokens}, the stated micro-batch's tokens as one sequence")
        return tokens
    defaults.append(f"seq_len not stated: {default}")
    return default


def _global_batch_of_tokens(training: Mapping[str, Any], seq_len: int, defaults: list[str]) -> Mapping[str, Any]:
    """`training` with the global batch its stated tokens a step give (global_batch_tokens / seq_len) where the
    sequences are not stated, flagged. A count written with K, M or G that is whole sequences only in powers of
    1024 is read so ("4M" = 4 x 2^20 tokens, as Llama's and InternEvo's tables write a batch); one that is whole
    sequences in neither reading is not expressible."""
    stated = training.get("global_batch_tokens")
    if stated is None or training.get("global_batch") is not None:
        return training
    readings = [str(stated)] + ([binary] if (binary := binary_count_text(str(stated))) else [])
    for text in readings:
        try:
            tokens = parse_count(text)
        except ValueError:
            raise Unexpressible(f"global_batch_tokens {stated!r} is not a count of tokens") from None
        if tokens > 0 and tokens % seq_len == 0:
            defaults.append(f"global_batch not stated: global_batch_tokens {stated} ({tokens:,} tokens) / seq_len "
                            f"{seq_len} = {tokens // seq_len}")
            return {**training, "global_batch": tokens // seq_len}
    raise Unexpressible(f"global_batch_tokens {stated} is not a whole number of {seq_len}-token sequences")


def _micro_batch_of_tokens(training: Mapping[str, Any], seq_len: int, defaults: list[str]) -> Mapping[str, Any]:
    """`training` with the micro-batch its stated tokens a micro-batch give at `seq_len` (sequences of it), where
    it states no micro-batch in sequences."""
    tokens = _micro_batch_tokens(training)
    if tokens is None or training.get("micro_batch") is not None:
        return training
    if tokens % seq_len:
        raise Unexpressible(f"micro_batch_tokens_per_GPU {tokens} is not a whole number of {seq_len}-token sequences")
    defaults.append(f"micro_batch not stated: {tokens // seq_len}, the stated {tokens} tokens a micro-batch over "
                    f"seq_len {seq_len}")
    return {**training, "micro_batch": tokens // seq_len}


# Families whose blocks are LLaMA's (a gated MLP: gate and up projections, SwiGLU; RoPE; no biases; an untied
# output layer), by their public HF configs and modelling code: InternLM (internlm/internlm-7b, InternLMMLP), Baichuan
# (baichuan-inc/Baichuan2-7B-Base, MLP gate_proj), Yi and DeepSeek's dense LLMs (01-ai/Yi-6B, deepseek-ai/
# deepseek-llm-7b-base: LlamaForCausalLM), OLMo (allenai/OLMo-7B: SwiGLU), Granite (ibm-granite: GraniteForCausalLM,
# LLaMA's block), Aquila, MiniCPM, Phi-3 (Phi3MLP gate_up_proj), ChatGLM / GLM-4 (SwiGLU), Cohere Command R
# (CohereMLP gate_proj).
_LLAMA_BLOCK = re.compile(r"llama|mistral|mixtral|qwen|internlm|baichuan|\byi\b|deepseek|olmo|granite|aquila|minicpm"
                          r"|phi-?3|glm|command[\s-]?r|cohere")


def _architecture(name: str, framework: str) -> dict[str, bool]:
    """Block details that follow from the model family (public configs of each family); {} for a family not known."""
    low = name.lower()
    if _LLAMA_BLOCK.search(low):
        return {"gated_mlp": True, "tied_embeddings": False, "learned_positions": False, "bias": False}
    if "gemma" in low:  # google/gemma-7b: GeGLU (gate and up projections), RoPE, output tied to the embedding
        return {"gated_mlp": True, "tied_embeddings": True, "learned_positions": False, "bias": False}
    if "grok" in low:  # xai-org/grok-1 model.py: a GELU-gated MLP, the output through the input embedding, RoPE
        return {"gated_mlp": True, "tied_embeddings": True, "learned_positions": False, "bias": False}
    if "mpt" in low and "foundry" in framework.lower():
        # LLM Foundry's benchmark yamls leave MPTConfig defaults: learned positions, biases, tied output.
        return {"tied_embeddings": True, "learned_positions": True, "bias": True}
    if "mpt" in low:
        return {"tied_embeddings": True, "learned_positions": False, "bias": False}  # released MPT: ALiBi, no_bias
    if "bloom" in low:
        return {"tied_embeddings": True, "learned_positions": False, "bias": True}  # ALiBi
    if "gpt" in low:
        return {"tied_embeddings": True, "learned_positions": True, "bias": True}  # GPT-2/3, Megatron GPT
    return {}


# A released model's name as runs write it: a vendor prefix ("meta-llama/", "Meta-"), words apart by spaces,
# dashes or underscores, a family's version apart from it ("Llama 3.1", "LLaMA-2", "Qwen-2.5"), and release
# suffixes that keep the shapes (the base model's "-hf" conversion, "-base", "-instruct", "-chat", "-it"
# tunes; "v0.1", the release the presets describe).
_VERSION = re.compile(r"\d+(?:\.\d+)?")
_SIZE_WORD = re.compile(r"\b\d+(?:\.\d+)?[bm]\b", re.IGNORECASE)  # a parameter count: 70B, 1.3B, 350M
_SAME_SHAPES_SUFFIXES = frozenset({"hf", "base", "instruct", "chat", "it", "v0.1"})
# Releases with an earlier release's shapes: Llama 3.1 and 3.3 have Llama 3's (a longer context only).
# [HF] meta-llama/Llama-3.1-8B, Llama-3.1-70B, Llama-3.3-70B-Instruct config.json.
_SAME_SHAPES = {"llama3.1": ("llama3", "Llama 3.1 has Llama 3's shapes"),
                "llama3.3": ("llama3", "Llama 3.3 has Llama 3's shapes")}
# Names NVIDIA NeMo's performance tables (docs/source/performance/performance_summary.md) write for models
# whose generation they leave out. The runs behind them are NeMo's performance recipes, one per model:
# scripts/performance/llm/pretrain_nemotron3_8b.py and pretrain_nemotron3_22b.py (Nemotron-3, the only
# Nemotron 8B and 22B recipes: nemo/collections/llm/recipes/nemotron3_8b.py, nemotron3_22b.py) and
# pretrain_nemotron4_15b.py and pretrain_nemotron4_340b.py (Nemotron-4: recipes nemotron4_15b.py,
# nemotron4_340b.py); its LLAMA4-Scout-LLM row runs pretrain_llama4_e16.py (Llama 4 Scout, 16 experts: recipe
# llama4_e16.py, Llama4Experts16Config, the Llama-4-Scout-17B-16E tokenizer). Exact names only: another size
# ("Nemotron-9B") matches nothing.
_NEMO_TABLE_NAMES = {
    "nemotron-8b": ("nemotron3-8b", "NeMo's Nemotron-8B is Nemotron-3 8B (pretrain_nemotron3_8b.py)"),
    "nemotron-22b": ("nemotron3-22b", "NeMo's Nemotron-22B is Nemotron-3 22B (pretrain_nemotron3_22b.py)"),
    "nemotron-15b": ("nemotron4-15b", "NeMo's Nemotron-15B is Nemotron-4 15B (pretrain_nemotron4_15b.py)"),
    "nemotron-340b": ("nemotron4-340b", "NeMo's Nemotron-340B is Nemotron-4 340B (pretrain_nemotron4_340b.py)"),
    "llama4-scout-llm": ("llama4-scout-17b-16e",
                         "NeMo's LLAMA4-Scout-LLM is Llama 4 Scout 17B-16E (pretrain_llama4_e16.py)"),
}


def _release_key(name: str) -> tuple[str, str]:
    """(preset name, the release it was read as) of a released model's name: 'Meta-Llama-3.1-70B-Instruct' ->
    ('llama3-70b', 'llama3.1'), 'LLaMA 2 7B' -> ('llama2-7b', 'llama2'); NeMo's table names through
    _NEMO_TABLE_NAMES ('Nemotron-8B' -> ('nemotron3-8b', 'nemotron-8b')); a remark in parentheses (one holding
    no size) is dropped and a release N.0 is N ('Llama 3.0 70B (dense)' -> 'llama3-70b', 'Llama 2 (70B)' ->
    'llama2-70b'). Only the spelling is normalised: sizes and families are kept as written, so no other size or
    family can match."""
    words: list[str] = []
    # 'Llama3-70B (dense)': a remark, not the name; 'Llama 2 (70B)': the size, in brackets
    unremarked = re.sub(r"\(([^)]*)\)", lambda m: m.group(1) if _SIZE_WORD.search(m.group(1)) else " ", name)
    for word in re.split(r"[\s_-]+", VENDOR_PREFIX.sub("", unremarked.strip().lower())):
        word = re.sub(r"(?<=\d)\.0$", "", word)  # 'Llama 3.0': release 3
        if words and _VERSION.fullmatch(word) and words[-1][-1].isalpha():
            words[-1] += word  # 'llama' '3.1' -> 'llama3.1'
        elif word and word not in _SAME_SHAPES_SUFFIXES:
            words.append(word)
    if not words:
        return "", ""
    family, _ = _SAME_SHAPES.get(words[0], (words[0], ""))
    key = "-".join([family, *words[1:]])
    if key in _NEMO_TABLE_NAMES:
        return _NEMO_TABLE_NAMES[key][0], key  # 'Nemotron-8B' -> ('nemotron3-8b', 'nemotron-8b')
    return key, words[0]


def _released_preset(name: str) -> ModelSpec | None:
    """The model preset of a released model named in a case ('LLAMA2-7B', 'meta-llama/Llama-2-7b-hf' ->
    llama2-7b; 'Llama 3.1 8B' -> llama3-8b, Llama 3.1 having Llama 3's shapes), if any (_release_key). Its
    source names the preset, and the release whose shapes it shares."""
    key, release = _release_key(name)
    try:
        preset = load_model(key)
    except ConfigError:
        return None
    alias = _SAME_SHAPES.get(release) or _NEMO_TABLE_NAMES.get(release)
    shared = f"; {alias[1]}" if alias else ""
    return preset.model_copy(update={"source": f"model preset {preset.name}, {preset.source}{shared}"})


# A mixture of experts' fields in a case's model section -> ModelSpec fields.
_MOE_FIELDS = {"experts": "experts", "experts_per_token": "experts_per_token", "expert_ffn": "expert_ffn_hidden",
               "shared_experts": "shared_experts"}
# Fields that set a block's attention or a mixture's layout apart from what heads and hidden imply.
_BLOCK_FIELDS = {"head_dim": "head_dim", "dense_layers": "dense_layers"}
# A case's shape fields -> ModelSpec fields: what a case states of a released model over its preset's values.
_PRESET_FIELDS = {"layers": "layers", "hidden": "hidden", "heads": "heads", "kv_heads": "kv_heads", "ffn": "ffn_hidden",
                  "vocab": "vocab", **_MOE_FIELDS, **_BLOCK_FIELDS}
_MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
_MLA_WORDS = re.compile(r"\bmla\b|latent", re.IGNORECASE)


@dataclass(frozen=True)
class _StatedOnce:
    """A model field a source states once for a document or one of its tables, where the rows leave it out:
    cases whose source url and table contain every string of `where` take it, flagged with the quote."""

    where: tuple[str, ...]
    field: str
    value: int
    quote: str


_STATED_ONCE = (
    # BigScience tr11-176B-ml chronicles-prequel.md heads its final comparison with this line, covering
    # the tables above it.
    _StatedOnce(("chronicles-prequel",), "heads", 64, "all NHEADS=64 (above too)"),
    # Its section "Choosing the fastest 3D Topology" varies PP on the 200B model of its 02-17 runs
    # ("200B model: ... NLAYERS=80, NHIDDEN=14400"), saying how the size column moves.
    _StatedOnce(("chronicles-prequel", "Choosing the fastest 3D Topology"), "hidden", 14400,
                "the number of layers had to be tweaked to fit PP and NHIDDEN was fixed"),
)


@dataclass(frozen=True)
class _CountErratum:
    """A table whose GPU-count column contradicts its own layout columns, where another revision of the same
    document gives the count the layout implies for the same figures: its rows (source url and table contain
    every string of `where`) run on tp x pp x cp x dp GPUs, flagged with the revision that says so."""

    where: tuple[str, ...]
    revision: str


_COUNT_ERRATA = (
    # NeMo's performance_long_sequence.md, table "LLAMA3-8B (FP8) - B200": revision 19fadb67b0 (2025-05-08)
    # lists 8-1,024 GPUs beside layouts of 2-256 (e.g. TP 1, PP 1, DP 2, CP 1 on "8" GPUs); its previous
    # revision 14d427f575 (2025-04-28) lists 2-256 GPUs, each TP x CP x DP, with the same TFLOPS per GPU.
    _CountErratum(("performance_long_sequence", "B200"),
                  "NeMo 14d427f575's revision of the table lists the layout's GPU count with the same TFLOPS"),
)


def _corrected_cluster(case: TrainingCase, defaults: list[str]) -> Mapping[str, Any]:
    """The case's cluster section, its GPU count taken from the layout where _COUNT_ERRATA says so."""
    cluster, training = case.cluster, case.training
    for erratum in _COUNT_ERRATA:
        if all(text in case.where for text in erratum.where):
            gpus = math.prod(int(training.get(name) or 1) for name in ("tp", "pp", "cp", "dp"))
            if gpus != cluster.get("num_gpus"):
                defaults.append(f"num_gpus {cluster.get('num_gpus')} contradicts the stated layout: {gpus} "
                                f"({erratum.revision})")
                return {**cluster, "num_gpus": gpus, "nodes": None}
    return cluster


_PARAMS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(m|b|t|million|billion|trillion)?\s*$", re.IGNORECASE)
_PARAMS_UNIT = {"m": 1e6, "b": 1e9, "t": 1e12, "million": 1e6, "billion": 1e9, "trillion": 1e12}


def _stated_params(model: Mapping[str, Any]) -> float | None:
    """The model's stated parameter count: a number, or text like '18B', '1.3b', '6.7 billion', '350M'."""
    value = model.get("params")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) if value > 0 else None
    match = _PARAMS.match(str(value or ""))
    if match is None or (match.group(2) is None and float(match.group(1)) < 1e6):
        return None  # a bare small number is not a parameter count
    return float(match.group(1)) * (_PARAMS_UNIT[match.group(2).lower()] if match.group(2) else 1.0)
_SIZE_TOLERANCE = 0.03  # a layer count must give the stated size within this fraction (sizes are rounded)


def _dense_gpt_params(layers: int, hidden: int, vocab: int, seq_len: int) -> float:
    """Megatron's GPT parameter count, l (12 h^2 + 13 h) + V h + s h + 2 h: the formula BigScience's
    chronicles print their size column with (tr11-176B-ml chronicles-prequel.md, "Model size")."""
    return layers * (12 * hidden**2 + 13 * hidden) + vocab * hidden + seq_len * hidden + 2 * hidden


def _layers_from_size(case: TrainingCase, model: Mapping[str, Any], seq_len: int, defaults: list[str]) -> int:
    """The layer count of a case that states its size, hidden size and vocabulary but not its layers: the
    multiple of the pipeline degree whose parameter count (_dense_gpt_params) is nearest the stated size,
    as a pipeline-parallel run sizes its model (whole blocks per stage); none within _SIZE_TOLERANCE:
    unexpressible."""
    stated = _stated_params(model)
    vocab = model.get("vocab")
    if stated is None or vocab is None:
        raise Unexpressible("model shape not stated: layers (nor a size in B and a vocabulary to derive it)")
    hidden, vocab_n = int(model["hidden"]), _k_count(vocab, 1000)
    pp = int(case.training.get("pp") or 1)
    per_layer = 12 * hidden**2 + 13 * hidden
    near = max(1, round((stated - _dense_gpt_params(0, hidden, vocab_n, seq_len)) / per_layer / pp))
    layers = min((k * pp for k in (near - 1, near, near + 1) if k > 0),
                 key=lambda n: abs(_dense_gpt_params(n, hidden, vocab_n, seq_len) - stated))
    size = _dense_gpt_params(layers, hidden, vocab_n, seq_len)
    if abs(size - stated) > _SIZE_TOLERANCE * stated:
        raise Unexpressible(f"model shape not stated: layers (no multiple of PP {pp} gives {model['params']} "
                            f"with hidden {hidden}; nearest {layers} layers, {size / 1e9:.0f}B)")
    defaults.append(f"layers not stated: {layers}, the multiple of PP {pp} nearest the stated {model['params']} "
                    f"with hidden {hidden} ({size / 1e9:.1f}B by Megatron's count)")
    return layers


# Megatron-LM's GPT family by size (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
# Clusters Using Megatron-LM", Table 1): (parameters, hidden size, layers), vocabulary 51,200, 2,048 positions
_GPT_FAMILY = ((1.7e9, 2304, 24), (3.6e9, 3072, 30), (7.5e9, 4096, 36), (18.4e9, 6144, 40), (39.1e9, 8192, 48),
               (76.1e9, 10240, 60), (145.6e9, 12288, 80), (310.1e9, 16384, 96), (529.6e9, 20480, 105),
               (1008.0e9, 25600, 128))
_GPT_FAMILY_VOCAB = 51200
_HEAD_DIM = 128  # the family's head width from 7.5B up


def _shape_from_size(case: TrainingCase, model: Mapping[str, Any], seq_len: int,
                     defaults: list[str]) -> dict[str, Any]:
    """The shape of a model that states only its size: the hidden size of Megatron-LM's GPT family at that size
    (_GPT_FAMILY, interpolated on log scales, rounded to a multiple of 128; outside the table, its end rows' trend),
    128-wide heads, and the layer count that gives the stated size by Megatron's count (_dense_gpt_params)."""
    stated = _stated_params(model)
    if stated is None:
        raise Unexpressible("model shape not stated: layers, hidden, heads (nor a size in params, e.g. '18B', to "
                            "derive them)")
    vocab = _k_count(model["vocab"], 1000) if model.get("vocab") is not None else _GPT_FAMILY_VOCAB
    sizes = [math.log(size) for size, _, _ in _GPT_FAMILY]
    widths = [math.log(hidden) for _, hidden, _ in _GPT_FAMILY]
    x = math.log(stated)
    i = 0 if x < sizes[1] else len(sizes) - 2 if x > sizes[-2] else next(k for k in range(len(sizes) - 1)
                                                                        if sizes[k] <= x <= sizes[k + 1])
    width = widths[i] + (x - sizes[i]) * (widths[i + 1] - widths[i]) / (sizes[i + 1] - sizes[i])
    hidden = max(_HEAD_DIM, _HEAD_DIM * round(math.exp(width) / _HEAD_DIM))
    per_layer = 12 * hidden**2 + 13 * hidden
    layers = max(1, round((stated - _dense_gpt_params(0, hidden, vocab, seq_len)) / per_layer))
    size = _dense_gpt_params(layers, hidden, vocab, seq_len)
    named = model["params"] if isinstance(model["params"], str) else f"{stated / 1e9:.3g}B"
    defaults.append(f"model shape not stated: {layers} layers of hidden {hidden} and {hidden // _HEAD_DIM} heads, "
                    f"Megatron-LM's GPT family at {named} (Narayanan et al. 2021, table 1; {size / 1e9:.1f}B)"
                    + ("" if model.get("vocab") is not None else f", vocab {vocab}"))
    return {**model, "layers": layers, "hidden": hidden, "heads": hidden // _HEAD_DIM, "vocab": vocab}


def _model_spec(case: TrainingCase, model: Mapping[str, Any], seq_len: int, defaults: list[str]) -> ModelSpec:
    """The case's model section (with filled-in fields) as a ModelSpec; a released model named
    without any of its shape takes its public config (the model preset), one named with part of it (that
    agrees with the preset's layers, hidden size and heads) the rest of it, flagged; fields its source states
    once for a table or the whole document (_STATED_ONCE) fill the rows that leave them out, and a
    stated size then gives the layer count (_layers_from_size)."""
    shape = ("layers", "hidden", "heads", "vocab")
    missing = [k for k in shape if model.get(k) is None]
    preset = _released_preset(str(model.get("name") or "")) if missing or model.get("ffn") is None else None
    if preset is not None and len(missing) == len(shape):
        defaults.append(f"model shape not stated: the released model's public config ({preset.source})")
        return ModelSpec(**{**preset.model_dump(), "max_seq_len": seq_len, "train_seq_len": None,
                            "source": f"training case {case.id} (model preset {preset.name})"})
    if preset is not None and all(model.get(key) in (None, getattr(preset, key)) for key in ("layers", "hidden",
                                                                                          "heads")):
        # part of the shape stated, and it is the released model's: the rest from its config
        stated = {field: model[key] for key, field in _PRESET_FIELDS.items() if model.get(key) is not None}
        if isinstance(stated.get("vocab"), str):
            stated["vocab"] = _k_count(stated["vocab"], 1000)
        filled = [key for key, field in _PRESET_FIELDS.items() if field not in stated and getattr(preset, field)
                  and key in (*shape, "ffn", "kv_heads")]
        defaults.append(f"{', '.join(filled)} not stated: the released model's ({preset.source})")
        block = _architecture(str(model.get("name")), str(case.training.get("framework", "")))  # the run's own
        return ModelSpec(**{**preset.model_dump(), **block, **_stated_block(model), **stated, **_mla(model, defaults),
                            "max_seq_len": seq_len, "train_seq_len": None,
                            "source": f"training case {case.id} (model preset {preset.name})"})
    for fact in _STATED_ONCE:
        if model.get(fact.field) is None and all(text in case.where for text in fact.where):
            model = {**model, fact.field: fact.value}
            defaults.append(f"{fact.field} not stated in the row: {fact.value} (the source: {fact.quote!r})")
    if model.get("layers") is None and model.get("hidden") is not None:
        model = {**model, "layers": _layers_from_size(case, model, seq_len, defaults)}
    if all(model.get(k) is None for k in ("layers", "hidden", "heads")):
        model = _shape_from_size(case, model, seq_len, defaults)
    missing = [k for k in shape if model.get(k) is None]
    if missing:
        raise Unexpressible(f"model shape not stated: {', '.join(missing)}")
    stated = {field: model[key] for key, field in {**_MOE_FIELDS, **_BLOCK_FIELDS}.items()
              if model.get(key) is not None}
    if stated.get("experts", 1) > 1 and "experts_per_token" not in stated:
        raise Unexpressible("mixture of experts: experts_per_token (top-k) not stated")
    vocab = model["vocab"]
    if isinstance(vocab, str):
        vocab = _k_count(vocab, 1000)
        defaults.append(f"vocab {model['vocab']!r} read as {vocab}")
    if model.get("ffn") is None:
        defaults.append(f"ffn not stated: 4 x hidden = {4 * model['hidden']}")
    name = str(model.get("name") or case.id)
    family, stated_block = _architecture(name, str(case.training.get("framework", ""))), _stated_block(model)
    block = {**family, **stated_block}
    if not family and "gated_mlp" not in stated_block and model.get("ffn") not in (None, 4 * model["hidden"]):
        defaults.append(f"MLP not gated: the family of {name!r} is not known, and a gated (SwiGLU, GeGLU) MLP of ffn "
                        f"{model['ffn']} has half again the MLP's GEMM work")
    return ModelSpec(name=name, layers=model["layers"], hidden=model["hidden"], heads=model["heads"],
                     kv_heads=model.get("kv_heads"), ffn_hidden=model.get("ffn"), vocab=vocab,
                     max_seq_len=seq_len, source=f"training case {case.id}", **stated, **block,
                     **_mla(model, defaults))


_GATED_ACTIVATION = re.compile(r"glu", re.IGNORECASE)  # SwiGLU, GeGLU, ReGLU: a gate and an up projection


def _stated_block(model: Mapping[str, Any]) -> dict[str, bool]:
    """Block details a case states over what its family implies (_architecture): `gated_mlp`, or an `activation`
    naming a gated linear unit ("swiglu", "fast-swiglu", "geglu"; an activation alone, such as Hugging Face's
    hidden_act "silu" of a gated Llama MLP, does not say whether the MLP is gated, so it is not read as either),
    and `tied_embeddings`."""
    block = {key: bool(model[key]) for key in ("gated_mlp", "tied_embeddings") if model.get(key) is not None}
    if "gated_mlp" not in block and _GATED_ACTIVATION.search(str(model.get("activation") or "")):
        block["gated_mlp"] = True
    return block


def _mla(model: Mapping[str, Any], defaults: list[str]) -> dict[str, Any]:
    """The case's multi-head latent attention as `mla`: its widths as stated (DeepSeek's config.json names), or,
    where the case only describes its attention as MLA in words, the released model's (its preset, whose layers,
    hidden size and heads the case must not contradict; flagged); {} for a case without it."""
    stated = {key: model[key] for key in _MLA_FIELDS if model.get(key) is not None}
    if stated:
        missing = [key for key in _MLA_FIELDS if key not in stated and key != "q_lora_rank"]
        if missing:
            raise Unexpressible(f"multi-head latent attention: {', '.join(missing)} not stated")
        return {"mla": MlaSpec(**stated)}
    words = str(model.get("attention") or "")
    if not _MLA_WORDS.search(words):
        return {}
    preset = _released_preset(str(model.get("name") or ""))
    if preset is None or preset.mla is None or any(model.get(key) not in (None, getattr(preset, key))
                                                   for key in ("layers", "hidden", "heads")):
        raise Unexpressible(f"attention {words!r} described in words: state its widths as "
                            f"{', '.join(_MLA_FIELDS)}")
    defaults.append(f"attention {words!r}: the released model's multi-head latent attention ({preset.source})")
    return {"mla": preset.mla}


def _precision_text(training: Mapping[str, Any]) -> str | None:
    """What names the case's compute precision: its precision (or quantization) field, and fp8 where a field of
    Megatron-LM's or Transformer Engine's fp8 flags says so (`fp8: hybrid`, `fp8_format: e4m3`, `use_fp8: true`)
    beside a precision of the parameters ('bf16')."""
    text = training.get("precision") or training.get("quantization")
    flag = training.get("fp8")
    if flag is None or flag is False or _SAID_BOOL.get(str(flag).strip().lower()) is False:
        return text
    return f"{text or ''} fp8".strip()


# an fp8 recipe named in a case's precision text (TrainingSpec.fp8_recipe), in the order tried, on the text with
# hyphens and underscores read as spaces: Megatron-Core's names, NeMo's words, Megatron-Bridge's recipe names
# (fp8cs, fp8mx: "FP8 current-scaling", "MXFP8")
_FP8_RECIPE_WORDS = ((re.compile(r"\bmxfp8\b|\bfp8 ?mx\b"), "mxfp8"),
                     (re.compile(r"current scaling|\btensor ?wise\b|\bfp8 ?cs\b"), "tensorwise"),
                     (re.compile(r"\bblock ?wise\b|\bsub ?channel\b"), "blockwise"),
                     (re.compile(r"\bdelayed\b|\bfp8 ?ds\b"), "delayed"))


def _fp8_recipe(training: Mapping[str, Any], text: str | None, precision: Precision,
                defaults: list[str]) -> dict[str, Any]:
    """The fp8 recipe a case states: its fp8_recipe field (Megatron-Core's --fp8-recipe and NeMo's names) or words
    of its precision text ('FP8, per-tensor current scaling', 'mxfp8'); none stated: the framework's default,
    flagged for an fp8 case."""
    stated = training.get("fp8_recipe")
    if stated is not None:
        recipe = fp8_recipe_of(str(stated))
        if recipe not in get_args(Fp8Recipe):
            raise Unexpressible(f"fp8_recipe {stated!r}: give {', '.join(get_args(Fp8Recipe))} (or cs, ds, ss)")
        return {"fp8_recipe": str(recipe)}
    low = (text or "").lower().replace("-", " ").replace("_", " ")
    named = next(({"fp8_recipe": recipe} for words, recipe in _FP8_RECIPE_WORDS if words.search(low)), {})
    if not named and precision == "fp8":
        defaults.append("fp8 recipe not stated: the framework's (tensorwise under torchtitan's torchao, else "
                        "delayed, Megatron-Core's default)")
    return named


def _precision(text: str | None, gpu: str, defaults: list[str]) -> Precision:
    """The compute precision named in free text ('amp_bf16', 'bf16 + float8 linear' -> fp8, 'mixed (fp16)')."""
    low = (text or "").lower()
    precision: Precision
    if "rowwise" in low:
        raise Unexpressible("float8 with row-wise scales (torchao's rowwise recipe): its per-row scaling kernels are "
                            "not modelled (tensor-wise fp8 is)")
    if re.search(r"\btf32\b|tensorfloat", low) and not re.search(r"fp8|float8|bf16|bfloat16|fp16|float16", low):
        raise Unexpressible(f"precision {text!r}: fp32 training with TF32 matmuls is not among the modelled "
                            "precisions (bf16, fp16, fp8, fp32)")
    if "fp8" in low or "float8" in low:
        precision = "fp8"
    elif "bf16" in low or "bfloat16" in low:
        precision = "bf16"
    elif "fp16" in low or "float16" in low or "half" in low or re.search(r"\b16-mixed\b", low):
        precision = "fp16"  # "16-mixed": PyTorch Lightning's fp16 AMP
    elif "fp32" in low or "float32" in low or re.search(r"\b32(?:-true)?\b", low):
        precision = "fp32"
    else:
        precision = "bf16" if gpu_spec(gpu).bf16_tflops else "fp16"
        defaults.append(f"precision not stated{f' ({text!r})' if text else ''}: {precision}")
    if getattr(gpu_spec(gpu), f"{precision}_tflops") is None:
        raise Unexpressible(f"precision {precision} on {gpu}: no such tensor path")
    return precision


# torchtitan's 'selective layer' policy wraps every k-th block in a checkpoint, k its selective_ac_option, whose
# default was "2" (torchtitan/config_manager.py, 2024: "2 = checkpoint every other layer")
_TORCHTITAN_LAYER_EVERY = 2


def _routing(training: Mapping[str, Any]) -> RoutingSpec:
    """A mixture of experts' capacity as a case states it: `capacity_factor` (or Megatron-Core's
    moe_expert_capacity_factor) and `pad_to_capacity` (moe_pad_expert_input_to_capacity); dropless and unpadded
    where it says nothing (RoutingSpec's defaults)."""
    factor = training.get("capacity_factor", training.get("moe_expert_capacity_factor"))
    pad = training.get("pad_to_capacity", training.get("moe_pad_expert_input_to_capacity"))
    return RoutingSpec(capacity_factor=None if factor is None else float(factor), pad_to_capacity=bool(pad))


# Megatron-Core's recompute modules as a case's text names them (transformer_config.py recompute_modules): the
# flag's own names, and the words sources write for them
_MODULE_WORDS: tuple[tuple[str, str], ...] = (
    ("core_attn", r"core[_ ]attn|core attention"), ("moe_act", r"moe[_ ]act(?:ivation)?"),
    ("layernorm", r"layer[_ ]?norms?|norms?"), ("mla_up_proj", r"(?:mla[_ ])?up[_ ]proj(?:ection)?"),
    ("mlp", r"mlp"), ("moe", r"moe(?![_ ]act)"), ("shared_experts", r"shared[_ ]experts?"))


def _modules_named(text: str) -> tuple[str, ...]:
    """The recompute modules a checkpointing text names (_MODULE_WORDS), in Megatron-Core's order; () for none."""
    low = text.lower()
    return tuple(module for module, words in _MODULE_WORDS if re.search(rf"(?<![a-z_])(?:{words})(?![a-z_])", low))


def _recompute_modules(training: Mapping[str, Any], checkpointing: str, defaults: list[str]) -> dict[str, Any]:
    """recompute_modules of a case whose recomputation is selective: a stated `recompute_modules` (Megatron-Core's
    --recompute-modules), else the modules its checkpointing text names (flagged), else none (Megatron-Core's
    default, core_attn)."""
    if checkpointing != "selective":
        return {}
    stated = training.get("recompute_modules")
    if stated is not None:
        return {"recompute_modules": stated}
    named = _modules_named(str(training.get("activation_checkpointing") or ""))
    if not named:
        return {}
    defaults.append(f"recompute modules read from the checkpointing text: {', '.join(named)} (Megatron-Core's "
                    "--recompute-modules; the rest of the layer keeps its activations)")
    return {"recompute_modules": named}


def _checkpointing(value: bool | str | None, defaults: list[str], framework: str = "", layers: int = 1,
                   published: tuple[float, float, float] | None = None) -> tuple[Checkpointing, int | None]:
    """(activation checkpointing, how many of the `layers` recompute; None: every one) of true/false (full
    recompute or none; also no / off; not stated, unknown or n/a: none, flagged; checkpointing named alone,
    'gradient checkpointing' or 'AC': full), a Megatron-LM flag
    (recompute-activations: selective; recompute-granularity full: full), or text naming selective / full / none.
    A policy that checkpoints some layers only (text naming layers, blocks or 'every') is full recomputation of
    every k-th layer, k the number in the text ('every 2nd block'); where the text gives none, the share the
    source's published utilisations imply (`published`, _recompute_share_published; rounded to a count of
    layers, flagged), else under torchtitan its option's default (flagged); refused without either.
    torchtitan's selective is otherwise its per-op policy ("op"): selective_ac_option 'op' in its Llama 3 train
    configs (llama3_8b.toml) since 2024. A MaxText remat_policy ('remat_policy save_qkv_proj') is that JAX
    policy (workloads.remat); under MaxText, full is its remat_policy 'full', nothing_saveable."""
    if value is None or UNSTATED.search(str(value)):
        said = "" if value is None else f" ({value!r})"
        defaults.append(f"activation_checkpointing not stated{said}: none")
        return "none", None
    low = str(checkpointing_of(value)).lower()
    if is_remat_policy(low):
        return cast(Checkpointing, low), None
    if framework == "maxtext" and low in ("full", "true"):
        defaults.append("MaxText's full rematerialisation: JAX's nothing_saveable (the MLP's down projection is not "
                        "re-run)")
        return "nothing_saveable", None
    if "selective" in low and _modules_named(low) and framework != "torchtitan":  # Megatron-Core's modules
        return "selective", None
    if re.search(r"\b(layers?|blocks?|every)\b", low):
        every = re.search(r"\b(\d+)", low)
        if every is not None and int(every.group(1)) >= 1:
            return "full", layers // int(every.group(1))
        if published is not None:
            share, hfu, mfu = published
            count = round(layers * share)
            defaults.append(f"layers recomputed not stated: {count} of {layers}, the share the published HFU "
                            f"{hfu:g} over MFU {mfu:g} implies (hfu / mfu = 1 + share / 3)")
            return ("full", count) if count else ("none", None)
        if framework == "torchtitan":
            defaults.append(f"torchtitan's selective layer checkpointing: every {_TORCHTITAN_LAYER_EVERY}nd block "
                            "recomputed whole (selective_ac_option's default)")
            return "full", layers // _TORCHTITAN_LAYER_EVERY
        raise Unexpressible(f"activation_checkpointing {value!r}: some layers are checkpointed, but not which "
                            "(state every k-th layer, or recompute_layers, or publish hfu and mfu)")
    if "selective" in low and framework == "torchtitan":
        defaults.append("torchtitan's selective activation checkpointing: its per-op policy (selective_ac_option "
                        "'op', the llama3 train configs' setting)")
        return "op", None
    if "selective" in low:
        return "selective", None
    if "full" in low or _SAID_BOOL.get(low) is True:
        return "full", None
    if "none" in low or low == "no ac" or _SAID_BOOL.get(low) is False:
        return "none", None
    if re.fullmatch(r"(?:(?:gradient|activation)\s+)?(?:checkpointing|recomputation|recompute)|ac|gc", low.strip()):
        return "full", None  # checkpointing named alone, as Hugging Face's gradient_checkpointing: each layer whole
    raise Unexpressible(f"activation_checkpointing {value!r} not understood")


# a published figure written as text: "49%", "1,234", "12.5k", "~2M" (thousands separators, k / M suffixes)
_NUMBER = re.compile(r"\s*[~≈]?\s*(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)\s*([kKM]?)\s*%?\s*")
_NUMBER_SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6}


def published_number(value: Any) -> float | None:
    """A published figure as a number (None: not one): 49, "49%", "1,234", "12.5k", "~2M"."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    match = _NUMBER.fullmatch(str(value))
    return float(match.group(1).replace(",", "")) * _NUMBER_SUFFIX[match.group(2)] if match else None


def _utilisation(metrics: Mapping[str, Any], name: str) -> float | None:
    """A published FLOPs utilisation (`name` 'mfu' or 'hfu', any case, as a fraction or a percentage) as a fraction."""
    for key, raw in metrics.items():
        if re.sub(r"[^a-z]+", "_", str(key).lower()).strip("_") in (name, f"{name}_pct"):
            value = published_number(raw)
            if value is not None and value > 0:
                return value / 100.0 if value > 1.0 else value
    return None


def _recompute_share_published(metrics: Mapping[str, Any]) -> tuple[float, float, float] | None:
    """(share of the layers that recompute, hfu, mfu) as a source's published hardware and model FLOPs
    utilisation imply it, where it publishes both: a layer recomputed whole re-runs its forward, a third of its
    forward and backward FLOPs, so hfu / mfu = 1 + share / 3 (both counted over the same FLOPs: equal without
    recomputation). The share is clamped to [0, 1]: two-digit figures leave a few points of slack."""
    hfu, mfu = _utilisation(metrics, "hfu"), _utilisation(metrics, "mfu")
    if hfu is None or mfu is None:
        return None
    return min(1.0, max(0.0, 3.0 * (hfu / mfu - 1.0))), hfu, mfu


def _recomputation(training: Mapping[str, Any], metrics: Mapping[str, Any], layers: int,
                   defaults: list[str]) -> dict[str, Any]:
    """activation_checkpointing and recompute_layers of a case: from its checkpointing text (_checkpointing), or
    a count it states (`recompute_layers`, or Megatron's `recompute_num_layers`)."""
    checkpointing, count = _checkpointing(training.get("activation_checkpointing"), defaults,
                                          framework_of(training) or _known_framework(training) or "", layers,
                                          _recompute_share_published(metrics))
    if count is None:
        count = training.get("recompute_layers", training.get("recompute_num_layers"))
    return {"activation_checkpointing": checkpointing, "recompute_layers": count,
            **_recompute_modules(training, checkpointing, defaults)}


# the micro-batches a rank runs per step, as frameworks name it: grad_accum, Hugging Face's and DeepSpeed's
# gradient_accumulation_steps, InternEvo's micro_num (its data config), Megatron-LM's num_microbatches
_ACCUMULATION_NAMES = ("grad_accum", "gradient_accumulation_steps", "micro_num", "num_microbatches")


def _batch(training: Mapping[str, Any], n_dp: int, n_gpus: int, pp: int, defaults: list[str]) -> dict[str, Any]:
    """micro_batch and global_batch (or grad_accum, under any of its names) over `n_dp` data-parallel ranks of
    `n_gpus` GPUs.

    global_batch = micro_batch x data-parallel ranks x micro-steps (Megatron's and DeepSpeed's
    definition; with pipeline parallelism a micro-step is one pipeline micro-batch, and an unstated
    one is 1: the --micro-batch-size of Megatron-LM's pipeline-parallel example scripts (GPT-3 175B:
    examples/gpt3/train_gpt3_175b_distributed.sh) and NeMo's recipes; one micro-batch of the whole local
    batch would leave the pipeline (pp - 1) / pp idle).
    """
    ranks = "GPUs" if n_dp == n_gpus else f"data-parallel degree {n_dp}"
    micro: int | None = training.get("micro_batch")
    glob: int | None = training.get("global_batch")
    accum: int | None = next((training[name] for name in _ACCUMULATION_NAMES if training.get(name) is not None), None)
    if glob is None:
        if micro is None:
            defaults.append("micro_batch not stated: 1")
        if accum is None:
            defaults.append("global_batch not stated: no gradient accumulation")
        return {"micro_batch": micro or 1, "grad_accum": accum}
    if micro is None and pp > 1 and accum is None:
        micro = 1
        defaults.append("micro_batch not stated: 1 with pipeline parallelism (Megatron-LM's example scripts)")
    if micro is None:
        micro = glob // (n_dp * (accum or 1))
        defaults.append(f"micro_batch not stated: global_batch / ({ranks} x grad_accum {accum or 1}) = {micro}")
    if micro < 1 or glob % (micro * n_dp):
        raise Unexpressible(f"global_batch {glob} is not a multiple of micro_batch {micro} x {ranks}")
    if accum is not None and accum != glob // (micro * n_dp):
        raise Unexpressible(f"global_batch {glob} != micro_batch {micro} x grad_accum {accum} x {ranks}")
    return {"micro_batch": micro, "global_batch": glob}


# NeMo's LoRA adapter rank where a case does not state one: `dim` 32 (nemo/collections/llm/peft/lora.py, LoRA;
# NeMo 1.x's peft.lora_tuning.adapter_dim 32 in its fine-tuning configs).
_NEMO_LORA_RANK = 32


# NeMo releases through 24.07 fine-tune with NeMo 1.x (NeMo 2.0 "is an experimental feature and currently released
# in the dev container only", NeMo Framework 24.07 user guide; 24.09 ships NeMo 2.0.0), whose LoRA adapts linear_qkv
# alone unless told otherwise (nemo/collections/nlp/parts/peft_config.py get_target_modules: target_modules default
# ['attention_qkv']); NeMo 2.0's LoRA adapts all four matrices (nemo/collections/llm/peft/lora.py LoRA.target_modules).
_NEMO2_RELEASE = (24, 9)


def _lora_targets(case: TrainingCase, defaults: list[str]) -> object:
    """The matrices a LoRA case's adapters sit beside (TrainingSpec.lora_targets): stated, else NeMo 1.x's qkv for a
    NeMo release before 24.09 (flagged), else every weight matrix (None, flagged)."""
    stated = case.training.get("lora_targets")
    if stated is not None:
        return stated
    release = re.search(r"nemo\D{0,12}?(\d{2})\.(\d{2})", str(case.training.get("framework") or ""), re.IGNORECASE)
    if framework_of(case.training) == "nemo" and release and tuple(map(int, release.groups())) < _NEMO2_RELEASE:
        defaults.append(f"LoRA targets not stated: linear_qkv alone (NeMo {release.group(1)}.{release.group(2)} "
                        "fine-tunes with NeMo 1.x, whose LoRA target_modules default is attention_qkv)")
        return ["qkv"]
    defaults.append("LoRA targets not stated: every weight matrix of the block (as NeMo 2.0 adapts them: linear_qkv, "
                    "linear_proj, linear_fc1, linear_fc2)")
    return None


def _lora(case: TrainingCase, defaults: list[str]) -> dict[str, Any]:
    """The case's LoRA fields (lora_rank, lora_targets); none for a case whose weights all train."""
    rank = _lora_rank(case, defaults)
    return {} if rank is None else {"lora_rank": rank, "lora_targets": _lora_targets(case, defaults)}


# a LoRA case's base weights stored in 4 bits (QLoRA's NF4 through bitsandbytes, load_in_4bit)
_QUANTIZED_BASE = re.compile(r"nf4|fp4|int4|4[\s-]?bit", re.IGNORECASE)


def _lora_rank(case: TrainingCase, defaults: list[str]) -> int | None:
    """The LoRA rank of a LoRA fine-tuning case, one whose task says LoRA or that states a rank or targets (None:
    every weight trains): stated, or NeMo's default, flagged."""
    stated = case.training.get("lora_rank")
    task = str(case.training.get("task") or "").lower()
    if "lora" not in task and stated is None and case.training.get("lora_targets") is None:
        return None
    if "qlora" in task or _QUANTIZED_BASE.search(str(case.training.get("quantization") or "")):
        raise Unexpressible("QLoRA: its 4-bit base weights and their dequantisation are not modelled")
    if stated is not None:
        return int(stated)
    if framework_of(case.training) != "nemo":
        raise Unexpressible("LoRA fine-tuning: the adapters' rank (training.lora_rank) is not stated")
    defaults.append(f"LoRA rank not stated: {_NEMO_LORA_RANK} (NeMo's default adapter dim)")
    return _NEMO_LORA_RANK


# multi-token prediction depth: Megatron-Core's --mtp-num-layers, the Hugging Face config's num_nextn_predict_layers
_MTP_KEYS = ("mtp_num_layers", "mtp_layers", "num_nextn_predict_layers")


def _multi_token_prediction(case: TrainingCase, defaults: list[str]) -> int:
    """The multi-token prediction modules a case runs (TrainingSpec.mtp_layers): stated in training (_MTP_KEYS),
    else the m its pipeline layout holds (flagged), else none. Unexpressible for a count that is no whole
    number."""
    stated = next((case.training[key] for key in _MTP_KEYS if case.training.get(key) is not None), None)
    if stated is not None:
        depth = published_number(stated)
        if depth is None or depth < 0 or depth != int(depth):
            raise Unexpressible(f"MTP layers {stated!r}: not a whole number")
        return int(depth)
    layout = case.training.get("pipeline_layout")
    try:
        in_layout = sum(layout_counts(str(layout), "m")) if layout is not None else 0
    except ValueError:  # a malformed layout is refused by name where the job is built
        in_layout = 0
    if in_layout:
        defaults.append(f"MTP layers not stated: the {in_layout} its pipeline layout places (m)")
    return in_layout


def _check_task(case: TrainingCase, defaults: list[str]) -> None:
    """Packed sequences whose attention spans each packed sample need the samples' length: a note saying the run
    packs sequences, or InternEvo's `pack_sample_into_one: false`, without `packed_sample_len` is skipped, but
    for InternEvo. Its PackedDataset (internlm/data, build_pack) cuts every sample at max_length_per_sample, the
    data config's seq_len, and packs micro_bsz such pieces: attention spans at most seq_len tokens, so the case's
    micro-batch of full seq_len sequences bounds its attention from above (flagged; at 2,048 tokens a 7B
    model's attention is a few percent of its FLOPs). InternEvo's `pack_sample_into_one: true`
    (PackedDatasetWithoutCuSeqlen) cuts the pack into micro_bsz segments of seq_len tokens with attention over
    each whole segment: the micro-batch of full sequences the case states."""
    pack_into_one = case.training.get("pack_sample_into_one")
    if pack_into_one is True or case.training.get("packed_sample_len") is not None:
        return
    if pack_into_one is False and _known_framework(case.training) == "internevo":
        defaults.append("packed samples' lengths not stated: attention over whole seq_len pieces, the longest "
                        "InternEvo packs (an upper bound)")
        return
    if pack_into_one is False or "packed sequences" in case.note.lower():
        raise Unexpressible("packed sequences: attention spans each packed sample, whose lengths are not stated "
                            "(training.packed_sample_len)")


# Frameworks whose attention ran unfused (scores through HBM) in the published runs: Megatron-LM before
# its --use-flash-attn (2023) and BLOOM's Megatron-DeepSpeed (2022); FlashAttention (Dao et al.) is from 2022.
_UNFUSED_ATTENTION_FRAMEWORKS = ("megatron-lm", "megatron-deepspeed")


def _flash_attention(training: Mapping[str, Any]) -> bool:
    """Whether the case ran a fused attention kernel: as its `flash_attention` states it (true, or text naming the
    kernel, "FlashAttention-2", "sdpa"; false, "off", "none", "unfused", "eager", Megatron-Core's "local" or
    PyTorch's "math" for none), else by its framework (see
    _UNFUSED_ATTENTION_FRAMEWORKS), read as its other conventions are ("Megatron-LM (commit 8aa4619)" is
    Megatron-LM)."""
    stated = training.get("flash_attention")
    if isinstance(stated, bool):
        return stated
    if stated is not None and not UNSTATED.search(str(stated)):
        return not (SAYS_NONE.search(str(stated))
                    or re.match(r"\s*(?:unfused|eager|local|math)\b", str(stated), re.IGNORECASE))
    return framework_of(training) not in _UNFUSED_ATTENTION_FRAMEWORKS


def _fused_elementwise(training: Mapping[str, Any], defaults: list[str]) -> bool | None:
    """Under a framework whose models run as PyTorch eager ops unless torch.compile is on (its convention's
    fused_elementwise default is false: torchtitan, PyTorch DDP and FSDP), whether the case compiled
    (`torch_compile`, or torch.compile among its `techniques`; flagged where it says neither); every other
    framework here fuses them, or counts its own block (InternEvo's elementwise_bytes): None, its convention."""
    known = _known_framework(training)
    eager = known is not None and any(d.path == "fused_elementwise" and d.value is False
                                      for d in FRAMEWORKS[known].defaults)
    if not eager:
        return None
    compiled = training.get("torch_compile")
    if compiled is None and training.get("techniques") is not None:
        compiled = "torch.compile" in str(training["techniques"]).lower()
    if compiled is None:
        defaults.append(f"torch_compile not stated: off (opt-in under {known}): eager element-wise ops")
    return bool(compiled)


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
# torchtitan compiles its loss with the model from bbb1b616e (2025-04-02, components/loss.py
# build_cross_entropy_loss); before it the loss ran eager, compiled model or not
_TORCHTITAN_COMPILED_LOSS_FROM = (2025, 4)


def _published_month(case: TrainingCase) -> tuple[int, int] | None:
    """(year, month) that the source's title names: '(Dec 2024)', '(June 2025)', '(2024-08)'; None without one."""
    text = case.title.lower()
    numeric = re.search(r"\b(20\d\d)-(0[1-9]|1[0-2])\b", text)
    if numeric:
        return int(numeric.group(1)), int(numeric.group(2))
    named = re.search(rf"\b({'|'.join(_MONTHS)})[a-z]*\.? (20\d\d)\b", text)
    return (int(named.group(2)), _MONTHS.index(named.group(1)) + 1) if named else None


def _cross_entropy(case: TrainingCase, compiled: bool, defaults: list[str]) -> dict[str, Any]:
    """The loss of a compiled torchtitan run published before _TORCHTITAN_COMPILED_LOSS_FROM: eager (flagged);
    otherwise its framework's convention ({})."""
    month = _published_month(case)
    if framework_of(case.training) != "torchtitan" or not compiled or month is None \
            or month >= _TORCHTITAN_COMPILED_LOSS_FROM:
        return {}
    defaults.append(f"torchtitan of {month[0]}-{month[1]:02d}: the loss ran eager beside the compiled model (it is "
                    "compiled with it from 2025-04)")
    return {"cross_entropy": "eager"}


# BLOOM's runs on Jean Zay from the 3D-topology benchmarks on (date tags from 02-20) and in production exported
# CUDA_LAUNCH_BLOCKING=1: async launches hung at 320 GPUs (tr11-176B-ml chronicles-prequel, "dealing with JZ
# hanging"; tr11-176B-ml.slurm: "do not remove or the training will hang"). The 02-17 "Best TFLOPs" runs predate it.
_BLOOM_BLOCKING_FROM = "02-20"


def _launch_blocking(case: TrainingCase, defaults: list[str]) -> bool:
    """Whether the case ran with CUDA_LAUNCH_BLOCKING=1 (see _BLOOM_BLOCKING_FROM), flagged where inferred."""
    if case.source != "bloom":
        return False
    date = re.search(r'Date tag "(\d\d-\d\d)"', case.note)
    if "production" not in case.id and (date is None or date.group(1) < _BLOOM_BLOCKING_FROM):
        return False
    defaults.append("CUDA_LAUNCH_BLOCKING=1 (BigScience's workaround for hangs from the 02-20 benchmarks on)")
    return True


# Frameworks on Transformer Engine, whose DotProductAttention prefers cuDNN's fused attention on Hopper and
# later ("give FusedAttention preference on Hopper+ for performance reasons", TE's backend selection).
_CUDNN_ATTENTION_FRAMEWORKS = ("megatron-core", "nemo")


# FlashAttention 1.x as cases write it: "FlashAttention 1.x (1.0.4)", "flash-attention v1.0.5", "flash_attn 1.0"
_FLASH1 = re.compile(r"flash[-_ ]?(?:attention|attn)?[-_ ]?(?:v|version )?1(?:\.[0-9x]+)*(?![0-9])", re.IGNORECASE)


def _attention_kernel(case: TrainingCase, defaults: list[str]) -> AttentionKernel:
    """cudnn under Transformer Engine (_CUDNN_ATTENTION_FRAMEWORKS); triton for LLM Foundry's MPT benchmark
    tables: their runs were launched by scripts/train/benchmarking/submit_benchmarks.py, whose `--attn_impl`
    defaulted to 'triton' until v0.7.0 (llm-foundry 7f0fdae, 2024-03; every table was added before, the H100
    ones in b2a43a1 and 5e85bd6 with sweep.sh never setting it); flash2 otherwise. A case that names its kernel
    (`attention`, as MaxText's option: cudnn_flash_te is cuDNN's through Transformer Engine) runs that one;
    FlashAttention 1.x named in `attention` or `flash_attention` is flash1."""
    stated = str(case.training.get("attention") or "").lower()
    if _FLASH1.search(f"{stated} {case.training.get('flash_attention') or ''}"):
        return "flash1"
    for kernel in ("cudnn", "triton", "flash"):
        if kernel in stated:
            return "flash2" if kernel == "flash" else cast(AttentionKernel, kernel)
    if framework_of(case.training) in _CUDNN_ATTENTION_FRAMEWORKS:
        return "cudnn"
    if case.source == "llmfoundry":
        defaults.append("attention: MPT's Triton FlashAttention (the benchmark script's attn_impl default)")
        return "triton"
    return "flash2"


# The cases' framework names -> the framework whose conventions (workloads.frameworks) the job runs under.
# Megatron-LM's 2019-2022 runs keep the conventions of their time (training_parallel), not today's defaults.
_FRAMEWORKS: dict[str, Framework] = {
    "megatron-core": "megatron-core", "nemo": "nemo", "torchtitan": "fsdp2", "megatron-deepspeed": "megatron-deepspeed"}


def _known_framework(training: Mapping[str, Any]) -> Framework | None:
    """The framework a case names, where its conventions are known (see _FRAMEWORKS)."""
    text = str(training.get("framework") or "").lower()
    known = _FRAMEWORKS.get(framework_of(training))
    if known is None and ("foundry" in text or "composer" in text):
        known = "llm-foundry"
    if known is None and re.search(r"\bdeepspeed\b", text):  # Megatron-DeepSpeed is matched above
        known = "deepspeed"
    if known is None and re.search(r"\bfsdp ?2\b|fully_shard\b", text):
        known = "fsdp2"
    elif known is None and re.search(r"\bfsdp\b|fullyshardeddataparallel", text):
        known = "pytorch-fsdp"
    elif known is None and re.search(r"\bddp\b|distributeddataparallel", text):
        known = "pytorch-ddp"
    if known is None and "maxtext" in text:
        known = "maxtext"
    if known is None and ("internevo" in text or "internlm" in text):
        known = "internevo"
    return known


def _zero1_group(training: Mapping[str, Any], strategy: StrategySpec, dp: int) -> StrategySpec:
    """A stated ZeRO-1 group smaller than the data-parallel group (InternEvo's zero1=N, `zero1_group_size`, in
    data-parallel ranks): the optimizer states shard within groups of that many ranks (shard_group_gpus)."""
    group = training.get("zero1_group_size")
    if strategy.kind == "zero1" and isinstance(group, int) and 0 < group < dp:
        return StrategySpec.model_validate({**strategy.model_dump(exclude_unset=True), "shard_group_gpus": group})
    return strategy


# DeepSpeed 0.12.4 (PR #4695, 2023-11) made ZeRO-1/2 all-reduce each gradient bucket (use_multi_rank_bucket_allreduce)
_DEEPSPEED_BUCKET_ALL_REDUCE_FROM = (0, 12, 4)


def _deepspeed_release(training: Mapping[str, Any], strategy: StrategySpec, defaults: list[str]) -> StrategySpec:
    """A ZeRO-1/2 case naming a DeepSpeed release before _DEEPSPEED_BUCKET_ALL_REDUCE_FROM ("DeepSpeed 0.9.2")
    reduces its buckets with one reduce per rank, as that release did (flagged); otherwise `strategy` as it is."""
    release = re.search(r"deepspeed\D{0,12}?(\d+)\.(\d+)(?:\.(\d+))?", str(training.get("framework") or ""),
                        re.IGNORECASE)
    if release is None or strategy.kind not in ("zero1", "zero2") or strategy.reduce_per_rank:
        return strategy
    version = tuple(int(part or 0) for part in release.groups())
    if version >= _DEEPSPEED_BUCKET_ALL_REDUCE_FROM:
        return strategy
    defaults.append(f"DeepSpeed {'.'.join(map(str, version))}: one reduce per rank of each gradient bucket (its "
                    "stage_1_and_2.py average_tensor; all-reduced per bucket from 0.12.4)")
    return strategy.model_copy(update={"reduce_per_rank": True})


def _framework(training: Mapping[str, Any], kind: str) -> Framework | None:
    """The framework a case ran under, where its conventions are known (see _FRAMEWORKS) and it runs the
    case's strategy `kind`."""
    known = _known_framework(training)
    return known if known is not None and kind in FRAMEWORKS[known].kinds else None


def _unnamed_sharded_strategy(training: Mapping[str, Any], names: list[str],
                              defaults: list[str]) -> StrategyKind | None:
    """FSDP for a case that names no strategy at all under a framework that shards with FSDP by default (LLM
    Foundry, PyTorch FSDP, torchtitan, MaxText: workloads.frameworks, the first of their strategies), flagged."""
    known = _known_framework(training)
    if names or known is None or FRAMEWORKS[known].kinds[0] != "fsdp":
        return None
    defaults.append(f"strategy not stated: fsdp, {FRAMEWORKS[known].title}'s")
    return "fsdp"


def map_case(case: TrainingCase) -> MappedCase:
    """Lower `case` onto (TopologySpec, TrainingSpec, ModelSpec), or say why it is skipped.

    Order of the checks (the first failing one is the reason): strategy understood; task (not LoRA);
    GPU and cluster; layout (tp x pp x cp x dp fits the GPUs); strategy expressible; model shape;
    precision, batch. A case that could not be read (TrainingCase.problem) is skipped with that message.
    """
    if case.problem is not None:
        return MappedCase(case, None, False, None, (), skipped=case.problem)
    training = {**case.training, **{dim: degree for dim, degree in stated_degrees(case.training).items()
                                     if case.training.get(dim) is None}}  # 'TP4' in the strategy list: tp 4
    names = strategy_names(training)
    unknown = [n for n in names if n not in KNOWN_STRATEGIES]
    model_parallel = model_parallel_degrees(training, names)
    family, inferred = strategy_family(training, names, bool(model_parallel))
    defaults: list[str] = [inferred] if inferred else []
    gpu: str | None = None

    def skipped(reason: str) -> MappedCase:
        return MappedCase(case, family, bool(model_parallel), gpu, tuple(defaults), skipped=reason)

    if unknown:
        return skipped(f"strategy {unknown} not known; known: {', '.join(KNOWN_STRATEGIES)}")
    if family is None:
        return skipped(f"no data-parallel strategy in {names}")
    try:
        _check_task(case, defaults)
        mtp_layers = _multi_token_prediction(case, defaults)
        topology, gpu = topology_of(_corrected_cluster(case, defaults), defaults)
        n_gpus = topology.gpus_per_node * topology.nodes
        layout = lower_parallel(case.id, training, case.model, names, n_gpus, defaults)
        kind = layout.strategy_kind or _unnamed_sharded_strategy(training, names, defaults)
        if kind not in (None, "ddp") and inferred in defaults:
            defaults.remove(inferred)  # the framework's convention says which strategy, and is flagged
        strategy = _zero1_group(training, _deepspeed_release(
            training, strategy_spec(layout.training, names, family, layout.dp, defaults, kind, layout.strategy_knobs),
            defaults), layout.dp)
        family = FAMILY_OF_KIND[strategy.kind]
        seq_len = _seq_len(case, defaults)
        model = _model_spec(case, layout.model, seq_len, defaults)
        compiled = _fused_elementwise(training, defaults)
        precision = _precision(_precision_text(layout.training), gpu, defaults)
        job = TrainingSpec(model=model, seq_len=seq_len, mtp_layers=mtp_layers,
                           precision=precision,
                           **_fp8_recipe(layout.training, _precision_text(layout.training), precision, defaults),
                           **_recomputation(layout.training, case.metrics, model.layers, defaults),
                           flash_attention=_flash_attention(training),
                           **({} if compiled is None else {"fused_elementwise": compiled}),
                           **_cross_entropy(case, bool(compiled), defaults),
                           launch_blocking=_launch_blocking(case, defaults),
                           attention_kernel=_attention_kernel(case, defaults),
                           strategy=strategy, parallel=layout.parallel,
                           framework=_framework(training, strategy.kind),
                           packed_sample_len=training.get("packed_sample_len"),
                           memory_fraction=training.get("memory_fraction"),
                           **_lora(case, defaults),
                           routing=_routing(training),
                           **_batch(_global_batch_of_tokens(_micro_batch_of_tokens(layout.training, seq_len, defaults),
                                                            seq_len, defaults), layout.dp, n_gpus, layout.parallel.pp,
                                    defaults))
        job = with_framework(job)
    except Unexpressible as exc:
        return skipped(str(exc))
    except ClusterSimError as exc:
        return skipped(str(exc))
    except ValidationError as exc:
        return skipped(" ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
    return MappedCase(case, family, bool(model_parallel), gpu, tuple(defaults), None, topology, job, model)
