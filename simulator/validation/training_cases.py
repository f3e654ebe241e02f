"""Published training-throughput cases (../shared/data/training/cases.yaml): parsing, and the lowering
of each case onto the specs the predictor takes, or the reason it cannot be expressed.

A case is lowered to (TopologySpec, TrainingSpec, ModelSpec). Only data parallelism is expressible here
(FSDP, ZeRO-1/2/3, DDP); tensor, pipeline and context parallelism come later and such cases are skipped
with the reason. Every field a case does not state and that had to be filled in is named in the
mapped case's `defaults` ("flagged" cases). The fillers, in one place:

- GPUs per node: the preset's (8; 16 on DGX-2). Inter-node network: the preset's NICs and transport.
- seq_len: 8192 for torchtitan (its llama3 train configs), else 2048. Precision: bf16, or fp16 on GPUs
  without bf16 (V100). Activation checkpointing: none. FFN: 4 x hidden. FSDP sharding: FULL_SHARD.
- Batch: micro-batch = global batch / (GPUs x grad_accum); no global batch: no accumulation.
- The optimizer is AdamW for every case (no source names another): not flagged.
Free text is read with a few patterns: "A100 80GB (Selene, DGX A100)" -> A100-SXM4-80GB on dgx-a100,
"4 x 100 Gbps IB" -> 4 NICs of 100 Gb/s, "400 Gb/s per GPU" -> one 400 Gb/s NIC per GPU, "1600 Gbps"
-> the node total over the preset's NIC count; "8K" tokens = 8192, "250k" vocabulary = 250000.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from simulator.core.errors import ClusterSimError, ConfigError
from simulator.core.yaml_text import load_yaml_text
from simulator.validation.training_cluster import Unexpressible, topology_of
from topologies.hardware import gpu_spec
from topologies.spec import TopologySpec
from workloads.spec import Checkpointing, FsdpSharding, ModelSpec, Precision, StrategyKind, StrategySpec, TrainingSpec

Family = Literal["fsdp", "zero", "ddp"]

_SECTIONS = ("model", "training", "cluster", "metrics")
# Field -> what parse_cases accepts besides null ("int", "str", "int|str", "bool|str", "str-list").
_FIELD_TYPES: dict[str, dict[str, str]] = {
    "model": {"name": "str", "layers": "int", "hidden": "int", "heads": "int", "kv_heads": "int", "ffn": "int",
              "vocab": "int|str", "seq_len": "int|str"},
    "training": {"strategy": "str-list", "tp": "int", "pp": "int", "cp": "int", "dp": "int", "fsdp": "int",
                 "model_parallel_size_tp_x_pp": "int", "micro_batch": "int", "global_batch": "int",
                 "grad_accum": "int", "zero_stage": "int|str", "zeropp": "bool", "precision": "str",
                 "activation_checkpointing": "bool|str", "fsdp_sharding_strategy": "str", "offload": "bool|str",
                 "fsdp_mixed_precision_mode": "str"},
    "cluster": {"gpu": "str", "num_gpus": "int", "gpus_per_node": "int", "nodes": "int", "intra_node": "str",
                "inter_node": "str", "inter_node_bw_per_node": "str", "ib_links": "str"},
}
_REQUIRED = {("training", "strategy"), ("cluster", "gpu")}
_K_NUMBER = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*[kK]\s*$")


@dataclass(frozen=True)
class TrainingCase:
    """One published measurement, its sections kept as written (see the data README)."""

    id: str
    model: Mapping[str, Any]
    training: Mapping[str, Any]
    cluster: Mapping[str, Any]
    metrics: Mapping[str, Any]
    note: str = ""

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
        "int|str": is_int or isinstance(value, str),
        "bool|str": isinstance(value, bool | str),
        "str-list": isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value)),
    }
    return checks[kind]


def _parse_one(entry: Any, source: str, index: int) -> TrainingCase:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{source}: case #{index}: expected a mapping with id, model, training, cluster, metrics")
    case_id = entry.get("id")
    if not isinstance(case_id, str) or not case_id.strip():
        raise ConfigError(f"{source}: case #{index}: id: expected a non-empty string, got {case_id!r}")
    where = f"{source}: case {case_id}"
    sections: dict[str, Mapping[str, Any]] = {}
    for name in _SECTIONS:
        section = entry.get(name)
        if not isinstance(section, Mapping):
            raise ConfigError(f"{where}: {name}: expected a mapping, got {type(section).__name__}")
        sections[name] = dict(section)
    for name, fields in _FIELD_TYPES.items():
        for key, kind in fields.items():
            value = sections[name].get(key)
            if (name, key) in _REQUIRED and value is None:
                raise ConfigError(f"{where}: {name}.{key}: required")
            if not _type_ok(value, kind):
                raise ConfigError(f"{where}: {name}.{key}: expected {kind.replace('|', ' or ')} or null, "
                                  f"got {value!r}")
    for key in ("seq_len", "vocab"):
        value = sections["model"].get(key)
        if isinstance(value, str) and not _K_NUMBER.match(value):
            raise ConfigError(f"{where}: model.{key}: expected an integer or a count like '8K', got {value!r}")
    for key, value in sections["metrics"].items():
        if value is not None and not isinstance(value, int | float | str):
            raise ConfigError(f"{where}: metrics.{key}: expected a number or a string, got {value!r}")
    note = entry.get("note") or ""
    if not isinstance(note, str):
        raise ConfigError(f"{where}: note: expected a string, got {type(note).__name__}")
    return TrainingCase(case_id, sections["model"], sections["training"], sections["cluster"],
                        sections["metrics"], note)


def parse_cases(text: str, source: str) -> list[TrainingCase]:
    """The cases of a YAML list in the schema of training/cases.yaml; `source` names the text in errors.

    ConfigError names the case (id, or index when the id is unusable) and the field on malformed input.
    """
    data = load_yaml_text(text, source)
    if not isinstance(data, list):
        raise ConfigError(f"{source}: expected a YAML list of cases, got {type(data).__name__}")
    cases = [_parse_one(entry, source, index) for index, entry in enumerate(data)]
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise ConfigError(f"{source}: case {case.id}: id: duplicate")
        seen.add(case.id)
    return cases


@dataclass(frozen=True)
class MappedCase:
    """A case lowered onto the predictor's specs, or the reason it is skipped (specs then None).

    family: the data-parallel strategy family (fsdp / zero / ddp; None: none understood).
    model_parallel: the case uses tensor/pipeline/context parallelism (out of scope for now).
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
        """A data-parallel case (FSDP, ZeRO, DDP) without model parallelism: what this tool should express."""
        return self.family is not None and not self.model_parallel


# --- strategy -------------------------------------------------------------------------------------

_KNOWN_STRATEGIES = ("fsdp", "hsdp", "zero1", "zero2", "zero3", "zeropp", "ddp", "dp", "tp", "pp", "cp")
_MODEL_PARALLEL = ("tp", "pp", "cp")
_ZERO_KINDS: dict[int | None, StrategyKind] = {1: "zero1", 2: "zero2", 3: "zero3"}
_FSDP_SHARDINGS: dict[str, FsdpSharding] = {
    "FULL_SHARD": "FULL_SHARD", "SHARD_GRAD_OP": "SHARD_GRAD_OP", "HYBRID_SHARD": "HYBRID_SHARD",
    "NO_SHARD": "NO_SHARD"}
# Composer's FSDP mixed_precision modes: FULL and DEFAULT reduce gradients in fp32, PURE in the amp dtype.
_REDUCE_BYTES = {"FULL": 4, "DEFAULT": 4, "PURE": 2}


def _strategy_names(training: Mapping[str, Any]) -> list[str]:
    raw = training["strategy"]
    return [s.strip().lower() for s in ([raw] if isinstance(raw, str) else raw)]


def _leading_int(value: Any) -> int | None:
    if isinstance(value, int):
        return value
    match = re.match(r"\s*(\d+)", value) if isinstance(value, str) else None
    return int(match.group(1)) if match else None


def _model_parallel(training: Mapping[str, Any], names: list[str]) -> list[str]:
    """'tp=4'-style descriptions of the model-parallel degrees above 1 (or stated but unknown)."""
    used = [f"{n}={training[n]}" for n in _MODEL_PARALLEL if (training.get(n) or 1) > 1]
    product = training.get("model_parallel_size_tp_x_pp")
    if product and product > 1:
        used.append(f"tp x pp={product}")
    elif not product:
        used += [f"{n}=?" for n in _MODEL_PARALLEL if n in names and training.get(n) is None]
    return used


def _family(training: Mapping[str, Any], names: list[str], model_parallel: bool) -> tuple[Family | None, str | None]:
    """The data-parallel family and, when it is inferred rather than named, the flag saying so."""
    if "fsdp" in names or "hsdp" in names:
        return "fsdp", None
    if any(n.startswith("zero") for n in names) or training.get("zeropp") is True \
            or _leading_int(training.get("zero_stage")):
        return "zero", None
    if "ddp" in names or "dp" in names:
        return "ddp", None
    if not model_parallel and all(n in _MODEL_PARALLEL for n in names):
        return "ddp", f"strategy {names} at degree 1: plain data parallelism (ddp)"
    return None, None


def _strategy_spec(training: Mapping[str, Any], names: list[str], family: Family, n_gpus: int,
                   defaults: list[str]) -> StrategySpec:
    if family == "ddp":
        return StrategySpec(kind="ddp")
    if family == "zero":
        if "zeropp" in names or training.get("zeropp") is True:
            raise Unexpressible("ZeRO++ (quantized weight/gradient collectives, hpZ secondary partition) "
                                 "is not expressible")
        if training.get("offload"):
            raise Unexpressible(f"ZeRO-Offload ({training['offload']}) is not expressible")
        stages = [int(n[4]) for n in names if n in ("zero1", "zero2", "zero3")]
        stage = stages[0] if stages else _leading_int(training.get("zero_stage"))
        if stage not in _ZERO_KINDS:
            raise Unexpressible(f"ZeRO stage {training.get('zero_stage')!r} not understood")
        return StrategySpec(kind=_ZERO_KINDS[stage])
    stated = training.get("fsdp_sharding_strategy")
    if stated is None:
        defaults.append("fsdp_sharding_strategy not stated: FULL_SHARD")
    sharding = _FSDP_SHARDINGS.get(stated or "FULL_SHARD")
    if sharding is None:
        raise Unexpressible(f"fsdp_sharding_strategy {stated!r} not known; known: {', '.join(_FSDP_SHARDINGS)}")
    mode = training.get("fsdp_mixed_precision_mode")
    if mode is not None and mode.upper() not in _REDUCE_BYTES:
        raise Unexpressible(f"fsdp_mixed_precision_mode {mode!r} not known; known: {', '.join(_REDUCE_BYTES)}")
    knobs: dict[str, Any] = {"grad_reduce_bytes": _REDUCE_BYTES[mode.upper()]} if mode else {}
    shard_degree = training.get("fsdp")
    if sharding == "HYBRID_SHARD" or "hsdp" in names or (shard_degree and shard_degree < n_gpus):
        return StrategySpec(kind="hsdp", fsdp_sharding="HYBRID_SHARD", shard_group_gpus=shard_degree, **knobs)
    return StrategySpec(kind="fsdp", fsdp_sharding=sharding, **knobs)


# --- model, batch, precision ----------------------------------------------------------------------

_DEFAULT_SEQ_LEN = 2048
_TORCHTITAN_SEQ_LEN = 8192  # torchtitan train_configs/llama3_*.toml: seq_len = 8192


def _k_count(value: int | str, unit: int) -> int:
    if isinstance(value, int):
        return value
    match = _K_NUMBER.match(value)
    if not match:
        raise Unexpressible(f"count {value!r} not understood")
    return int(float(match.group(1)) * unit)


def _seq_len(case: TrainingCase, defaults: list[str]) -> int:
    value = case.model.get("seq_len")
    if value is not None:
        return _k_count(value, 1024)
    default = _TORCHTITAN_SEQ_LEN if "torchtitan" in str(case.training.get("framework", "")).lower() \
        else _DEFAULT_SEQ_LEN
    defaults.append(f"seq_len not stated: {default}")
    return default


def _architecture(name: str, framework: str) -> dict[str, bool]:
    """Block details that follow from the model family (public configs of each family)."""
    low = name.lower()
    if re.search(r"llama|mistral|mixtral|qwen", low):
        return {"gated_mlp": True, "tied_embeddings": False, "learned_positions": False, "bias": False}
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


def _model_spec(case: TrainingCase, seq_len: int, defaults: list[str]) -> ModelSpec:
    model = case.model
    missing = [k for k in ("layers", "hidden", "heads", "vocab") if model.get(k) is None]
    if missing:
        raise Unexpressible(f"model shape not stated: {', '.join(missing)}")
    vocab = model["vocab"]
    if isinstance(vocab, str):
        vocab = _k_count(vocab, 1000)
        defaults.append(f"vocab {model['vocab']!r} read as {vocab}")
    if model.get("ffn") is None:
        defaults.append(f"ffn not stated: 4 x hidden = {4 * model['hidden']}")
    name = str(model.get("name") or case.id)
    return ModelSpec(name=name, layers=model["layers"], hidden=model["hidden"], heads=model["heads"],
                     kv_heads=model.get("kv_heads"), ffn_hidden=model.get("ffn"), vocab=vocab,
                     max_seq_len=seq_len, source=f"training case {case.id}",
                     **_architecture(name, str(case.training.get("framework", ""))))


def _precision(text: str | None, gpu: str, defaults: list[str]) -> Precision:
    """The compute precision named in free text ('amp_bf16', 'bf16 + float8 linear' -> fp8, 'mixed (fp16)')."""
    low = (text or "").lower()
    precision: Precision
    if "fp8" in low or "float8" in low:
        precision = "fp8"
    elif "bf16" in low:
        precision = "bf16"
    elif "fp16" in low:
        precision = "fp16"
    elif "fp32" in low:
        precision = "fp32"
    else:
        precision = "bf16" if gpu_spec(gpu).bf16_tflops else "fp16"
        defaults.append(f"precision not stated{f' ({text!r})' if text else ''}: {precision}")
    if getattr(gpu_spec(gpu), f"{precision}_tflops") is None:
        raise Unexpressible(f"precision {precision} on {gpu}: no such tensor path")
    return precision


def _checkpointing(value: bool | str | None, defaults: list[str]) -> Checkpointing:
    """true/false (full recompute or none), or text naming selective / full / none."""
    if value is None:
        defaults.append("activation_checkpointing not stated: none")
        return "none"
    low = str(value).lower()
    if "selective" in low:
        return "selective"
    if "full" in low or low == "true":
        return "full"
    if "none" in low or low == "false":
        return "none"
    raise Unexpressible(f"activation_checkpointing {value!r} not understood")


def _batch(training: Mapping[str, Any], n_gpus: int, defaults: list[str]) -> dict[str, int | None]:
    """micro_batch and global_batch (or grad_accum) for a data-parallel job on `n_gpus` GPUs."""
    micro: int | None = training.get("micro_batch")
    glob: int | None = training.get("global_batch")
    accum: int | None = training.get("grad_accum")
    if glob is None:
        if micro is None:
            defaults.append("micro_batch not stated: 1")
        if accum is None:
            defaults.append("global_batch not stated: no gradient accumulation")
        return {"micro_batch": micro or 1, "grad_accum": accum}
    if micro is None:
        micro = glob // (n_gpus * (accum or 1))
        defaults.append(f"micro_batch not stated: global_batch / (GPUs x grad_accum {accum or 1}) = {micro}")
    if micro < 1 or glob % (micro * n_gpus):
        raise Unexpressible(f"global_batch {glob} is not a multiple of micro_batch {micro} x {n_gpus} GPUs")
    if accum is not None and accum != glob // (micro * n_gpus):
        raise Unexpressible(f"global_batch {glob} != micro_batch {micro} x grad_accum {accum} x {n_gpus} GPUs")
    return {"micro_batch": micro, "global_batch": glob}


def map_case(case: TrainingCase) -> MappedCase:
    """Lower `case` onto (TopologySpec, TrainingSpec, ModelSpec), or say why it is skipped.

    Order of the checks (the first failing one is the reason): strategy understood; no tensor/pipeline/
    context parallelism; strategy expressible; GPU and cluster; model shape; precision, batch.
    """
    training = case.training
    names = _strategy_names(training)
    unknown = [n for n in names if n not in _KNOWN_STRATEGIES]
    model_parallel = _model_parallel(training, names)
    family, inferred = _family(training, names, bool(model_parallel))
    defaults: list[str] = [inferred] if inferred else []
    gpu: str | None = None

    def skipped(reason: str) -> MappedCase:
        return MappedCase(case, family, bool(model_parallel), gpu, tuple(defaults), skipped=reason)

    if unknown:
        return skipped(f"strategy {unknown} not known; known: {', '.join(_KNOWN_STRATEGIES)}")
    if model_parallel:
        return skipped(f"tensor/pipeline/context parallelism ({', '.join(model_parallel)}): later issue")
    if family is None:
        return skipped(f"no data-parallel strategy in {names}")
    try:
        topology, gpu = topology_of(case.cluster, defaults)
        n_gpus = topology.gpus_per_node * topology.nodes
        strategy = _strategy_spec(training, names, family, n_gpus, defaults)
        seq_len = _seq_len(case, defaults)
        model = _model_spec(case, seq_len, defaults)
        job = TrainingSpec(model=model, seq_len=seq_len, precision=_precision(training.get("precision"), gpu, defaults),
                           activation_checkpointing=_checkpointing(training.get("activation_checkpointing"), defaults),
                           strategy=strategy, **_batch(training, n_gpus, defaults))
    except Unexpressible as exc:
        return skipped(str(exc))
    except ClusterSimError as exc:
        return skipped(str(exc))
    except ValidationError as exc:
        return skipped(" ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
    return MappedCase(case, family, False, gpu, tuple(defaults), None, topology, job, model)
