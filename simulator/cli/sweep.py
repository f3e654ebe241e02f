"""`clustersim sweep`: run a sweep file's scenarios and append their results to a CSV or Parquet file."""

from __future__ import annotations

import contextlib
import csv
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from simulator.cli.common import check_writable, printable, read_yaml, reflowed
from simulator.core.errors import ConfigError
from simulator.sweep import columns, expand, run_sweep, sweep_from_data
from simulator.sweep.run import check_scheduler_address

try:  # optional: Parquet output
    import pyarrow
    import pyarrow.parquet
except ImportError:  # pragma: no cover - depends on the environment
    pyarrow = None  # type: ignore[assignment, unused-ignore]

HELP = """Run a sweep: every scenario of SWEEP.yaml (a base scenario and axes to vary), one row each.

Rows are appended to the output as scenarios finish: scenario_hash, the axis values, step_time_s,
tokens_per_s, tokens_per_s_per_gpu, tflops_per_gpu, mfu, gpu_idle_fraction, exposed_comm_s,
memory_per_gpu_bytes, fits_in_memory, calibration_id, clustersim_version and error (a failed
scenario is recorded with its error; it does not stop the others). Run it again on the same output
to resume: scenarios whose hash is already there are skipped.

Axes are dotted field paths of the scenario (nodes, topology, training.model, training.micro_batch,
training.strategy.kind, training.strategy.bucket_bytes, ...) or of the topology, applied to the
preset as overrides (inter_node.transport, inter_node.nic_gbps, gpus_per_node, ...).

Examples:

  clustersim sweep examples/sweep-small.yaml -o results.csv

  clustersim sweep examples/sweep-capacity.yaml -o capacity.parquet --workers 16

  clustersim sweep examples/sweep-capacity.yaml -o capacity.csv --scheduler tcp://10.0.0.5:8786
"""

PARQUET_FLUSH_ROWS = 500
PARQUET_FLUSH_S = 10.0


def register(app: typer.Typer) -> None:
    """Add `sweep` to the app."""
    app.command("sweep", help=reflowed(HELP))(sweep)


class CsvResults:
    """A CSV results file: the hashes already in it, and rows appended (flushed) one by one."""

    def __init__(self, path: Path, fields: list[str]) -> None:
        self.path, self.fields, self.done = path, fields, set[str]()
        check_writable(path, "results")
        self.header_written = False
        if path.exists() and path.stat().st_size > 0:
            try:
                data = path.read_bytes()
                text = data.decode()
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{path}: cannot read the existing results ({exc}); write to another file") from None
            reader = csv.DictReader(text.splitlines())
            header = list(reader.fieldnames or [])
            if header != fields:  # checked before anything is cut: the file may be someone else's
                raise ConfigError(f"{path}: its columns ({', '.join(header)}) are not this sweep's "
                                  f"({', '.join(fields)}); write to another file")
            if not data.endswith(b"\n"):  # an interrupted run may leave half a row: cut back to the last line
                path.write_bytes(data[: data.rfind(b"\n") + 1])
                reader = csv.DictReader(text[: text.rfind("\n") + 1].splitlines())
            self.done = {row["scenario_hash"] for row in reader if row.get("scenario_hash")}
            self.header_written = True
        self.handle: Any = None  # opened with the first row, so a run that fails first leaves no file
        self.writer: Any = None

    def write(self, row: dict[str, Any]) -> None:
        if self.handle is None:
            try:
                self.handle = self.path.open("a", newline="")
            except OSError as exc:
                raise ConfigError(f"cannot write results {self.path}: {exc.strerror}") from None
            self.writer = csv.DictWriter(self.handle, fieldnames=self.fields)
        try:
            if not self.header_written:
                self.writer.writeheader()
                self.header_written = True
            self.writer.writerow(row)
            self.handle.flush()
        except OSError as exc:  # a full disk: the rows flushed before stay, and a rerun resumes after them
            raise ConfigError(f"cannot write results {self.path}: {exc.strerror}") from None

    def close(self) -> None:
        if self.handle is not None:
            # what could not be written was reported by write(); a rerun cuts a partial row
            with contextlib.suppress(OSError):
                self.handle.close()


class ParquetResults:
    """A Parquet results file, rewritten (atomically) every few hundred rows or seconds and at the end."""

    def __init__(self, path: Path, fields: list[str]) -> None:
        if pyarrow is None:
            raise ConfigError(f"{path}: Parquet output needs pyarrow (pip install pyarrow), or write to a .csv")
        self.path, self.fields, self.rows = path, fields, list[dict[str, Any]]()
        check_writable(path, "results")  # before the sweep runs, not when its first rows are written
        if path.exists():
            try:
                table = pyarrow.parquet.read_table(path)
            except (OSError, pyarrow.ArrowException) as exc:
                raise ConfigError(f"{path}: cannot read the existing results: {exc}") from None
            if table.column_names != fields:
                raise ConfigError(f"{path}: its columns ({', '.join(table.column_names)}) are not this sweep's "
                                  f"({', '.join(fields)}); write to another file")
            self.rows = table.to_pylist()
        self.done = {str(row["scenario_hash"]) for row in self.rows}
        self.pending, self.flushed_at = 0, time.monotonic()

    def write(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self.pending += 1
        if self.pending >= PARQUET_FLUSH_ROWS or time.monotonic() - self.flushed_at > PARQUET_FLUSH_S:
            self._flush()

    def _flush(self) -> None:
        table = pyarrow.Table.from_pylist(self.rows).select(self.fields)
        partial = self.path.with_name(self.path.name + ".partial")
        try:
            pyarrow.parquet.write_table(table, partial)
            os.replace(partial, self.path)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise ConfigError(f"cannot write results {self.path}: {exc.strerror}") from None
        self.pending, self.flushed_at = 0, time.monotonic()

    def close(self) -> None:
        if self.pending or not self.path.exists():
            self._flush()


def _results(path: Path, fields: list[str]) -> CsvResults | ParquetResults:
    if path.suffix == ".csv":
        return CsvResults(path, fields)
    if path.suffix == ".parquet":
        return ParquetResults(path, fields)
    raise ConfigError(f"-o {path}: the results file must end in .csv or .parquet")


def sweep(
    sweep_file: Annotated[Path, typer.Argument(metavar="SWEEP.yaml", help="Sweep YAML: base, axes, mode.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Results file: .csv, or .parquet (needs pyarrow).")],
    workers: Annotated[int, typer.Option(help="Local worker processes (default: the CPU count).")] = 0,
    scheduler: Annotated[str | None, typer.Option(
        help="Dask scheduler address (tcp://HOST:PORT): run there instead of locally.")] = None,
) -> None:
    if output.suffix not in (".csv", ".parquet"):
        raise ConfigError(f"-o {output}: the results file must end in .csv or .parquet")
    if workers < 0:
        raise ConfigError(f"--workers must be >= 1 (0: the CPU count), got {workers}")
    if scheduler is not None:
        check_scheduler_address(scheduler)
    spec = sweep_from_data(read_yaml(sweep_file, "sweep"), str(sweep_file))
    scenarios = expand(spec)
    axis_paths = dict.fromkeys(path for s in scenarios for path in s.axes)
    results = _results(output, columns(axis_paths))
    todo = sum(s.scenario_hash not in results.done for s in scenarios)
    console = Console(stderr=True)
    stale = len(results.done - {s.scenario_hash for s in scenarios})
    if stale:  # their scenarios now resolve differently: the new rows are added beside them
        console.print(f"warning: {stale} row(s) in {printable(output)} match none of this sweep's scenarios (the "
                      "sweep file or clustersim changed since they were written); they are kept, and the scenarios "
                      "they stood for are run again beside them", highlight=False, markup=False)
    columns_shown = (TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                     TextColumn("eta"), TimeRemainingColumn())
    try:
        with Progress(*columns_shown, console=console, transient=False) as progress:
            task = progress.add_task("sweep", total=todo)

            def record(row: dict[str, Any]) -> None:
                results.write(row)
                progress.advance(task)

            summary = run_sweep(scenarios, workers=workers or os.cpu_count() or 1, scheduler=scheduler,
                                done=results.done, on_result=record)
    finally:
        results.close()
    Console().print(f"{summary.done} done ({summary.failed} failed), {summary.skipped} skipped (already in "
                    f"{printable(output)}), {summary.seconds:.1f} s, {summary.scenarios_per_s:.1f} scenarios/s",
                    highlight=False, markup=False)
