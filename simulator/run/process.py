"""The run as a SimPy process: train an interval, save, repeat; a failure throws away the work since
the last durable checkpoint, the job restarts and resumes from it.

One process per run: each interval and each save is a timeout raced against the next failure (a
timeout of the next draw's gap, in up-time: the failure clock starts when training resumes). Hot spares
are a Container of nodes: a GPU, node or NIC failure takes one (waiting when none is free) and the failed
node goes back after repair. This is the reference model; simulator.run.montecarlo computes the same
runs vectorised (it must agree run for run: tests/run/test_montecarlo.py).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import simpy

from simulator.run.montecarlo import PER_RUN_FIELDS, RunSamples, run_draws, schedule
from simulator.run.params import SPARE_CLASSES, RunParams


def _repair(env: simpy.Environment, pool: simpy.Container, repair_s: float) -> Generator[Any, Any, None]:
    yield env.timeout(repair_s)
    yield pool.put(1)


def _job(env: simpy.Environment, p: RunParams, seed: int, run: int, out: dict[str, Any]) -> Generator[Any, Any, None]:
    draws = run_draws(p, seed, run)
    classes = list(p.rates_per_s)
    segments, last_s = schedule(p)
    pool = simpy.Container(env, init=p.hot_spares) if p.hot_spares else None
    done = 0
    while True:
        gap, kind = draws.next()
        failure = env.timeout(gap)
        n, start, failed = 0, env.now, False
        while done + n < segments and not failed:
            start = env.now
            last = done + n == segments - 1
            for span, is_save in ((last_s if last else p.interval_s, False), (0.0 if last else p.save_block_s, True)):
                if span <= 0.0:
                    continue
                outcome = yield env.timeout(span) | failure
                if failure in outcome:
                    failed = True
                    break
                if is_save:
                    out["checkpoint_s"] += span
            n += 0 if failed else 1
        if not failed:
            return
        r = env.now - start
        rolled = n >= 1 and r < p.persist_s  # the last checkpoint was still being written
        out["lost_work_s"] += r + (p.interval_s if rolled else 0.0)
        done += n - int(rolled)
        out["interruptions"] += 1
        out["by_class"][classes[kind]] += 1
        if p.hot_spares is not None and classes[kind] in SPARE_CLASSES:
            before = env.now
            if pool is None:  # no spares: wait for the failed node itself
                yield env.timeout(p.repair_s)
            else:
                env.process(_repair(env, pool, p.repair_s))
                yield pool.get(1)
            out["spare_wait_s"] += env.now - before
        yield env.timeout(p.restart_s)
        out["restart_s"] += p.restart_s


def simulate_process(p: RunParams, runs: int, seed: int = 0) -> RunSamples:
    """`runs` runs of `seed`, each its own SimPy environment."""
    rows = []
    for run in range(runs):
        env = simpy.Environment()
        out: dict[str, Any] = {"checkpoint_s": 0.0, "lost_work_s": 0.0, "restart_s": 0.0, "spare_wait_s": 0.0,
                               "interruptions": 0, "by_class": dict.fromkeys(p.rates_per_s, 0)}
        env.run(until=env.process(_job(env, p, seed, run, out)))
        rows.append((env.now, out))
    return RunSamples(wall_s=np.array([wall for wall, _ in rows]),
                      **{key: np.array([o[key] for _, o in rows]) for key in PER_RUN_FIELDS if key != "wall_s"},
                      by_class={k: np.array([o["by_class"][k] for _, o in rows]) for k in p.rates_per_s})
