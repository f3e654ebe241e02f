"""The data-parallel strategy of a published training case: the names in its strategy list, its family
(fsdp / zero / ddp), and the StrategySpec it lowers to (ZeRO stage, FSDP sharding, HSDP shard group,
gradient-reduction precision; ZeRO++ as its three techniques together, as the ZeRO++ blog ran it), or why it
cannot be expressed (ZeRO-Offload, unknown settings).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from simulator.validation.training_cluster import SAYS_NONE, UNSTATED, Unexpressible
from workloads.spec import FsdpSharding, StrategyKind, StrategySpec

Family = Literal["fsdp", "zero", "ddp"]

KNOWN_STRATEGIES = ("fsdp", "hsdp", "zero1", "zero2", "zero3", "zeropp", "ddp", "dp", "tp", "pp", "cp", "ep", "sp")
_MODEL_PARALLEL = ("tp", "pp", "cp", "ep")
_MODIFIERS = ("sp",)  # names a way of running a dimension (Megatron's sequence parallelism with tp), not a degree
# other spellings of the names above, as sources write them (compared without case, spaces, '-', '_' or '.')
_SPELLINGS = {
    "fsdp1": "fsdp", "fsdp2": "fsdp", "fullyshardeddataparallel": "fsdp", "fullshard": "fsdp",
    "hybridshard": "hsdp", "zero++": "zeropp", "zeroplusplus": "zeropp",
    # FSDP named with its sharding strategy ("FSDP FULL_SHARD", "FSDP SHARD_GRAD_OP"): the sharding is read from the
    # name too (_stated_sharding)
    "fsdpfullshard": "fsdp", "fsdpfullsharding": "fsdp", "fsdpshardgradop": "fsdp", "fsdpnoshard": "fsdp",
    "shardgradop": "fsdp",
    "fsdphybridshard": "hsdp", "hsdphybridshard": "hsdp",
    "distributeddataparallel": "ddp", "pytorchddp": "ddp", "dataparallel": "dp", "dataparallelism": "dp",
    "tensorparallel": "tp", "tensorparallelism": "tp", "tensormodelparallel": "tp",
    "pipelineparallel": "pp", "pipelineparallelism": "pp", "pipelinemodelparallel": "pp",
    "contextparallel": "cp", "contextparallelism": "cp", "expertparallel": "ep", "expertparallelism": "ep",
    "sequenceparallel": "sp", "sequenceparallelism": "sp",
    # Megatron-LM's --use-distributed-optimizer shards the optimizer states over data-parallel ranks (ZeRO-1);
    # FairScale's OSS shards optimizer states (ZeRO-1), its ShardedDataParallel gradients too (ZeRO-2)
    "distributedoptimizer": "zero1", "usedistributedoptimizer": "zero1",
    "oss": "zero1", "shardeddataparallel": "zero2", "shardedddp": "zero2"}
_ZERO_STAGE = re.compile(r"^(?:deepspeed)?zero(?:stage)?([123])$")
_ZERO_KINDS: dict[int | None, StrategyKind] = {1: "zero1", 2: "zero2", 3: "zero3"}
_FSDP_SHARDINGS: dict[str, FsdpSharding] = {
    "FULL_SHARD": "FULL_SHARD", "SHARD_GRAD_OP": "SHARD_GRAD_OP", "HYBRID_SHARD": "HYBRID_SHARD",
    "NO_SHARD": "NO_SHARD"}
# Composer's FSDP mixed_precision modes: FULL and DEFAULT reduce gradients in fp32, PURE in the amp dtype.
_REDUCE_BYTES = {"FULL": 4, "DEFAULT": 4, "PURE": 2}
FAMILY_OF_KIND: dict[StrategyKind, Family] = {"ddp": "ddp", "zero1": "zero", "zero2": "zero", "zero3": "zero",
                                               "fsdp": "fsdp", "hsdp": "fsdp"}


# a parallel dimension written with its degree as a strategy item: 'TP4', 'TP=4', 'PP 8', 'CP2'
_WITH_DEGREE = re.compile(r"^(tp|pp|cp|dp|ep)\s*[=:]?\s*(\d+)$", re.IGNORECASE)


def stated_degrees(training: Mapping[str, Any]) -> dict[str, int]:
    """Degrees the strategy items state with their names ('TP4/PP4/CP2' -> tp 4, pp 4, cp 2)."""
    return {found.group(1).lower(): int(found.group(2)) for item in _strategy_items(training)
            if (found := _WITH_DEGREE.match(item.strip())) is not None}


def _canonical(name: str, zero_stage: int | None) -> str:
    """One strategy name in KNOWN_STRATEGIES' spelling where it is another's ('ZeRO-3', 'zero stage 3' -> 'zero3';
    'ZeRO' or 'DeepSpeed' with a stated zero_stage 2 -> 'zero2'; 'FSDP2' -> 'fsdp'; 'sequence parallel' -> 'sp'; a
    name with a gloss in brackets, 'Fully Sharded Data Parallel (FSDP)', as either), else lower-cased as given."""
    low = name.strip().lower()
    if (with_degree := _WITH_DEGREE.match(low)) is not None:
        return with_degree.group(1)  # 'TP4': tp, its degree read by stated_degrees
    key = re.sub(r"[\s._()-]", "", low)
    stage = _ZERO_STAGE.match(key)
    if stage:
        return f"zero{stage.group(1)}"
    if key in ("zero", "deepspeed", "deepspeedzero") and zero_stage in _ZERO_KINDS:
        return f"zero{zero_stage}"
    known = _SPELLINGS.get(key, key if key in KNOWN_STRATEGIES else None)
    bracketed = re.fullmatch(r"(.+?)\s*\((.+)\)", low)
    if known is None and bracketed is not None:  # 'Fully Sharded Data Parallel (FSDP)', 'fsdp2 (full_shard)': the
        # name before the brackets, else the one in them
        known = next((name for part in bracketed.groups()
                      if (name := _canonical(part, zero_stage)) in KNOWN_STRATEGIES), None)
    return known or low


# an item naming several dimensions at once: "TP+PP+DP", "DP / TP / PP", "FSDP + TP" (a lone '+' between names,
# never ZeRO++'s), and Megatron's "3D parallelism" (tensor, pipeline and data)
_JOINED = re.compile(r"\s*(?:(?<!\+)\+(?!\+)|/|&|,|\band\b)\s*", re.IGNORECASE)
_THREE_D = re.compile(r"^3\s*-?\s*d(?:\s*parallel(?:ism)?)?$", re.IGNORECASE)


def _strategy_items(training: Mapping[str, Any]) -> list[str]:
    """The strategy list's items as written, an item joining several names split (_JOINED); a string is a list
    of one."""
    raw = training.get("strategy") or []
    return [part for item in ([raw] if isinstance(raw, str) else raw) for part in _JOINED.split(str(item)) if part]


def strategy_names(training: Mapping[str, Any]) -> list[str]:
    """The case's strategy list in KNOWN_STRATEGIES' spelling (_canonical; a single string is a list of one; an item
    joining several names, 'TP+PP+DP' or '3D parallelism', is its names; none stated: an empty list, which the
    framework's convention or plain data parallelism fills)."""
    stage = _leading_int(training.get("zero_stage"))
    items = _strategy_items(training)
    expanded = [name for item in items for name in (("tp", "pp", "dp") if _THREE_D.match(item.strip()) else (item,))]
    return [_canonical(s, stage) for s in expanded]


def _leading_int(value: Any) -> int | None:
    if isinstance(value, int):
        return value
    match = re.match(r"\s*(\d+)", value) if isinstance(value, str) else None
    return int(match.group(1)) if match else None


def model_parallel_degrees(training: Mapping[str, Any], names: list[str]) -> list[str]:
    """'tp=4'-style descriptions of the model-parallel degrees above 1 (or stated but unknown)."""
    used = [f"{n}={training[n]}" for n in _MODEL_PARALLEL if (training.get(n) or 1) > 1]
    product = training.get("model_parallel_size_tp_x_pp")
    if product and product > 1:
        used.append(f"tp x pp={product}")
    elif not product:
        used += [f"{n}=?" for n in _MODEL_PARALLEL if n in names and training.get(n) is None]
    return used


def strategy_family(training: Mapping[str, Any], names: list[str],
                    model_parallel: bool) -> tuple[Family | None, str | None]:
    """The data-parallel family and, when it is inferred rather than named, the flag saying so."""
    if "fsdp" in names or "hsdp" in names:
        return "fsdp", None
    if any(n.startswith("zero") for n in names) or training.get("zeropp") is True \
            or _leading_int(training.get("zero_stage")):
        return "zero", None
    if "ddp" in names or "dp" in names:
        return "ddp", None
    if all(n in _MODEL_PARALLEL + _MODIFIERS for n in names):
        if not names:
            return "ddp", "strategy not stated: plain data parallelism (ddp)"
        if model_parallel:
            return "ddp", f"strategy {names} names no data-parallel strategy: ddp"
        return "ddp", f"strategy {names} at degree 1: plain data parallelism (ddp)"
    return None, None


def strategy_spec(training: Mapping[str, Any], names: list[str], family: Family, n_dp: int, defaults: list[str],
                   kind: StrategyKind | None = None, knobs: Mapping[str, Any] | None = None) -> StrategySpec:
    """The data-parallel strategy over `n_dp` ranks; `kind` (a framework's, where the case names none)
    replaces ddp; `knobs` are the framework's StrategySpec fields (overlap, resharding; its ZeRO-1
    variant only where the strategy is ZeRO-1)."""
    base = _named_strategy(training, names, family, n_dp, defaults, kind)
    if not knobs:
        return base
    merged = {**base.model_dump(exclude_unset=True), **knobs}  # unset fields stay open to the framework's
    if merged.get("zero_grad_all_reduce") and merged["kind"] != "zero1":
        del merged["zero_grad_all_reduce"]
    return StrategySpec(**merged)


# fields a case states host-memory offload in: DeepSpeed's ZeRO-Offload, FSDP's CPUOffload, activations saved on the
# CPU (LLM Foundry's activation_cpu_offload, torch's save_on_cpu)
_OFFLOAD_FIELDS = ("offload", "cpu_offload", "activation_cpu_offload")


def _refuse_offload(training: Mapping[str, Any], family: Family) -> None:
    """Unexpressible where the case states host-memory offload of any kind, whatever the strategy: the host
    transfers and CPU optimizer are not modelled."""
    for name in _OFFLOAD_FIELDS:
        value = training.get(name)
        if value is not None and value is not False and not (SAYS_NONE.search(str(value))
                                                              or UNSTATED.search(str(value))):
            if family == "zero" and name == "offload":
                raise Unexpressible(f"ZeRO-Offload ({value}) is not expressible")
            raise Unexpressible(f"CPU offload ({name}: {value}) is not expressible")


def _named_strategy(training: Mapping[str, Any], names: list[str], family: Family, n_dp: int, defaults: list[str],
                    kind: StrategyKind | None) -> StrategySpec:
    _refuse_offload(training, family)
    if family == "ddp":
        return StrategySpec(kind=kind or "ddp")
    if family == "zero":
        stages = [int(n[4]) for n in names if n in ("zero1", "zero2", "zero3")]
        stage = stages[0] if stages else _leading_int(training.get("zero_stage"))
        if stage not in _ZERO_KINDS:
            raise Unexpressible(f"ZeRO stage {training.get('zero_stage')!r} not understood")
        zeropp = "zeropp" in names or training.get("zeropp") is True
        if zeropp and stage != 3:
            raise Unexpressible(f"ZeRO++ with ZeRO stage {stage}: ZeRO++ is a ZeRO-3 extension")
        zeropp_knobs = dict.fromkeys(("zeropp_quantized_weights", "zeropp_hierarchical_partition",
                                      "zeropp_quantized_gradients"), True) if zeropp else {}
        return StrategySpec(kind=_ZERO_KINDS[stage], fp32_grad_copy=True, **zeropp_knobs)  # DeepSpeed's ZeRO optimizer
    stated = _stated_sharding(training)
    sharding = _FSDP_SHARDINGS.get(stated or "FULL_SHARD")
    if sharding is None:
        raise Unexpressible(f"fsdp_sharding_strategy {training.get('fsdp_sharding_strategy')!r} not known; known: "
                            f"{', '.join(_FSDP_SHARDINGS)}")
    mode = training.get("fsdp_mixed_precision_mode")
    if mode is not None and mode.upper() not in _REDUCE_BYTES:
        raise Unexpressible(f"fsdp_mixed_precision_mode {mode!r} not known; known: {', '.join(_REDUCE_BYTES)}")
    knobs: dict[str, Any] = {"grad_reduce_bytes": _REDUCE_BYTES[mode.upper()]} if mode else {}
    shard_degree = training.get("fsdp")
    if sharding == "HYBRID_SHARD" or "hsdp" in names or (shard_degree and shard_degree < n_dp):
        return StrategySpec(kind="hsdp", fsdp_sharding="HYBRID_SHARD", shard_group_gpus=shard_degree, **knobs)
    if stated is None:
        defaults.append("fsdp_sharding_strategy not stated: FULL_SHARD")
    return StrategySpec(kind="fsdp", fsdp_sharding=sharding, **knobs)


def _stated_sharding(training: Mapping[str, Any]) -> str | None:
    """The FSDP sharding strategy a case states, as _FSDP_SHARDINGS spells it: its fsdp_sharding_strategy written
    any way ('full_shard', 'SHARD_GRAD_OP (ZeRO-2 like)', 'hybrid shard'), else one its strategy list names ('FSDP
    SHARD_GRAD_OP'); None when it states none; an unknown fsdp_sharding_strategy is returned as written."""
    def named(text: str) -> str | None:
        key = re.sub(r"[^A-Z]", "", text.upper())
        return next((name for name in _FSDP_SHARDINGS if name.replace("_", "") in key), None)
    stated = training.get("fsdp_sharding_strategy")
    if stated:
        return named(str(stated)) or str(stated)
    raw = training.get("strategy") or []
    return next((found for found in map(named, [raw] if isinstance(raw, str) else map(str, raw)) if found), None)


def unnamed_strategy(training: Mapping[str, Any], names: list[str]) -> bool:
    """The case names no data-parallel strategy ('dp' only names the dimension) and no ZeRO stage."""
    return all(n in ("tp", "pp", "cp", "ep", "dp", *_MODIFIERS) for n in names) and training.get("zero_stage") is None \
        and training.get("zeropp") is None
