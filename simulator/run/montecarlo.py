"""The run model over many seeds at once (numpy), the production path of `predict` and `plan`.

The job is renewal-structured: after each restart it resumes from a durable checkpoint and runs a
fixed schedule (interval_s of training, then a blocking save, ..., the last interval without a save)
until its next failure, an exponential draw in up-time (failures strike while training or saving,
not while restarting). So each failure is one vectorised step over all runs: how many intervals and
saves the draw covers, what it throws away (the time since the last checkpoint; with async saves, also
the interval before when the failure lands while that checkpoint is still being written), then the
restart (and, with hot spares, the wait for a free node). simulator.run.process is the same model as a
SimPy process, step by step; the two agree run for run on the same seeds (tests/run).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simulator.run.draws import RunDraws, cumulative_shares, draw_block
from simulator.run.params import SPARE_CLASSES, RunParams


@dataclass(frozen=True)
class RunSamples:
    """Per run (arrays of length runs): wall time and where it went, and the interruptions by class."""

    wall_s: np.ndarray
    checkpoint_s: np.ndarray  # blocking saves
    lost_work_s: np.ndarray  # training (and partial saves) thrown away by failures
    restart_s: np.ndarray
    spare_wait_s: np.ndarray  # waiting for a repaired node when no hot spare was free
    interruptions: np.ndarray
    by_class: dict[str, np.ndarray]  # interruptions per failure class


PER_RUN_FIELDS = ("wall_s", "checkpoint_s", "lost_work_s", "restart_s", "spare_wait_s", "interruptions")


def schedule(p: RunParams) -> tuple[int, float]:
    """(intervals in the job, training seconds of the last one)."""
    segments = max(1, math.ceil(p.work_s / p.interval_s - 1e-9))
    return segments, p.work_s - (segments - 1) * p.interval_s


def simulate_runs(p: RunParams, runs: int, seed: int = 0, first_run: int = 0) -> RunSamples:
    """Runs first_run .. first_run + runs - 1 of `seed` (each run's draws depend only on seed and its index)."""
    classes = list(p.rates_per_s)
    cumulative = cumulative_shares([p.rates_per_s[k] for k in classes])
    spare_class = np.array([k in SPARE_CLASSES for k in classes] or [False])
    rngs = [np.random.default_rng([seed, first_run + i]) for i in range(runs)]
    blocks = [draw_block(rng, p.rate_per_s, cumulative) for rng in rngs]
    gaps, kinds = np.stack([b[0] for b in blocks]), np.stack([b[1] for b in blocks])
    segments, last_s = schedule(p)
    cycle_s = p.interval_s + p.save_block_s
    done = np.zeros(runs, dtype=int)  # durable checkpoints
    wall, ckpt, lost, restart, wait = (np.zeros(runs) for _ in range(5))
    count = np.zeros(runs, dtype=int)
    by_class = np.zeros((runs, len(cumulative)), dtype=int)
    spares = p.hot_spares
    pool = np.zeros((runs, spares or 0))  # when each spare node is free
    active = np.ones(runs, dtype=bool)
    i = 0
    while active.any():
        if i == gaps.shape[1]:  # every run draws its next block, as its RunDraws would
            more = [draw_block(rng, p.rate_per_s, cumulative) for rng in rngs]
            gaps = np.hstack([gaps, np.stack([b[0] for b in more])])
            kinds = np.hstack([kinds, np.stack([b[1] for b in more])])
        x, kind = gaps[:, i], kinds[:, i]
        left = segments - 1 - done
        finish = (left * p.interval_s + last_s) + left * p.save_block_s
        ends = active & (x >= finish)
        wall[ends] += finish[ends]
        ckpt[ends] += left[ends] * p.save_block_s
        fails = active & ~ends
        n = np.minimum(np.floor(np.where(fails, x, 0.0) / cycle_s).astype(int), left)
        r = np.where(fails, x - n * cycle_s, 0.0)
        rolled = fails & (n >= 1) & (r < p.persist_s)
        wall[fails] += x[fails]
        ckpt[fails] += n[fails] * p.save_block_s
        lost[fails] += r[fails] + np.where(rolled, p.interval_s, 0.0)[fails]
        done[fails] += (n - rolled)[fails]
        count[fails] += 1
        by_class[fails, kind[fails]] += 1
        if spares is not None:
            takes = fails & spare_class[kind]
            back = wall + p.repair_s  # the failed node returns as a spare
            if spares:
                slot = pool.argmin(axis=1)
                earliest = pool[np.arange(runs), slot]
                from_pool = takes & (earliest <= back)
                free = np.where(from_pool, earliest, back)
                pool[from_pool, slot[from_pool]] = back[from_pool]
            else:
                free = back
            waited = np.where(takes, np.maximum(0.0, free - wall), 0.0)
            wait += waited
            wall += waited
        restart[fails] += p.restart_s
        wall[fails] += p.restart_s
        active = fails
        i += 1
    return RunSamples(wall, ckpt, lost, restart, wait, count,
                      {k: by_class[:, j] for j, k in enumerate(classes)})


def simulate(p: RunParams, runs: int, seed: int = 0, batch: int = 100,
             on_batch: Callable[[int], None] | None = None) -> RunSamples:
    """`runs` runs in batches of `batch` (`on_batch(n)` after each: a progress bar), joined."""
    parts = []
    for first in range(0, runs, batch):
        parts.append(simulate_runs(p, min(batch, runs - first), seed, first))
        if on_batch is not None:
            on_batch(len(parts[-1].wall_s))
    joined = {f: np.concatenate([getattr(s, f) for s in parts]) for f in PER_RUN_FIELDS}
    return RunSamples(**joined, by_class={k: np.concatenate([s.by_class[k] for s in parts]) for k in parts[0].by_class})


def run_draws(p: RunParams, seed: int, run: int) -> RunDraws:
    """The draws of one run, for the SimPy process."""
    return RunDraws(seed, run, p.rate_per_s, cumulative_shares(list(p.rates_per_s.values())))
