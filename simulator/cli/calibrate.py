"""`clustersim calibrate` and `clustersim crossval`: fit the model to measured NCCL runs, honestly."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from simulator.calibration.crossval import GROUP_BY, crossval, crossval_to_json, splits
from simulator.calibration.fit import (
    FIT_SELECTION,
    FitOptions,
    fit_hardware,
    free_parameters,
    group_by_hardware,
    with_selection,
)
from simulator.calibration.profile import CalibrationProfile, HardwareCalibration, profile_to_dict
from simulator.cli.common import check_writable, reflowed, table_console, write_text
from simulator.cli.measured import STRICT_HELP, load_measured
from simulator.collectives.select import selection_option
from simulator.core.errors import ConfigError
from simulator.validation.accuracy import ErrorSummary

CALIBRATE_HELP = """Fit the collective model's parameters to measured nccl-tests logs.

For each hardware (GPU, intra-node fabric, network transport) among the manifest's logs, fits the
intra-node and network efficiencies, the latency scales, the transport latency floor and the
chunk handshake cost by robust least squares on log time (soft-L1, bounds that keep every value
physical, a ridge towards the published prior), each row priced with the algorithm and protocol the
log's NCCL release's tuner chooses for it, which is what ran (--selection nccl, the default). Only
parameters the data identify are fitted: each one's sensitivity (rms change of predicted time for a
10% change) is shown, and one below 0.5% stays at its prior (so do the network hop latencies unless
the multi-node logs span two node counts); a value that lands on a bound is flagged. Single-node logs
of the same GPU
and fabric pin the intra-node parameters. Prints fitted values against priors and in-sample error, and
writes a profile (YAML) that `collective`, `validate`, `predict`, `scale` and `compare` accept with
--calibration; they price collectives as the fit did unless they state a selection. Nothing is written unless
every fit succeeds.

Examples:

  clustersim calibrate --manifest logs/manifest.yaml -o all.yaml

  clustersim calibrate --manifest manifest.yaml --only a100x8-1node-8gpu-allreduce-abci-hdr.txt
      --only a100x8-2node-allreduce-abci-hdr.txt -o abci-a100.yaml
"""

FIT_SELECTION_HELP = ("Whose choice of algorithm and protocol the fit prices each measured row with: 'nccl' (the "
                      "pair the log's NCCL release's tuner ranks first, which is what ran; default) or 'model' (the "
                      "pair the cost model prices fastest). The profile records it, and predictions with the profile "
                      "take it unless they state a selection.")

CROSSVAL_HELP = """Fit on some logs of a cluster and report the error on the others.

--group-by cluster: leave one log out within each cluster (same hardware, NCCL version and libfabric FI_* settings);
--group-by nodes: fit on logs of at most --train-max-nodes nodes, predict the larger runs;
--group-by size: fit on every other size, predict the rest (and swap).
Prints uncalibrated (prior) and calibrated error side by side for every held-out log, both with the
selection the fits use (--selection; default nccl, as `calibrate`).

Example:

  clustersim crossval --manifest logs/manifest.yaml --group-by nodes
"""


def register(app: typer.Typer) -> None:
    """Add the `calibrate` and `crossval` commands to the app."""
    app.command("calibrate", help=reflowed(CALIBRATE_HELP))(calibrate)
    app.command("crossval", help=reflowed(CROSSVAL_HELP))(crossval_command)


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=True)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _clustersim_version() -> str:
    try:
        return version("clustersim")
    except PackageNotFoundError:
        return "unknown"


def _section_table(section: HardwareCalibration) -> Table:
    chooser = "NCCL's tuner's" if section.selection == "nccl" else "the model's"
    table = Table(title=f"{section.hardware.label()} (rows priced with {chooser} choice)", title_justify="left")
    for col in ("parameter", "prior", "fitted", "bounds", "sensitivity"):
        table.add_column(col, justify="left" if col == "parameter" else "right")
    for p in section.params:
        fitted = f"{p.value:.3g}" if p.fitted else "(not identified)"
        bound = f" (at {p.at_bound} bound)" if p.at_bound else ""
        table.add_row(p.name, f"{p.prior:.3g}", fitted + bound, f"[{p.lower:g}, {p.upper:g}]",
                      _pct(p.sensitivity_pct))
    for r in section.residuals:
        table.add_row(f"  {r.file}", _pct(r.median_abs_pct_error_prior), _pct(r.median_abs_pct_error_fitted),
                      f"{r.rows} rows", "")
    return table


def calibrate(
    manifest: Annotated[Path, typer.Option(help="Manifest YAML listing the logs and their clusters.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Profile YAML to write.")],
    only: Annotated[list[str] | None, typer.Option(help="Fit on these manifest files only (repeatable).")] = None,
    max_nfev: Annotated[int, typer.Option(help="Model evaluations per fit, at most (x parameters).")] = 40,
    selection: Annotated[str, typer.Option(help=FIT_SELECTION_HELP)] = FIT_SELECTION,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the fitted profile as JSON (the YAML's fields and the file written).")] = False,
    strict: Annotated[bool, typer.Option(help=STRICT_HELP)] = False,
) -> None:
    if max_nfev < 1:
        raise ConfigError(f"--max-nfev must be >= 1, got {max_nfev}")
    if output.exists() and output.resolve() == manifest.resolve():
        raise ConfigError(f"-o {output}: that is the manifest; write the profile to another file")
    chosen = selection_option(selection)
    check_writable(output, "profile")
    groups = group_by_hardware(with_selection(load_measured(manifest, only, strict).logs, chosen))
    options = FitOptions(max_nfev=max_nfev)
    sections = []
    with _progress() as progress:
        budget = sum((len(free_parameters(logs)) + 1) * (max_nfev + 1) for logs in groups.values())
        task = progress.add_task("fitting", total=budget)
        for hardware, logs in groups.items():
            progress.update(task, description=f"fitting {hardware.label()}")
            sections.append(fit_hardware(hardware, logs, options, lambda: progress.advance(task)))
    profile = CalibrationProfile(_clustersim_version(), datetime.now(UTC).isoformat(timespec="seconds"),
                                 tuple(sections))
    write_text(output, yaml.safe_dump(profile_to_dict(profile), sort_keys=False), "profile")
    if as_json:
        typer.echo(json.dumps({"written": str(output), **profile_to_dict(profile)}, indent=2))
        return
    console = table_console(100)
    for section in sections:
        console.print(_section_table(section))
    console.print(f"wrote {output} ({len(sections)} hardware section(s))")


def _row(name: str, prior: ErrorSummary, cal: ErrorSummary) -> list[str]:
    return [name, _pct(prior.median_abs_pct_error), _pct(cal.median_abs_pct_error)]


def crossval_command(
    manifest: Annotated[Path, typer.Option(help="Manifest YAML listing the logs and their clusters.")],
    group_by: Annotated[str, typer.Option(help=f"How to split: {', '.join(GROUP_BY)}.")] = "cluster",
    train_max_nodes: Annotated[int, typer.Option(help="With --group-by nodes: fit on runs up to this size.")] = 2,
    only: Annotated[list[str] | None, typer.Option(help="Use these manifest files only (repeatable).")] = None,
    max_nfev: Annotated[int, typer.Option(help="Model evaluations per fit, at most (x parameters).")] = 40,
    selection: Annotated[str, typer.Option(help=FIT_SELECTION_HELP)] = FIT_SELECTION,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    strict: Annotated[bool, typer.Option(help=STRICT_HELP)] = False,
) -> None:
    if group_by not in GROUP_BY:
        raise ConfigError(f"--group-by: {group_by!r} is not one of {', '.join(GROUP_BY)}")
    if max_nfev < 1:
        raise ConfigError(f"--max-nfev must be >= 1, got {max_nfev}")
    chosen = selection_option(selection)
    logs = with_selection(load_measured(manifest, only, strict).logs, chosen)
    plan = splits(logs, group_by, train_max_nodes)
    if not plan:
        raise ConfigError(f"--group-by {group_by}: no cluster has logs to fit on and logs to predict")
    options = FitOptions(max_nfev=max_nfev)
    with _progress() as progress:
        budget = sum((len(free_parameters(train)) + 1) * (max_nfev + 1) for _, _, train, _ in plan)
        task = progress.add_task(f"cross-validating by {group_by}", total=budget)
        report = crossval(logs, group_by, train_max_nodes, options, lambda: progress.advance(task))
    if as_json:
        typer.echo(json.dumps(crossval_to_json(report), indent=2))
        return
    table = Table(title=f"Cross-validation by {group_by}: median |error| on held-out rows, prior vs calibrated")
    for col in ("held out", "split", ">=1MiB prior", ">=1MiB calibrated", "<1MiB prior", "<1MiB calibrated"):
        table.add_column(col, justify="left" if col in ("held out", "split") else "right")
    for h in report.held_out:
        big, small = _row("", h.prior.large, h.calibrated.large), _row("", h.prior.small, h.calibrated.small)
        table.add_row(h.prior.file, h.split, big[1], big[2], small[1], small[2])
    table.add_section()
    big = _row("", report.prior.large, report.calibrated.large)
    small = _row("", report.prior.small, report.calibrated.small)
    table.add_row("ALL", "", big[1], big[2], small[1], small[2])
    table_console(170).print(table)
