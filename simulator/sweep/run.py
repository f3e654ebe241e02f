"""Running a sweep: each scenario's step prediction, in a local process pool or on a Dask cluster.

Results stream back as they finish, one flat row per scenario. A scenario that fails (a
ClusterSimError, or any other exception) becomes a row with its `error`; it never stops the rest.
The simulator is deterministic, so the same scenario gives the same numbers on any worker.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from simulator.core.errors import ClusterSimError, ConfigError
from simulator.sweep.spec import Scenario
from simulator.training.predict import predict_step

try:  # optional: `pip install 'clustersim[dask]'` for --scheduler
    import distributed
except ImportError:  # pragma: no cover - exercised only without the extra
    distributed = None  # type: ignore[assignment, unused-ignore]

METRICS = ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "gpu_idle_fraction",
           "exposed_comm_s", "memory_per_gpu_bytes", "fits_in_memory")
SCHEDULER_CONNECT_TIMEOUT_S = 10


def clustersim_version() -> str:
    """The installed clustersim version (written in every row, for provenance)."""
    try:
        return version("clustersim")
    except PackageNotFoundError:  # a source checkout that was never installed
        return "unknown"


def columns(axis_paths: Iterable[str]) -> list[str]:
    """Result columns: the hash, the axis values, the metrics, then provenance and the error."""
    return ["scenario_hash", *axis_paths, *METRICS, "calibration_id", "clustersim_version", "error"]


def _cell(value: Any) -> Any:
    """Scalars as they are; an inline value (a model spec mapping) as canonical JSON text; anything else YAML
    reads (a date) as its text."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _row(scenario: Scenario, metrics: dict[str, Any], error: str | None) -> dict[str, Any]:
    return {"scenario_hash": scenario.scenario_hash, **{path: _cell(v) for path, v in scenario.axes.items()},
            **{name: metrics.get(name) for name in METRICS}, "calibration_id": None,
            "clustersim_version": clustersim_version(), "error": error}


def evaluate(scenario: Scenario) -> dict[str, Any]:
    """Predict one scenario's training step; the row of results (or of its error)."""
    if scenario.error is not None or scenario.topology is None or scenario.training is None \
            or scenario.model is None:
        return _row(scenario, {}, scenario.error or "scenario not resolved")
    try:
        p = predict_step(scenario.topology, scenario.training, scenario.model,
                         pace=scenario.pace, env=dict(scenario.nccl_env))
    except ClusterSimError as exc:
        return _row(scenario, {}, str(exc))
    except Exception as exc:  # a bug in one scenario must not stop the sweep; recorded with its type
        return _row(scenario, {}, f"{type(exc).__name__}: {exc}")
    return _row(scenario, {name: getattr(p, name) for name in METRICS}, None)


@dataclass(frozen=True)
class SweepSummary:
    """What a run did: scenarios evaluated (and of those, failed), skipped as already done, wall time."""

    done: int
    failed: int
    skipped: int
    seconds: float

    @property
    def scenarios_per_s(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0


def _local(todo: Sequence[Scenario], workers: int) -> Iterator[dict[str, Any]]:
    # spawn, not fork: the parent may run threads (the progress bar, a Dask client)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = [pool.submit(evaluate, s) for s in todo]
        for future in as_completed(futures):
            yield future.result()  # evaluate catches everything: only a dead worker raises, ending the run


def check_scheduler_address(address: str) -> None:
    """ConfigError unless `address` reads as a Dask scheduler address (tcp://HOST:PORT)."""
    if distributed is None:
        raise ConfigError("--scheduler needs Dask: pip install 'clustersim[dask]' (or 'dask[distributed]')")
    try:
        scheme, location = distributed.comm.parse_address(address, strict=True)
        host, port = distributed.comm.parse_host_port(location)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"--scheduler {address!r}: not a scheduler address like tcp://HOST:8786 ({exc})") from None
    if scheme not in ("tcp", "tls", "ws", "wss", "ucx") or not host or not port:
        raise ConfigError(f"--scheduler {address!r}: expected tcp://HOST:PORT")


def _dask(todo: Sequence[Scenario], scheduler: str) -> Iterator[dict[str, Any]]:
    check_scheduler_address(scheduler)
    try:
        client = distributed.Client(scheduler, timeout=SCHEDULER_CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise ConfigError(f"--scheduler {scheduler}: cannot connect ({type(exc).__name__}: {exc})") from None
    with client:
        futures = client.map(evaluate, todo, pure=False)
        for future in distributed.as_completed(futures):
            yield future.result()  # only a lost worker or cluster raises: the run stops, resume continues it


def run_sweep(scenarios: Sequence[Scenario], *, workers: int, scheduler: str | None, done: set[str],
              on_result: Callable[[dict[str, Any]], None]) -> SweepSummary:
    """Evaluate every scenario whose hash is not in `done`, calling `on_result(row)` as each finishes
    (in completion order). `scheduler` (tcp://HOST:PORT) runs them on that Dask cluster; otherwise
    a local process pool of `workers` processes.

    Workers are spawned (not forked: the caller may run threads), so they import the caller's
    main module: a script calling this needs the `if __name__ == "__main__":` guard. A dead worker
    or a lost cluster raises (rows already delivered stay delivered; a rerun resumes)."""
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    todo = [s for s in scenarios if s.scenario_hash not in done]
    start = time.perf_counter()
    failed = 0
    results = _dask(todo, scheduler) if scheduler is not None else _local(todo, workers) if todo else iter(())
    for row in results:
        failed += row["error"] is not None
        on_result(row)
    return SweepSummary(len(todo), failed, len(scenarios) - len(todo), time.perf_counter() - start)
