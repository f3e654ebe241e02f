"""`clustersim validate`: predict every row of measured nccl-tests logs and report the error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from simulator.cli import topology_args as cluster
from simulator.cli.calibration_args import (
    CALIBRATION_HELP,
    FORCE_HELP,
    load_profile,
    predict_measured,
    warn_of_other_selection,
)
from simulator.cli.common import parse_env, plain, reflowed, table_console
from simulator.cli.measured import STRICT_HELP, load_log, load_measured
from simulator.collectives.busbw import COLLECTIVES
from simulator.collectives.nccl_releases import release_option
from simulator.collectives.select import SELECTION_HELP, selection_option
from simulator.core.errors import ConfigError
from simulator.measurements.load import LoadedLogs
from simulator.validation.accuracy import ErrorSummary, ValidationReport, report_to_json
from simulator.validation.known_gaps import gap_notes

HELP = """Predict every row of every log listed in a manifest (or of one log) and report the error on time.

Error per row is |predicted - measured| / measured (out-of-place time); each log and the whole
set are summarised by median and p90, separately for sizes >= 1 MiB and < 1 MiB. Rows of size 0
are left out. Rows in a known error band of the model (single-node V100/A100 NVLink at 256 KiB -
4 MiB) are counted in a note under the table. An entry that cannot be used (its log missing or unreadable,
not matching its entry, or a cluster the tool cannot build, such as a GPU its table lacks) is skipped
with its reason, on stderr, under the table and in the JSON's `skipped`, and the other logs are
reported (--strict refuses the manifest instead). Each prediction uses only the entry's cluster
description and the published-facts prior, or the parameters a calibration profile fitted for
that hardware (--calibration). The algorithm and protocol of each row are the pair the model
prices fastest (--selection model, the default) or those the log's NCCL release would choose
(--selection nccl: the manifest's `nccl`, else the version the log prints, else the newest;
--nccl-version sets one release for every log); with --calibration the default is the selection
the profile's fit used (nccl unless fitted otherwise).

One log needs no manifest: --log names it and the cluster it ran on comes from --topology and
--nodes, or from the manifest's fields as flags (--gpu, --gpus-per-node, --intra-node, --nodes,
--transport, --nics-per-node, --nic-gbps); --op says which collective it ran when the log does not,
--env the NCCL environment it ran with, --run which run of a file that holds several.

Example:

  clustersim validate --manifest logs/manifest.yaml

  clustersim validate --log all_reduce_perf.txt --topology dgx-h100 --nodes 2

  clustersim validate --log out.txt --op all_gather --gpu H100-SXM5-80GB --gpus-per-node 8
      --intra-node nvswitch-nvlink4 --nodes 2 --transport roce --nics-per-node 8 --nic-gbps 400

  clustersim validate --manifest manifest.yaml --json > accuracy.json

  clustersim validate --manifest manifest.yaml --calibration profile.yaml

  clustersim validate --manifest manifest.yaml --selection nccl --nccl-version 2.18
"""


NCCL_VERSION_HELP_VALIDATE = ("NCCL release of every log: the algorithms it offers, and with --selection nccl "
                              "the tuner that chooses the algorithm and protocol "
                              "(e.g. 2.18); default: each log's own (manifest `nccl`, the log's "
                              "'NCCL version' line), else the newest.")


def register(app: typer.Typer) -> None:
    """Add the `validate` command to the app."""
    app.command("validate", help=reflowed(HELP))(validate)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _summary_cells(s: ErrorSummary) -> list[str]:
    return [_pct(s.median_abs_pct_error), _pct(s.p90_abs_pct_error)]


def _one_log(log: Path, topology: str | None, nodes: int | None, flags: cluster.ClusterFlags, op: str | None,
             env: str | None, run: int | None) -> LoadedLogs:
    """--log: the log on the cluster its options describe (see HELP)."""
    if topology is None and flags.gpu is None:
        raise ConfigError("--log needs the cluster the log ran on: --topology PRESET (and --nodes), or the manifest's "
                          "fields as flags (--gpu, --gpus-per-node, --intra-node, --nodes, --transport, ...)")
    return load_log(log, flags.resolve(topology or "", nodes), op, parse_env(env), run)


def validate(
    manifest: Annotated[Path | None, typer.Option(
        help="Manifest YAML listing the logs and their clusters (or --log for one log).")] = None,
    calibration: Annotated[Path | None, typer.Option(help=CALIBRATION_HELP)] = None,
    force_calibration: Annotated[bool, typer.Option(help=FORCE_HELP)] = False,
    nccl_version: Annotated[str | None, typer.Option(help=NCCL_VERSION_HELP_VALIDATE)] = None,
    selection: Annotated[str | None, typer.Option(help=SELECTION_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    strict: Annotated[bool, typer.Option(help=STRICT_HELP)] = False,
    log: Annotated[Path | None, typer.Option(
        help="One nccl-tests log (text or -J JSON) to compare, without a manifest; its cluster from --topology "
        "and --nodes or the cluster flags.")] = None,
    topology: Annotated[str | None, typer.Option(help="With --log: the cluster's preset name or topology YAML.")
                        ] = None,
    nodes: Annotated[int | None, typer.Option(help="With --log: nodes the log ran on (default: the preset's).")
                     ] = None,
    op: Annotated[str | None, typer.Option(help="With --log: the collective it ran, where the log does not say "
                                           f"({', '.join(COLLECTIVES)}, or as nccl-tests names its tools).")] = None,
    env: Annotated[str | None, typer.Option(help="With --log: the NCCL environment it ran with, e.g. "
                                            "'NCCL_ALGO=ring NCCL_NVLS_ENABLE=0'.")] = None,
    run: Annotated[int | None, typer.Option(help="With --log: which run of a file holding several (from 1).")
                   ] = None,
    gpu: cluster.GpuOpt = None,
    gpus_per_node: cluster.GpusPerNodeOpt = None,
    intra_node: cluster.IntraNodeOpt = None,
    transport: cluster.TransportOpt = None,
    nics_per_node: cluster.NicsPerNodeOpt = None,
    nic_gbps: cluster.NicGbpsOpt = None,
    host_cpu: cluster.HostCpuOpt = None,
) -> None:
    flags = cluster.ClusterFlags(gpu, gpus_per_node, intra_node, transport, nics_per_node, nic_gbps, host_cpu)
    release = release_option(nccl_version)
    chosen = None if selection is None else selection_option(selection)
    profile = load_profile(calibration)
    warn_of_other_selection(profile, chosen, "--selection")
    if log is not None:
        if manifest is not None:
            raise ConfigError("give --manifest or --log, not both")
        loaded = _one_log(log, topology, nodes, flags, op, env, run)
    elif manifest is not None:
        given = {"--topology": topology, "--nodes": nodes, "--op": op, "--env": env, "--run": run}
        stray = [name for name, value in given.items() if value is not None] + flags.given()
        if stray:
            raise ConfigError(f"{', '.join(stray)}: with --manifest each entry states its cluster; these go with "
                              "--log")
        loaded = load_measured(manifest, strict=strict)
    else:
        raise ConfigError("give --manifest (logs listed with their clusters) or --log (one log and the cluster it "
                          "ran on)")
    measured = loaded.logs
    reports = [predict_measured(m, profile, force_calibration, release, chosen) for m in measured]
    report = ValidationReport(tuple(reports), loaded.skipped)
    if as_json:
        typer.echo(json.dumps(report_to_json(report), indent=2))
        return
    which = f"calibrated with {calibration}" if calibration else "uncalibrated"
    table = Table(title=plain(f"Prediction error on time, |pred - meas| / meas ({which})"))
    for col in ("log", "op", "rows", ">=1MiB median", ">=1MiB p90", "<1MiB median", "<1MiB p90"):
        table.add_column(col, justify="left" if col in ("log", "op") else "right")
    for log_report in reports:
        table.add_row(plain(log_report.file), log_report.collective, str(log_report.overall.points),
                      *_summary_cells(log_report.large), *_summary_cells(log_report.small))
    table.add_section()
    table.add_row("ALL", "", str(report.overall.points), *_summary_cells(report.large),
                  *_summary_cells(report.small))
    console = table_console(160)
    console.print(table)
    for note in gap_notes(list(zip(measured, reports, strict=True))):
        console.print(f"note: {note}", highlight=False, soft_wrap=True)
    for skipped in loaded.skipped:
        console.print(f"skipped: {skipped.reason}", highlight=False, soft_wrap=True)
