"""A scenario: which cluster, which training job. The top-level spec of `clustersim predict`.

`resolve_scenario` turns names into specs (a topology preset, a model preset) and fills what the job
leaves unstated (`complete_training`); `scenario_echo` is the fully resolved scenario as data. Only the
CLI reads scenario files.

What a job leaves unstated comes from the model and the job's own layout, never from another
scenario (docs/scenarios.md):

- seq_len: the model's pre-training sequence length (ModelSpec.training_context: GPT-3 2,048, Llama 2
  4,096, Llama 3 8,192).
- micro_batch: 1 (TrainingSpec's default; Megatron-LM's --micro-batch-size in its example scripts and
  NeMo's recipes: one sequence per pipeline micro-batch).
- global_batch (and grad_accum): no accumulation, micro_batch x data-parallel GPUs.
- strategy: fsdp (PyTorch FSDP FULL_SHARD) without tensor or pipeline parallelism; with them ddp,
  Megatron-LM's default (its distributed optimizer, zero1 here, is an opt-in flag,
  --use-distributed-optimizer).
- activation_checkpointing none, precision bf16, optimizer adamw: TrainingSpec's defaults.
- With `training.framework`, every field the job leaves unstated takes that framework's default first
  (workloads.frameworks: its strategy, overlap, gradient reduction dtype, buckets, placement, memory).
"""

from __future__ import annotations

import re
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from simulator.collectives.nccl_releases import checked_release, parse_release
from simulator.collectives.nccl_setup import NcclSetup
from simulator.core.errors import ConfigError, config_error_from
from simulator.run.spec import RunSpec
from simulator.training.pace import Pace
from topologies.presets import load_preset
from topologies.spec import MAX_NODES, TopologySpec, validate_topology_spec
from workloads.frameworks import Job, default_kind, framework_defaults
from workloads.presets import load_model
from workloads.spec import ModelSpec, StrategyKind, StrategySpec, TrainingSpec

MAX_SLOWDOWN = 1000.0  # a GPU a thousand times slower is a failed one; the bound keeps step times finite


class StragglerSpec(BaseModel):
    """Slow GPUs: their compute takes `slowdown` times as long (thermal throttling, a bad HBM stack)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    slowdown: float = Field(ge=1.0, le=MAX_SLOWDOWN, allow_inf_nan=False,
                            description=f"Compute time factor of the slow GPUs (1.2 = 20% slower; at most "
                            f"{MAX_SLOWDOWN:g}).")
    gpus: int = Field(strict=True, default=1, ge=1, description="How many GPUs are slow (one is enough to pace a "
                      "step); with `device`, the GPUs it names.")
    device: str | None = Field(
        default=None, description="Where: a GPU (s3/gpu2: server 3's GPU 2), a whole server (s3), or a global "
        "rank (17). Default: wherever it paces the step most (with pipeline parallelism, every stage).")


class JitterSpec(BaseModel):
    """Per-GPU compute time noise: each GPU's compute takes (1 + cv x z) with z standard normal."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    cv: float = Field(ge=0.0, le=0.5, description="Coefficient of variation of a GPU's compute time per step.")
    seed: int = Field(
        strict=True, default=0, ge=0, description="Seed of the draw (the same seed gives the same prediction).")


class ScenarioSpec(BaseModel):
    """A training job on a cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str | None = Field(default=None, description="A label for reports.")
    topology: str | TopologySpec = Field(
        description="Topology preset name, the topology inline, or a preset with some fields replaced: "
        "{preset: dgx-h100, link_faults: [{device: s3/nic2, factor: 0.5}]} (nested mappings merge key by key).")
    nodes: int | None = Field(
        strict=True, default=None, ge=1, le=MAX_NODES, description="Nodes (servers); default: the topology's.")
    training: TrainingSpec = Field(description="The training job.")
    stragglers: StragglerSpec | tuple[StragglerSpec, ...] | None = Field(
        default=None, description="Slow GPUs, if any: one spec, or a list of them (each at its own device).")
    jitter: JitterSpec | None = Field(default=None, description="Per-step compute noise across GPUs.")
    nccl_env: dict[str, str] = Field(
        default_factory=dict, description="NCCL environment for every collective, e.g. NCCL_NVLS_ENABLE: '0', "
        "NCCL_COLLNET_ENABLE: '0', NCCL_ALGO: Ring, NCCL_PROTO: Simple.")
    nccl_version: str | None = Field(
        default=None, description="NCCL release the job runs, e.g. '2.21' or '2.18.6' (its container's): the "
        "algorithms it offers (NVLS from 2.17, PAT from 2.23, ...) and, with nccl_selection nccl, its tuner's "
        "choice. Default: the newest of a calibration profile's logs (predicting with one), else the newest "
        "modelled.")
    nccl_selection: Literal["model", "nccl"] | None = Field(
        default=None, description="Each collective's algorithm and protocol: 'model', the pair the cost model "
        "prices fastest, or 'nccl', the pair the release's tuner ranks first (NCCL's own constants). Default: "
        "the one a calibration profile's fit priced its logs with (predicting with one), else 'model'.")
    run: RunSpec | None = Field(default=None, description="Training to a token count through failures, checkpoints "
                                "and restarts (time to train, goodput).")


    @field_validator("topology", mode="before")
    @classmethod
    def _preset_with_overrides(cls, value: object) -> object:
        """`{preset: NAME, field: value, ...}`: the preset with those fields replaced, as a full spec."""
        if isinstance(value, dict) and "preset" in value:
            overrides = {key: item for key, item in value.items() if key != "preset"}
            if not isinstance(value["preset"], str):
                raise ValueError(f"preset: expected a preset name, got {type(value['preset']).__name__}")
            try:
                return load_preset(value["preset"], **overrides)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("nccl_version")
    @classmethod
    def _release(cls, value: str | None) -> str | None:
        if value is not None:
            checked_release(value)
        return value


def nccl_setup(scenario: ScenarioSpec) -> NcclSetup:
    """The scenario's NCCL: its environment, release and selection."""
    return NcclSetup.of(scenario.nccl_env, parse_release(scenario.nccl_version), scenario.nccl_selection)


def stragglers_of(scenario: ScenarioSpec) -> tuple[StragglerSpec, ...]:
    """The scenario's straggler specs as a tuple (one spec, a list, or none)."""
    if scenario.stragglers is None:
        return ()
    return scenario.stragglers if isinstance(scenario.stragglers, tuple) else (scenario.stragglers,)


_DEVICE = re.compile(r"s(\d+)(?:/gpu(\d+))?|(\d+)")


def straggler_ranks(device: str, nodes: int, gpus_per_node: int) -> range:
    """The global ranks a straggler's `device` names: s3/gpu2 (one GPU), s3 (a server's GPUs) or 17 (a
    rank); ConfigError naming what exists otherwise."""
    match = _DEVICE.fullmatch(device.strip())
    if match is None:
        raise ConfigError(f"stragglers.device {device!r}: expected a GPU (s3/gpu2), a server (s3) or a rank (17)")
    server, local, rank = match.groups()
    if rank is not None:
        if int(rank) >= nodes * gpus_per_node:
            raise ConfigError(f"stragglers.device {device!r}: the cluster has ranks 0-{nodes * gpus_per_node - 1}")
        return range(int(rank), int(rank) + 1)
    if int(server) >= nodes:
        raise ConfigError(f"stragglers.device {device!r}: the cluster has servers s0-s{nodes - 1}")
    if local is not None and int(local) >= gpus_per_node:
        raise ConfigError(f"stragglers.device {device!r}: a server has gpu0-gpu{gpus_per_node - 1}")
    first = int(server) * gpus_per_node
    return range(first + int(local), first + int(local) + 1) if local is not None else range(first,
                                                                                            first + gpus_per_node)


def pace_of(scenario: ScenarioSpec, nodes: int, gpus_per_node: int) -> Pace:
    """How the job's GPUs compute (simulator.training.pace): placed stragglers by rank; unplaced ones,
    times the jitter the slowest of the GPUs draws (seeded; the expected maximum of n standard normals
    grows like sqrt(2 ln n), so big jobs feel jitter most), where they pace the step most."""
    n_gpus = nodes * gpus_per_node
    slowdown, slow_gpus = 1.0, 0
    placed: dict[int, float] = {}
    for straggler in stragglers_of(scenario):
        if straggler.device is None:
            if straggler.gpus > n_gpus:
                raise ConfigError(f"stragglers.gpus {straggler.gpus}: the cluster has {n_gpus} GPUs")
            slowdown, slow_gpus = max(slowdown, straggler.slowdown), max(slow_gpus, straggler.gpus)
            continue
        for rank in straggler_ranks(straggler.device, nodes, gpus_per_node):
            placed[rank] = max(placed.get(rank, 1.0), straggler.slowdown)
    if scenario.jitter is not None and scenario.jitter.cv > 0.0 and n_gpus > 1:
        draws = np.random.default_rng(scenario.jitter.seed).standard_normal(n_gpus)
        slowdown *= max(1.0, 1.0 + scenario.jitter.cv * float(draws.max()))
        slow_gpus = max(slow_gpus, 1)
    return Pace(slowdown, slow_gpus, tuple(sorted(placed.items())))


DEFAULT_SCENARIO = ScenarioSpec(
    name="Llama-2-7B, FSDP full shard, 4 x DGX H100 (NDR 400G)",
    topology="dgx-h100",
    nodes=4,
    training=TrainingSpec(model="llama2-7b", seq_len=4096, micro_batch=2, global_batch=256, precision="bf16",
                          activation_checkpointing="selective", strategy=StrategySpec(kind="fsdp")),
)


def scenario_from_data(data: object, source: str) -> ScenarioSpec:
    """Validate scenario YAML data; ConfigError names the field path."""
    try:
        return ScenarioSpec.model_validate(data)
    except ValidationError as exc:
        raise config_error_from(exc, source) from None


def default_strategy(training: TrainingSpec) -> StrategyKind:
    """The data-parallel strategy of a job that names none: its framework's (workloads.frameworks); without
    one, fsdp without tensor or pipeline parallelism (PyTorch FSDP's FULL_SHARD), ddp with them (Megatron-LM's
    default data-parallel optimizer)."""
    if training.framework is not None:
        return default_kind(training.framework)  # type: ignore[return-value]
    return "ddp" if training.parallel.tp > 1 or training.parallel.pp > 1 else "fsdp"


def with_framework(training: TrainingSpec) -> TrainingSpec:
    """`training` with every field it leaves unstated set to its framework's default (workloads.frameworks);
    as it is without a framework. Stated fields stay as they are."""
    if training.framework is None:
        return training
    kind = training.strategy.kind if "kind" in training.strategy.model_fields_set else default_strategy(training)
    stated_fusion = "fused_elementwise" in training.model_fields_set
    job = Job(kind, training.precision, training.parallel.tp, training.parallel.pp, training.parallel.virtual_stages,
              stated_fusion and training.fused_elementwise, stated_fusion and not training.fused_elementwise,
              "cross_entropy" in training.model_fields_set and training.cross_entropy == "eager")
    stated = {"": set(training.model_fields_set), "strategy": set(training.strategy.model_fields_set),
              "parallel": set(training.parallel.model_fields_set)}
    filled = framework_defaults(training.framework, job, stated)
    if "kind" not in stated["strategy"]:
        filled.setdefault("strategy", {})["kind"] = kind
    data = training.model_dump(exclude_unset=True)
    for section in ("strategy", "parallel"):
        if section in filled:
            filled[section] = {**data.get(section, {}), **filled[section]}
    try:
        return TrainingSpec.model_validate({**data, "model": training.model, **filled})
    except ValidationError as exc:
        raise config_error_from(exc, f"training (framework {training.framework})") from None


def complete_training(training: TrainingSpec, model: ModelSpec, topology: TopologySpec) -> TrainingSpec:
    """`training` with every field it leaves unstated filled in (module docstring): its framework's
    defaults (with_framework), seq_len, the strategy's kind, and the global batch of a job without
    accumulation. Stated fields stay as they are."""
    training = with_framework(training)
    filled: dict[str, object] = {}
    if training.seq_len is None:
        filled["seq_len"] = model.training_context
    if "kind" not in training.strategy.model_fields_set:  # a strategy's knobs given, its kind not
        filled["strategy"] = {**training.strategy.model_dump(exclude_unset=True), "kind": default_strategy(training)}
    par = training.parallel
    model_parallel = par.tp * par.pp * par.cp
    n_gpus = topology.nodes * topology.gpus_per_node
    if training.global_batch is None and training.grad_accum is None and n_gpus % model_parallel == 0:
        filled["global_batch"] = training.micro_batch * n_gpus // model_parallel
    if not filled:
        return training
    try:  # validated again: a filled-in strategy must suit the layout as a stated one would
        return TrainingSpec.model_validate({**training.model_dump(exclude_unset=True), "model": training.model,
                                            **filled})
    except ValidationError as exc:
        raise config_error_from(exc, "training") from None


def scenario_specs(scenario: ScenarioSpec) -> tuple[TopologySpec, TrainingSpec, ModelSpec]:
    """Preset names -> specs, with the scenario's node count applied; the training as written."""
    if isinstance(scenario.topology, str):
        topology = load_preset(scenario.topology, nodes=scenario.nodes)
    elif scenario.nodes is None:
        topology = scenario.topology
    else:
        topology = validate_topology_spec({**scenario.topology.model_dump(), "nodes": scenario.nodes}, "scenario")
    model = scenario.training.model
    model_spec = load_model(model) if isinstance(model, str) else model
    return topology, scenario.training, model_spec


def resolve_scenario(scenario: ScenarioSpec) -> tuple[TopologySpec, TrainingSpec, ModelSpec]:
    """Preset names -> specs, with the scenario's node count applied and the training completed
    (complete_training)."""
    topology, training, model = scenario_specs(scenario)
    return topology, complete_training(training, model, topology), model


def scenario_echo(scenario: ScenarioSpec, topology: TopologySpec, training: TrainingSpec,
                  model: ModelSpec, selection: str | None = None) -> dict[str, object]:
    """The scenario as predicted, every field given (presets expanded, defaults filled in): itself a
    valid scenario that predicts the same step. `selection`: the one the prediction ran (StepPrediction
    .nccl_selection: a calibration profile's where the scenario states none), else the scenario's, else 'model'."""
    return {
        "name": scenario.name, "topology": topology.model_dump(mode="json"), "nodes": topology.nodes,
        "training": {**training.model_dump(mode="json"), "model": model.model_dump(mode="json")},
        "stragglers": [straggler.model_dump(mode="json") for straggler in stragglers_of(scenario)] or None,
        "jitter": scenario.jitter and scenario.jitter.model_dump(mode="json"), "nccl_env": dict(scenario.nccl_env),
        "nccl_version": scenario.nccl_version, "nccl_selection": selection or scenario.nccl_selection or "model",
        "run": scenario.run and scenario.run.model_dump(mode="json"),
    }
