"""A scenario: which cluster, which training job. The top-level spec of `clustersim predict`.

`resolve_scenario` turns names into specs (a topology preset, a model preset) and applies the
command line's overrides; only the CLI reads scenario files.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from simulator.core.errors import ConfigError, config_error_from
from topologies.presets import load_preset
from topologies.spec import MAX_NODES, TopologySpec, validate_topology_spec
from workloads.presets import load_model
from workloads.spec import ModelSpec, StrategySpec, TrainingSpec

MAX_SLOWDOWN = 1000.0  # a GPU a thousand times slower is a failed one; the bound keeps step times finite


class StragglerSpec(BaseModel):
    """Slow GPUs: their compute takes `slowdown` times as long (thermal throttling, a bad HBM stack)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    slowdown: float = Field(ge=1.0, le=MAX_SLOWDOWN, allow_inf_nan=False,
                            description="Compute time factor of the slow GPUs (1.2 = 20% slower), at most "
                            f"{MAX_SLOWDOWN:g}.")
    gpus: int = Field(
        strict=True, default=1, ge=1, description="How many GPUs are slow (one is enough to pace a step).")


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
    topology: str | TopologySpec = Field(description="Topology preset name, or the topology inline.")
    nodes: int | None = Field(
        strict=True, default=None, ge=1, le=MAX_NODES, description="Nodes (servers); default: the topology's.")
    training: TrainingSpec = Field(description="The training job.")
    stragglers: StragglerSpec | None = Field(default=None, description="Slow GPUs, if any.")
    jitter: JitterSpec | None = Field(default=None, description="Per-step compute noise across GPUs.")
    nccl_env: dict[str, str] = Field(
        default_factory=dict, description="NCCL environment for every collective, e.g. NCCL_NVLS_ENABLE: '0', "
        "NCCL_COLLNET_ENABLE: '0', NCCL_ALGO: Ring, NCCL_PROTO: Simple.")


def pace_slowdown(scenario: ScenarioSpec, n_gpus: int) -> float:
    """How much slower than nominal the slowest GPU computes: a synchronous step runs at its pace.
    A straggler's factor, times the jitter the slowest of `n_gpus` draws (seeded; the expected
    maximum of n standard normals grows like sqrt(2 ln n), so big jobs feel jitter most)."""
    if scenario.stragglers and scenario.stragglers.gpus > n_gpus:
        raise ConfigError(f"stragglers.gpus {scenario.stragglers.gpus}: the cluster has {n_gpus} GPUs")
    slowdown = scenario.stragglers.slowdown if scenario.stragglers else 1.0
    if scenario.jitter is not None and scenario.jitter.cv > 0.0 and n_gpus > 1:
        draws = np.random.default_rng(scenario.jitter.seed).standard_normal(n_gpus)
        slowdown *= max(1.0, 1.0 + scenario.jitter.cv * float(draws.max()))
    return slowdown


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


def resolve_scenario(scenario: ScenarioSpec) -> tuple[TopologySpec, TrainingSpec, ModelSpec]:
    """Preset names -> specs, with the scenario's node count applied."""
    if isinstance(scenario.topology, str):
        topology = load_preset(scenario.topology, nodes=scenario.nodes)
    elif scenario.nodes is None:
        topology = scenario.topology
    else:
        topology = validate_topology_spec({**scenario.topology.model_dump(), "nodes": scenario.nodes}, "scenario")
    model = scenario.training.model
    model_spec = load_model(model) if isinstance(model, str) else model
    return topology, scenario.training, model_spec
