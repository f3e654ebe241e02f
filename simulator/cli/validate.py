"""`clustersim validate`: predict every row of measured nccl-tests logs and report the error."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from simulator.cli.common import read_text
from simulator.core.errors import ClusterSimError, ConfigError
from simulator.measurements.manifest import log_path, parse_manifest
from simulator.measurements.nccl_tests import parse_log
from simulator.validation.accuracy import ErrorSummary, ValidationReport, report_to_json
from simulator.validation.run import validate_log

HELP = """Predict every row of every log listed in a manifest and report the error on time.

Error per row is |predicted - measured| / measured (out-of-place time); each log and the whole
set are summarised by median and p90, separately for sizes >= 1 MiB and < 1 MiB. Rows of size 0
are left out. Each prediction uses only the entry's cluster description (uncalibrated prior).

Example:

  clustersim validate --manifest ../shared/data/nccl-tests/manifest.yaml

  clustersim validate --manifest manifest.yaml --json > accuracy.json
"""


def register(app: typer.Typer) -> None:
    """Add the `validate` command to the app."""
    app.command("validate", help=HELP)(validate)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _summary_cells(s: ErrorSummary) -> list[str]:
    return [_pct(s.median_abs_pct_error), _pct(s.p90_abs_pct_error)]


def validate(
    manifest: Annotated[Path, typer.Option(help="Manifest YAML listing the logs and their clusters.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    parsed = parse_manifest(read_text(manifest, "manifest"), str(manifest), manifest.resolve().parent)
    err = Console(stderr=True)
    for warning in parsed.warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    reports = []
    for entry in parsed.entries:
        path = log_path(parsed, entry)
        log = parse_log(read_text(path, f"log of manifest entry {entry.file!r}"), str(path), entry.format)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                reports.append(validate_log(entry, log))
            except ClusterSimError as exc:
                raise ConfigError(f"{manifest}: entry {entry.file}: {exc}") from None
        for record in caught:
            err.print(f"[yellow]warning:[/] {record.message}", highlight=False, soft_wrap=True)
    report = ValidationReport(tuple(reports))
    if as_json:
        typer.echo(json.dumps(report_to_json(report), indent=2))
        return
    table = Table(title="Prediction error on time, |pred - meas| / meas (uncalibrated)")
    for col in ("log", "op", "rows", ">=1MiB median", ">=1MiB p90", "<1MiB median", "<1MiB p90"):
        table.add_column(col, justify="left" if col in ("log", "op") else "right")
    for log_report in reports:
        table.add_row(log_report.file, log_report.collective, str(log_report.overall.points),
                      *_summary_cells(log_report.large), *_summary_cells(log_report.small))
    table.add_section()
    table.add_row("ALL", "", str(report.overall.points), *_summary_cells(report.large),
                  *_summary_cells(report.small))
    Console(width=160).print(table)
