"""Plans by deadline (`plan --train-tokens T --deadline-days D`): at each node count, the fastest layout
(simulator.training.search) and its run through failures (simulator.run.summary); the fewest GPUs that
finish by the deadline at P90, and the cheapest (fewest GPU-hours, failures included) that do.

At a given node count the fastest layout is also the cheapest (GPU-hours are GPUs x wall time), so one
layout per count suffices; across counts, more GPUs finish sooner but each failure costs more of them
and the job fails more often, so the cheapest count is found, not assumed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from simulator.collectives.nccl_setup import DEFAULT_NCCL, NcclSetup
from simulator.core.errors import ConfigError
from simulator.run.spec import RunSpec
from simulator.run.summary import RunPrediction, predict_run
from simulator.training.search import RankedLayout, SearchSpace, search_layouts
from topologies.spec import TopologySpec, validate_topology_spec
from workloads.spec import ModelSpec, TrainingSpec


@dataclass(frozen=True)
class DeadlineRow:
    """One node count: its fastest layout and run, or why it has none."""

    nodes: int
    n_gpus: int
    best: RankedLayout | None = None
    run: RunPrediction | None = None
    refused: str | None = None

    def p90_days(self) -> float:
        return self.run.percentile_s(90) / 86400.0 if self.run is not None else float("inf")


def plan_by_deadline(topology: TopologySpec, training: TrainingSpec, model: ModelSpec, space: SearchSpace,
                     run: RunSpec, counts: Sequence[int], keep: int, slack: float, workers: int,
                     on_count: Callable[[int], None] | None = None,
                     nccl: NcclSetup = DEFAULT_NCCL) -> list[DeadlineRow]:
    """A row per node count (ascending), `nccl` running the collectives; a count with no layout that runs keeps
    the reason."""
    rows = []
    for nodes in sorted(set(counts)):
        topo = validate_topology_spec({**topology.model_dump(), "nodes": nodes}, "--node-counts")
        n_gpus = nodes * topo.gpus_per_node
        try:
            best = search_layouts(topo, training, model, space, keep, slack, workers, nccl=nccl).ranked[0]
        except ConfigError as exc:
            rows.append(DeadlineRow(nodes, n_gpus, refused=str(exc)))
        else:
            job = best.layout.training(training)
            rows.append(DeadlineRow(nodes, n_gpus, best, predict_run(run, topo, job, model, best.prediction)))
        if on_count is not None:
            on_count(nodes)
    return rows


def fewest(rows: Sequence[DeadlineRow], deadline_days: float) -> DeadlineRow | None:
    """The row of fewest GPUs finishing by the deadline at P90."""
    return next((r for r in sorted(rows, key=lambda r: r.n_gpus) if r.p90_days() <= deadline_days), None)


def cheapest(rows: Sequence[DeadlineRow], deadline_days: float) -> DeadlineRow | None:
    """Of the rows finishing by the deadline at P90, the one of fewest GPU-hours (failures included)."""
    meeting = [r for r in rows if r.run is not None and r.p90_days() <= deadline_days]
    return min(meeting, key=lambda r: (r.run.gpu_hours if r.run else 0.0, r.n_gpus), default=None)
