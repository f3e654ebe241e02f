"""Running a sweep: each scenario's step prediction, in a local process pool or on a Dask cluster.

Results stream back as they finish, one flat row per scenario. A scenario that fails (a
ClusterSimError, or any other exception) becomes a row with its `error`; it never stops the rest.
The simulator is deterministic, so the same scenario gives the same numbers on any worker.
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.process
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from simulator.core.errors import ClusterSimError, ConfigError
from simulator.sweep.spec import Scenario
from simulator.training.predict import predict_step

METRICS = ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "gpu_idle_fraction",
           "exposed_comm_s", "memory_per_gpu_bytes", "fits_in_memory")
SCHEDULER_CONNECT_TIMEOUT_S = 10
CLIENT_CLOSE_TIMEOUT_S = 3  # a stopped sweep leaves within seconds even when the scheduler does not answer


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
                         pace=scenario.pace, nccl=scenario.nccl)
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


WINDOW_PER_WORKER = 2  # scenarios handed out per worker at a time: enough to keep it busy, few to cancel
STOP_GRACE_S = 1.0  # a worker told to terminate (SIGTERM) that is still there after this is killed
ORPHAN_POLL_S = 1.0  # how often a worker checks that the sweep that started it still runs


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(ORPHAN_POLL_S)
    os._exit(1)  # the sweep is gone (killed outright): a worker must not outlive it


def _worker_init(parent_pid: int) -> None:
    """A pool worker leaves Ctrl-C to the sweep (the terminal sends it to the whole foreground group: the
    sweep stops its workers itself), and exits when the sweep is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()


def _windowed(scenarios: Iterable[Scenario], window: int, submit: Callable[[Scenario], Any],
              wait_first: Callable[[set[Any]], tuple[set[Any], set[Any]]]) -> Iterator[dict[str, Any]]:
    """Rows as scenarios finish, with at most `window` submitted and unfinished: scenarios are resolved
    and handed out as workers free up, so the first rows come at once and a stop has little to cancel."""
    pending: set[Any] = set()
    for scenario in scenarios:
        if len(pending) >= window:
            finished, pending = wait_first(pending)
            yield from (future.result() for future in finished)
        pending.add(submit(scenario))
    while pending:
        finished, pending = wait_first(pending)
        yield from (future.result() for future in finished)


def _stop(pool: ProcessPoolExecutor, workers: list[multiprocessing.process.BaseProcess]) -> None:
    """Stop at once: drop the scenarios not started, terminate the workers (those that do not go are killed)."""
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        worker.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            worker.kill()
            worker.join()


def _local(todo: Iterable[Scenario], workers: int) -> Iterator[dict[str, Any]]:
    # spawn, not fork: the parent may run threads (the progress bar, a Dask client)
    context = multiprocessing.get_context("spawn")
    others = set(multiprocessing.active_children())
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_worker_init,
                               initargs=(os.getpid(),))
    completed = False
    try:
        # evaluate catches everything: only a dead worker raises, ending the run
        yield from _windowed(todo, WINDOW_PER_WORKER * workers, lambda s: pool.submit(evaluate, s), _wait_first)
        completed = True
    finally:  # an interruption (Ctrl-C, SIGTERM, a failed write) stops the workers now, not after the queue
        if completed:
            pool.shutdown()
        else:
            _stop(pool, [p for p in multiprocessing.active_children() if p not in others])


def _wait_first(pending: set[Future[dict[str, Any]]]) -> tuple[set[Any], set[Any]]:
    finished, waiting = wait(pending, return_when=FIRST_COMPLETED)
    return set(finished), set(waiting)


def _distributed() -> Any:
    """Dask's `distributed`, optional (`pip install 'clustersim[dask]'` for --scheduler) and slow to import
    (~0.4 s): imported when a sweep asks for a scheduler."""
    try:
        import distributed
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ConfigError("--scheduler needs Dask: pip install 'clustersim[dask]' (or 'dask[distributed]')") from None
    return distributed


def check_scheduler_address(address: str) -> None:
    """ConfigError unless `address` reads as a Dask scheduler address (tcp://HOST:PORT)."""
    distributed = _distributed()
    try:
        scheme, location = distributed.comm.parse_address(address, strict=True)
        host, port = distributed.comm.parse_host_port(location)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"--scheduler {address!r}: not a scheduler address like tcp://HOST:8786 ({exc})") from None
    if scheme not in ("tcp", "tls", "ws", "wss", "ucx") or not host or not port:
        raise ConfigError(f"--scheduler {address!r}: expected tcp://HOST:PORT")


def _dask(todo: Iterable[Scenario], scheduler: str) -> Iterator[dict[str, Any]]:
    check_scheduler_address(scheduler)
    distributed = _distributed()
    try:
        client = distributed.Client(scheduler, timeout=SCHEDULER_CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise ConfigError(f"--scheduler {scheduler}: cannot connect ({type(exc).__name__}: {exc})") from None
    submitted: set[Any] = set()

    def submit(scenario: Scenario) -> Any:
        future = client.submit(evaluate, scenario, pure=False)
        submitted.add(future)
        return future

    def wait_first(pending: set[Any]) -> tuple[set[Any], set[Any]]:
        finished, waiting = distributed.wait(pending, return_when="FIRST_COMPLETED")
        submitted.difference_update(finished)
        return set(finished), set(waiting)

    window = WINDOW_PER_WORKER * max(1, sum(client.nthreads().values()))
    try:
        # only a lost worker or cluster raises: the run stops, resume continues it
        yield from _windowed(todo, window, submit, wait_first)
    finally:  # on an interruption the cluster drops what this sweep still has queued or running
        if submitted:
            client.cancel(list(submitted), force=True)
        client.close(timeout=CLIENT_CLOSE_TIMEOUT_S)


def run_sweep(scenarios: Iterable[Scenario], *, workers: int, scheduler: str | None, done: set[str],
              on_result: Callable[[dict[str, Any]], None],
              on_skip: Callable[[Scenario], None] | None = None) -> SweepSummary:
    """Evaluate every scenario whose hash is not in `done`, calling `on_result(row)` as each finishes
    (in completion order) and `on_skip(scenario)` for each one skipped. `scheduler` (tcp://HOST:PORT)
    runs them on that Dask cluster; otherwise a local process pool of `workers` processes. The
    scenarios are taken from `scenarios` (an iterator is fine: iter_scenarios) as workers free up.

    Workers are spawned (not forked: the caller may run threads), so they import the caller's
    main module: a script calling this needs the `if __name__ == "__main__":` guard. A dead worker
    or a lost cluster raises (rows already delivered stay delivered; a rerun resumes). Any exception
    raised meanwhile (KeyboardInterrupt, one from `on_result`) stops the run at once: the scenarios
    not started are dropped and the local workers terminated before it propagates."""
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    counts = {"todo": 0, "skipped": 0, "failed": 0}

    def todo() -> Iterator[Scenario]:
        for scenario in scenarios:
            if scenario.scenario_hash in done:
                counts["skipped"] += 1
                if on_skip is not None:
                    on_skip(scenario)
            else:
                counts["todo"] += 1
                yield scenario

    start = time.perf_counter()
    results = _dask(todo(), scheduler) if scheduler is not None else _local(todo(), workers)
    for row in results:
        counts["failed"] += row["error"] is not None
        on_result(row)
    return SweepSummary(counts["todo"], counts["failed"], counts["skipped"], time.perf_counter() - start)
