"""The results file of a sweep: CSV (rows appended and flushed one by one) or Parquet (rewritten whole
every few hundred rows), each knowing the scenario hashes already in it (resume skips them).

CSV cells are written so that a spreadsheet shows them as text, never runs them: a text cell
beginning with =, +, -, @, a tab or a carriage return gets a leading single quote (OWASP, "CSV
Injection": https://owasp.org/www-community/attacks/CSV_Injection); numbers, negative ones
included, are written as they are.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import time
from pathlib import Path
from typing import Any

from simulator.cli.common import check_writable
from simulator.core.errors import ConfigError

try:  # optional: Parquet output
    import pyarrow
    import pyarrow.parquet
except ImportError:  # pragma: no cover - depends on the environment
    pyarrow = None  # type: ignore[assignment, unused-ignore]

PARQUET_FLUSH_ROWS = 500
PARQUET_FLUSH_S = 10.0
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads as the start of a formula
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def csv_cell(value: Any) -> Any:
    """`value` as a CSV cell no spreadsheet evaluates: text that could start a formula gets a leading single
    quote (see module docstring); anything else is returned as it is."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not NUMBER.fullmatch(value):
        return "'" + value
    return value


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
        self.written = 0  # rows this run
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
            self.writer.writerow({name: csv_cell(value) for name, value in row.items()})
            self.handle.flush()
            self.written += 1
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
        self.written = 0  # rows this run (written to the file at the next flush)

    def write(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self.pending += 1
        self.written += 1
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


def results_file(path: Path, fields: list[str]) -> CsvResults | ParquetResults:
    if path.suffix == ".csv":
        return CsvResults(path, fields)
    if path.suffix == ".parquet":
        return ParquetResults(path, fields)
    raise ConfigError(f"-o {path}: the results file must end in .csv or .parquet")
