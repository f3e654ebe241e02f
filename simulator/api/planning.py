"""`plan`: the fastest layouts (TP, PP, CP, DP, EP, micro-batch, strategy, recomputation) of a scenario's
job on its cluster, searched and simulated as `clustersim plan` does (simulator.training.search)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, get_args

from simulator.api.results import Result, records
from simulator.api.scenario import Scenario, ScenarioLike, as_scenario
from simulator.core.errors import ConfigError
from simulator.report.json_out import layout_json
from simulator.scenario import ScenarioSpec, nccl_setup
from simulator.training.search import DEFAULT_KEEP, DEFAULT_SLACK, RankedLayout, SearchSpace, describe, search_layouts
from topologies.spec import TopologySpec
from workloads.spec import Checkpointing, ModelSpec, StrategyKind, TrainingSpec, checkpointing_of


@dataclass(frozen=True)
class PlannedLayout:
    """One ranked layout (a layout of `clustersim plan --json`), its `description` ('TP8 PP4 DP4, micro-batch
    1, zero1, recompute full, SP') and, as `scenario`, the job run with it (to predict or change further)."""

    rank: int
    tp: int
    pp: int
    cp: int
    dp: int
    ep: int
    micro_batch: int
    micro_steps: int
    strategy: str
    recompute: str
    sequence_parallel: bool
    pipeline_schedule: str
    virtual_stages: int
    pipeline_split: str
    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    tflops_per_gpu: float
    mfu: float
    memory_per_gpu_bytes: float
    fits_in_memory: bool
    estimated_step_time_s: float
    description: str
    exposed_comm_by_collective_s: dict[str, float]  # waits of the critical GPU by kind (tp_comm, cp_comm, ep_comm, ...)
    _scenario: Scenario = field(repr=False, compare=False)

    @property
    def scenario(self) -> Scenario:
        """The scenario's job run with this layout."""
        return self._scenario


@dataclass(frozen=True)
class Plan(Result):
    """The ranked `layouts` (fastest first, all fit in memory) and the search's counts, as `clustersim plan
    --json`: enumerated, ruled out by the scenario's settings, fitting in memory, estimated within the slack
    of the best, simulated, and those the simulator refused (`refused`: layout and reason)."""

    FIGURE = "plan_figure"

    model: str
    topology: str | None
    nodes: int
    n_gpus: int
    global_batch: int
    seq_len: int
    enumerated: int
    ruled_out: int
    fit_in_memory: int
    within_slack: int
    simulated: int
    refused: tuple[dict[str, str], ...]
    search_s: float
    layouts: tuple[PlannedLayout, ...]

    def to_dict(self) -> dict[str, Any]:
        return {**{key: value for key, value in super().to_dict().items() if key != "layouts"},
                "refused": [dict(r) for r in self.refused], "layouts": self.to_records()}

    def to_records(self) -> list[dict[str, Any]]:
        """One dict a layout, best first."""
        return records(self.layouts)

    @property
    def best(self) -> PlannedLayout:
        return self.layouts[0]


def _choices(values: Iterable[str], name: str, allowed: tuple[str, ...]) -> tuple[Any, ...]:
    chosen = tuple(values)
    bad = [value for value in chosen if value not in allowed]
    if bad or not chosen:
        raise ConfigError(f"plan {name}: {', '.join(map(str, bad)) or 'nothing given'} not among {', '.join(allowed)}")
    return chosen


def _ints(values: Iterable[int] | None, name: str) -> tuple[int, ...] | None:
    if values is None:
        return None
    chosen = tuple(values)
    if not chosen or min(chosen) < 1:
        raise ConfigError(f"plan {name}: expected integers >= 1, got {list(chosen)}")
    return chosen


def _layout_scenario(spec: ScenarioSpec, topology: TopologySpec, training: TrainingSpec, model: ModelSpec,
                     description: str) -> Scenario:
    job = TrainingSpec.model_validate({**training.model_dump(), "model": model})
    return Scenario.from_dict({**dict(spec), "name": description, "topology": topology, "nodes": topology.nodes,
                               "training": job})


def plan(scenario: ScenarioLike | None = None, *, tp: Iterable[int] | None = None, pp: Iterable[int] | None = None,
         cp: Iterable[int] = (1,), ep: Iterable[int] | None = None, micro_batches: Iterable[int] = (1, 2, 4, 8),
         strategies: Iterable[str] = ("ddp", "zero1", "fsdp"),
         recompute: Iterable[str] = ("none", "selective", "full"), sequence_parallel: Iterable[bool] = (True,),
         interleaved: bool = False, keep: int = DEFAULT_KEEP, slack: float = DEFAULT_SLACK,
         workers: int | None = None, top: int | None = None) -> Plan:
    """Rank the layouts of the scenario's job (its model, global batch, sequence, precision, strategy knobs,
    placement) on its cluster, as `clustersim plan`: TP, PP, CP and EP sizes to try (None: every valid one;
    CP 1 unless given), micro-batch sizes, strategies (sharded ones only with PP 1), recomputation,
    sequence parallelism with TP > 1 (True, False or both) and the interleaved schedule. A closed-form
    estimate keeps at most `keep` layouts within `slack` x the best; each is simulated, in up to `workers`
    processes for long searches (default: the CPU count). `top`: layouts returned (default: every one that
    fits). ConfigError when none can run."""
    scenario = as_scenario(scenario)
    if top is not None and top < 1:
        raise ConfigError(f"plan top must be >= 1, got {top}")
    workers = workers if workers is not None else os.cpu_count() or 1
    if workers < 1:
        raise ConfigError(f"plan workers must be >= 1, got {workers}")
    space = SearchSpace(
        tp=_ints(tp, "tp"), pp=_ints(pp, "pp"), micro_batches=_ints(micro_batches, "micro_batches") or (),
        strategies=_choices(strategies, "strategies", get_args(StrategyKind)),
        recompute=_choices((str(checkpointing_of(value)) for value in recompute), "recompute",
                           get_args(Checkpointing)),
        sequence_parallel=tuple(sequence_parallel), interleaved=interleaved, cp=_ints(cp, "cp") or (1,),
        ep=_ints(ep, "ep"))
    spec, topology, training, model = scenario._resolved
    par = training.parallel
    global_batch = training.global_batch or training.micro_batch * (training.grad_accum or 1) * (
        topology.nodes * topology.gpus_per_node // (par.tp * par.pp * par.cp))
    base = TrainingSpec.model_validate({**training.model_dump(), "grad_accum": None, "global_batch": global_batch})
    start = time.perf_counter()
    result = search_layouts(topology, base, model, space, keep, slack, workers, nccl=nccl_setup(spec))
    seconds = time.perf_counter() - start
    ranked: list[RankedLayout] = list(result.ranked[:top] if top is not None else result.ranked)
    layouts = tuple(
        PlannedLayout(**layout_json(rank, r), description=describe(r.layout),
                      exposed_comm_by_collective_s=dict(r.prediction.comm_by_collective_s),
                      _scenario=_layout_scenario(spec, topology, r.layout.training(base), model, describe(r.layout)))
        for rank, r in enumerate(ranked, start=1))
    return Plan(model.name, topology.name, topology.nodes, topology.nodes * topology.gpus_per_node, global_batch,
                base.seq_len or model.training_context, result.enumerated, result.ruled_out, result.fit_in_memory,
                result.promising, result.predicted,
                tuple({"layout": describe(lay), "error": error} for lay, error in result.failed), seconds, layouts)
