"""`clustersim sweep`: run a sweep file's scenarios and append their results to a CSV or Parquet file.

A running sweep holds a lock on its output (output_lock), stops cleanly on the first SIGINT or SIGTERM
and at once on a second, and refuses to start a sweep larger than --max-scenarios without --yes. A stopped
sweep, its rows written and its lock released, leaves without the interpreter's shutdown: at exit
concurrent.futures joins the process pool's manager thread, which can wait forever on a worker that was
terminated while sending its result (CPython 3.11; seen as a stopped sweep that never exits).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from simulator.cli.common import check_writable, printable, read_yaml, reflowed
from simulator.cli.output_lock import OutputLock
from simulator.cli.sweep_results import CsvResults, ParquetResults, results_file
from simulator.core.errors import ConfigError
from simulator.sweep import (
    Scenario,
    SweepSpec,
    SweepSummary,
    axis_paths,
    columns,
    count_points,
    evaluate,
    iter_scenarios,
    point_at,
    resolve_point,
    run_sweep,
    sweep_from_data,
)
from simulator.sweep.run import check_scheduler_address
from simulator.sweep.spec import check_axis_paths

HELP = """Run a sweep: every scenario of SWEEP.yaml (a base scenario and axes to vary), one row each.

Rows are appended to the output as scenarios finish: scenario_hash, the axis values, step_time_s,
tokens_per_s, tokens_per_s_per_gpu, tflops_per_gpu, mfu, gpu_idle_fraction, exposed_comm_s,
memory_per_gpu_bytes, fits_in_memory, calibration_id, clustersim_version and error (a failed
scenario is recorded with its error; it does not stop the others). Run it again on the same output
to resume: scenarios whose hash is already there are skipped. In a CSV, text that a spreadsheet would
read as a formula (beginning with =, +, -, @, a tab or a carriage return) gets a leading single quote.

Ctrl-C (or SIGTERM) stops the sweep within seconds: the scenarios not started are dropped, the
workers stopped, the rows finished kept (exit code 130, 143 for SIGTERM); a second one ends it at
once. One sweep writes an output at a time: another one on the same file is refused (exit code 2)
while OUTPUT.lock names its writer. A sweep of more than --max-scenarios scenarios (10,000 unless
given) states its size and an estimated time and stops there unless --yes is given.

Axes are dotted field paths of the scenario (nodes, topology, training.model, training.micro_batch,
training.strategy.kind, training.strategy.bucket_bytes, ...) or of the topology, applied to the
preset as overrides (inter_node.transport, inter_node.nic_gbps, gpus_per_node, ...).

Examples:

  clustersim sweep examples/sweep-small.yaml -o results.csv

  clustersim sweep examples/sweep-capacity.yaml -o capacity.parquet --workers 16

  clustersim sweep examples/sweep-capacity.yaml -o capacity.csv --scheduler tcp://10.0.0.5:8786
"""

LARGE_SWEEP = 10_000  # scenarios: above this a sweep says how long it will take before it starts
ESTIMATE_SAMPLES = 3  # scenarios timed for the estimate: the first, the middle and the last
ESTIMATE_BUDGET_S = 2.0  # sampling stops once it has taken this long
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def register(app: typer.Typer) -> None:
    """Add `sweep` to the app."""
    app.command("sweep", help=reflowed(HELP))(sweep)


class SweepStopped(KeyboardInterrupt):
    """A stop signal (SIGINT, SIGTERM) reached a running sweep; it exits with 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _leave(console: Console, signum: int) -> NoReturn:
    """End a stopped sweep with 128 + the signal's number, as `aborted` on a SIGINT, skipping the interpreter's
    shutdown (module docstring); its rows are closed and its lock released by now."""
    if signum == signal.SIGINT:
        console.print("aborted", highlight=False, markup=False)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + signum)


def _exit_now(signum: int, frame: FrameType | None) -> None:
    """A second stop signal: kill the workers and leave without cleaning up (a stale lock is taken over)."""
    for child in multiprocessing.active_children():
        child.kill()
    if sys.stderr.isatty():  # the progress bar hid the cursor: show it again, on a line of its own
        os.write(sys.stderr.fileno(), b"\x1b[?25h\n")
    os._exit(128 + signum)


def _stop(signum: int, frame: FrameType | None) -> None:
    for each in STOP_SIGNALS:
        signal.signal(each, _exit_now)
    raise SweepStopped(signum)


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """While inside: the first SIGINT or SIGTERM raises SweepStopped where the sweep is (it stops its
    workers and keeps its rows), a second one ends the process at once."""
    previous = {each: signal.signal(each, _stop) for each in STOP_SIGNALS}
    try:
        yield
    finally:
        for each, handler in previous.items():
            signal.signal(each, handler)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _estimate(spec: SweepSpec, count: int, workers: int, where: str) -> str:
    """The sweep's size and an estimate of its time: up to ESTIMATE_SAMPLES of its scenarios (first,
    middle, last) resolved and predicted here, their mean time x scenarios / workers."""
    spent, timed = 0.0, 0
    for index in sorted({0, count // 2, count - 1})[:ESTIMATE_SAMPLES]:
        start = time.perf_counter()
        evaluate(resolve_point(spec, point_at(spec, index)))
        spent, timed = spent + time.perf_counter() - start, timed + 1
        if spent > ESTIMATE_BUDGET_S:
            break
    per_scenario = spent / timed
    return (f"{count:,} scenarios, about {_duration(per_scenario * count / workers)} on {where} "
            f"({per_scenario:.2f} s a scenario, timed on {timed} of them)")


def sweep(
    sweep_file: Annotated[Path, typer.Argument(metavar="SWEEP.yaml", help="Sweep YAML: base, axes, mode.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Results file: .csv, or .parquet (needs pyarrow).")],
    workers: Annotated[int, typer.Option(help="Local worker processes (default: the CPU count).")] = 0,
    scheduler: Annotated[str | None, typer.Option(
        help="Dask scheduler address (tcp://HOST:PORT): run there instead of locally.")] = None,
    max_scenarios: Annotated[int, typer.Option(
        help="Refuse a sweep of more scenarios than this unless --yes is given.")] = LARGE_SWEEP,
    yes: Annotated[bool, typer.Option("--yes", help="Run a sweep larger than --max-scenarios.")] = False,
) -> None:
    if output.suffix not in (".csv", ".parquet"):
        raise ConfigError(f"-o {output}: the results file must end in .csv or .parquet")
    if workers < 0:
        raise ConfigError(f"--workers must be >= 1 (0: the CPU count), got {workers}")
    if max_scenarios < 1:
        raise ConfigError(f"--max-scenarios must be >= 1, got {max_scenarios}")
    if scheduler is not None:
        check_scheduler_address(scheduler)
    spec = sweep_from_data(read_yaml(sweep_file, "sweep"), str(sweep_file))
    check_axis_paths(spec)
    count = count_points(spec)
    workers = workers or os.cpu_count() or 1
    console = Console(stderr=True)
    results: CsvResults | ParquetResults | None = None
    with _stop_on_signals():
        try:
            if count > min(max_scenarios, LARGE_SWEEP):
                size = _estimate(spec, count, workers,
                                 f"{workers} workers" if scheduler is None else "one Dask worker thread")
                if count > max_scenarios and not yes:
                    raise ConfigError(f"{printable(sweep_file)}: {size}; that is more than --max-scenarios "
                                      f"{max_scenarios:,}: add --yes to run it, or narrow its axes")
                console.print(f"{printable(sweep_file)}: {size}", highlight=False, markup=False, soft_wrap=True)
            check_writable(output, "results")
            with OutputLock(output, "sweep"):
                results = results_file(output, columns(axis_paths(spec)))
                summary, stale = _run(spec, count, results, workers, scheduler, console)
        except SweepStopped as stop:
            written = results.written if results is not None else 0
            console.print(f"stopped by {signal.Signals(stop.signum).name}: {written} row(s) of this run written to "
                          f"{printable(output)}; run the same command again to resume",
                          highlight=False, markup=False, soft_wrap=True)
            _leave(console, stop.signum)
    if stale:  # their scenarios now resolve differently: the new rows were added beside them
        console.print(f"warning: {stale} row(s) in {printable(output)} match none of this sweep's scenarios (the "
                      "sweep file or clustersim changed since they were written); they are kept, and the scenarios "
                      "they stood for were run again beside them", highlight=False, markup=False, soft_wrap=True)
    Console().print(f"{summary.done} done ({summary.failed} failed), {summary.skipped} skipped (already in "
                    f"{printable(output)}), {summary.seconds:.1f} s, {summary.scenarios_per_s:.1f} scenarios/s",
                    highlight=False, markup=False, soft_wrap=True)


def _run(spec: SweepSpec, count: int, results: CsvResults | ParquetResults, workers: int, scheduler: str | None,
         console: Console) -> tuple[SweepSummary, int]:
    """Run the sweep into `results` (its lock held): the summary, and how many rows of the output match
    none of the sweep's scenarios."""
    hashes: set[str] = set()

    def scenarios() -> Iterator[Scenario]:
        for scenario in iter_scenarios(spec):
            hashes.add(scenario.scenario_hash)
            yield scenario

    shown = (TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
             TimeRemainingColumn())
    try:
        with Progress(*shown, console=console, transient=False) as progress:
            task = progress.add_task("sweep", total=count)

            def record(row: dict[str, Any]) -> None:
                results.write(row)
                progress.advance(task)

            summary = run_sweep(scenarios(), workers=workers, scheduler=scheduler, done=results.done,
                                on_result=record, on_skip=lambda _: progress.advance(task))
            progress.update(task, total=summary.done + summary.skipped)  # identical points ran once
    finally:
        results.close()
    return summary, len(results.done - hashes)
