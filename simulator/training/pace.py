"""How fast each of a job's GPUs computes, and what the others do while the slowest computes.

A synchronous step runs at its slowest GPU's pace: every collective of every group waits for its
slowest member, and the groups are chained through one another (a data-parallel group waits for the
tensor-parallel groups of its members, and so on), so one slow GPU paces the whole step, wherever it
is. With pipeline parallelism a slow GPU slows its own stage: the stage's representative GPU is the
straggler (its tensor- and data-parallel groups wait for it), the other stages feel it through the
pipeline. An unplaced straggler (no device given) and the slowest GPU of per-GPU jitter are taken
where they pace the step most: every stage's representative.

The others wait: a GPU that computes at nominal pace is idle for the step minus its own compute, so
the job's idle time is the average over its GPUs of each one's idle time, not the critical GPU's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Pace:
    """Compute-time factors of the job's GPUs (1 = nominal). `slowdown`: the slowest GPU wherever it
    paces the step most (`slow_gpus` GPUs at that factor: unplaced stragglers, the slowest draw of
    jitter); `slow_ranks`: GPUs placed by global rank, each with its factor."""

    slowdown: float = 1.0
    slow_gpus: int = 0
    slow_ranks: tuple[tuple[int, float], ...] = ()

    def stage_slowdown(self, pp: int, stage_of_rank: dict[int, int]) -> dict[int, float]:
        """Each pipeline stage's factor from the placed slow GPUs (the slowest of a stage paces it);
        with one stage, {} (the whole step takes `slowest` instead, see `global_slowdown`)."""
        if pp == 1:
            return {}
        stages: dict[int, float] = {}
        for rank, factor in self.slow_ranks:
            stage = stage_of_rank[rank]
            stages[stage] = max(stages.get(stage, 1.0), factor)
        return stages

    def global_slowdown(self, pp: int) -> float:
        """The factor on every GPU's compute: the unplaced slowdown, and with one stage the slowest placed GPU."""
        placed = max((factor for _, factor in self.slow_ranks), default=1.0) if pp == 1 else 1.0
        return max(self.slowdown, placed)


NOMINAL = Pace()


@dataclass(frozen=True)
class IdleClass:
    """GPUs that compute alike: `gpus` of them, `compute_s` each per step."""

    name: str
    gpus: int
    compute_s: float


def pace_classes(pace: Pace, n_gpus: int, nominal_compute_s: float,
                 labels: Iterable[tuple[str, int]] = ()) -> tuple[IdleClass, ...]:
    """The job's GPUs by compute pace: the slow ones by factor (placed and unplaced), and the others at
    `nominal_compute_s`; `labels` (name, GPUs) splits the nominal GPUs further (the GPUs of servers a
    fault touches: their compute, hence their idle time, is the others')."""
    by_factor: dict[float, int] = {}
    for _, factor in pace.slow_ranks:
        if factor > 1.0:
            by_factor[factor] = by_factor.get(factor, 0) + 1
    if pace.slowdown > 1.0 and pace.slow_gpus:
        by_factor[pace.slowdown] = by_factor.get(pace.slowdown, 0) + pace.slow_gpus
    classes = [IdleClass(f"slow (x{factor:g})", gpus, nominal_compute_s * factor)
               for factor, gpus in sorted(by_factor.items(), reverse=True)]
    others = n_gpus - sum(by_factor.values())
    if not classes:
        for name, gpus in labels:
            classes.append(IdleClass(name, gpus, nominal_compute_s))
            others -= gpus
    if others > 0:
        classes.append(IdleClass("others" if classes else "all", others, nominal_compute_s))
    return tuple(classes)
