"""`clustersim compare`: predict several scenarios and show what changes, relative to the first."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Column, Table

from simulator.cli.calibration_args import CALIBRATION_HELP, FORCE_HELP
from simulator.cli.common import check_writable, plain, reflowed, table_console, write_text
from simulator.cli.fault_args import LinkFaultOpt, StragglerOpt, with_link_faults, with_stragglers
from simulator.cli.job_args import job_options, load_scenario, override
from simulator.cli.predict import _run, prediction_json
from simulator.core.errors import CalibrationError, ConfigError
from simulator.report.differences import differences, resolved_view
from simulator.run.summary import RunPrediction, predict_run
from simulator.scenario import nccl_setup, pace_of, scenario_echo
from simulator.training.prediction import StepPrediction

HELP = """Compare scenarios: predict each and print the differences that matter, relative to the first.

A what-if is a diff of two YAML files: copy a scenario, change the network, the node count, the
strategy, a bucket size, add a straggler (`stragglers: {slowdown: 1.2}`), and compare.
--link-fault and --straggler add the same fault to every scenario; --calibration predicts every
scenario with the profile (an error for a scenario of other hardware, unless --force-calibration).

Examples:

  clustersim compare base.yaml roce.yaml more-nodes.yaml

  clustersim compare base.yaml straggler.yaml --json

  clustersim compare base.yaml roce.yaml --report what-if.html

  clustersim compare base.yaml roce.yaml --link-fault s5/nic3=0.25

  clustersim compare base.yaml nccl-2.18.yaml --calibration profile.yaml
"""

GIB = 1024**3
ROWS: tuple[tuple[str, Callable[[StepPrediction], float], str], ...] = (
    ("step time", lambda p: p.step_time_s, "{:.3f} s"),
    ("tokens/s", lambda p: p.tokens_per_s, "{:,.0f}"),
    ("MFU", lambda p: 100 * p.mfu, "{:.1f}%"),
    ("GPU idle", lambda p: 100 * p.gpu_idle_fraction, "{:.1f}%"),
    ("exposed communication", lambda p: p.exposed_comm_s, "{:.3f} s"),
    ("others waiting on a straggler", lambda p: p.idle_breakdown_s.get("straggler_wait", 0.0), "{:.3f} s"),
    ("others waiting on the busiest expert rank", lambda p: p.idle_breakdown_s.get("routing_wait", 0.0), "{:.3f} s"),
    ("memory per GPU", lambda p: p.memory_per_gpu_bytes / GIB, "{:.1f} GiB"),
)

RUN_ROWS: tuple[tuple[str, Callable[[RunPrediction], float], str], ...] = (  # scenarios with a `run:` section
    ("time to train, P50 (failures)", lambda r: r.percentile_s(50) / 86400, "{:,.1f} days"),
    ("time to train, P90 (failures)", lambda r: r.percentile_s(90) / 86400, "{:,.1f} days"),
    ("interruptions a day", lambda r: r.interruptions_per_day, "{:.2f}"),
    ("goodput", lambda r: 100 * r.goodput_fraction, "{:.1f}%"),
    ("GPU-hours (failures)", lambda r: r.gpu_hours, "{:,.0f}"),
)


def register(app: typer.Typer) -> None:
    """Add `compare` to the app."""
    app.command("compare", help=reflowed(HELP))(compare)


def _waiting_on(kind: str) -> Callable[[StepPrediction], float]:
    """A prediction's exposed wait on `kind` of communication."""
    return lambda p: p.comm_by_collective_s.get(kind, 0.0)


def _change(value: float, base: float, fmt: str = "") -> str:
    """The change from the base: relative, or in points for a percentage (GPU idle 0.3% -> 0.5% is +0.2 pt,
    not +67%)."""
    if fmt.endswith("%"):
        return f"({value - base:+.1f} pt)"
    if base == 0.0:
        return "" if value == 0.0 else "(new)"
    return f"({100 * (value - base) / base:+.1f}%)"


def _labels(scenarios: list[tuple[Path, str | None]]) -> list[str]:
    """Each scenario's column label: its name (else its file's); names two files share get the file added."""
    names = [name or path.name for path, name in scenarios]
    labels = []
    for (path, name), label in zip(scenarios, names, strict=True):
        if names.count(label) > 1:
            label = f"{name} ({path})" if name else str(path)
        labels.append(label)
    return labels


def _rows(predictions: list[StepPrediction], changes: list[list[str]],
          runs: list[RunPrediction | None]) -> list[tuple[str, list[str]]]:
    """The compared metrics as (label, a cell per scenario), plain text, the same in the terminal and the
    HTML page: each metric with its change from the first scenario; the exposed communication by every kind
    any scenario waited on (the data-parallel collectives, tensor-parallel, pipeline sends ...); GPU idle
    time by every class of GPUs any scenario has (a straggler, the others); the run through failures where a
scenario has one."""
    base = predictions[0]
    waited = sorted({kind for p in predictions for kind in p.comm_by_collective_s})
    classes = list(dict.fromkeys(name for p in predictions for name in p.gpu_idle_by_class))
    metrics = [*ROWS[:4],
               *((f"  GPU idle: {name}", _idle_of(name), "{:.1f}%") for name in classes if len(classes) > 1),
               ROWS[4],
               *((f"  waiting on {kind}", _waiting_on(kind), "{:.3f} s") for kind in waited), *ROWS[5:]]
    rows = [(label, [fmt.format(metric(p)) + ("" if p is base else " " + _change(metric(p), metric(base), fmt))
                     for p in predictions]) for label, metric, fmt in metrics]
    base_run = runs[0]
    for label, run_metric, fmt in RUN_ROWS if any(runs) else ():
        rows.append((label, ["-" if r is None else fmt.format(run_metric(r)) + (
            "" if r is base_run or base_run is None else " " + _change(run_metric(r), run_metric(base_run)))
            for r in runs]))
    rows.append(("fits in memory", ["yes" if p.fits_in_memory else "NO" for p in predictions]))
    rows.append(("differs from the base", ["(the base)", *("; ".join(change) or "nothing" for change in changes[1:])]))
    return rows


def _idle_of(name: str) -> Callable[[StepPrediction], float]:
    """A prediction's idle percentage for its GPUs of class `name` (0 where it has none)."""
    return lambda p: 100 * p.gpu_idle_by_class.get(name, {}).get("idle_fraction", 0.0)


def compare(
    scenarios: Annotated[list[Path], typer.Argument(help="Two or more scenario YAML files; the first is the base.")],
    report: Annotated[Path | None, typer.Option(help="Write a side-by-side HTML page.")] = None,
    link_fault: LinkFaultOpt = None,
    straggler: StragglerOpt = None,
    calibration: Annotated[Path | None, typer.Option(help=CALIBRATION_HELP)] = None,
    force_calibration: Annotated[bool, typer.Option(help=FORCE_HELP)] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the predictions as JSON.")] = False,
) -> None:
    if len(scenarios) < 2:
        raise ConfigError("compare needs at least two scenario files (the first is the base)")
    check_writable(report, "report")  # before the predictions, not after them
    predictions = []
    runs: list[RunPrediction | None] = []  # the run through failures of a scenario with a `run:` section
    resolved: list[dict[str, object]] = []  # each scenario as predicted: presets expanded, overrides applied
    echoes: list[dict[str, object]] = []  # the same, as predict --json echoes it
    for path in scenarios:
        spec, topology, training, model = override(load_scenario(path), job_options({}))
        spec = with_stragglers(spec, straggler)
        topology = with_link_faults(topology, link_fault)
        pace = pace_of(spec, topology.nodes, topology.gpus_per_node)
        try:
            step = _run(topology, training, model, calibration, force_calibration, None, pace, nccl_setup(spec))
        except CalibrationError as exc:
            raise CalibrationError(f"{path}: {exc}") from None
        predictions.append((path, spec, step))
        runs.append(predict_run(spec.run, topology, training, model, predictions[-1][2]) if spec.run else None)
        echoes.append(scenario_echo(spec, topology, training, model, step.nccl_selection))
        resolved.append(resolved_view(spec, topology, training, model, step.nccl_selection))
    labels = _labels([(path, spec.name) for path, spec, _ in predictions])
    changes = [differences(resolved[0], other) for other in resolved]
    rows = _rows([p for _, _, p in predictions], changes, runs)
    if report is not None:
        from simulator.report.html import compare_report_html  # plotly: imported only when a report is asked for

        named = [(label, p) for label, (_, _, p) in zip(labels, predictions, strict=True)]
        write_text(report, compare_report_html(f"Compared with {scenarios[0].name}", named, rows), "report")
    if as_json:
        typer.echo(json.dumps({"scenarios": [
            {"file": str(path), "name": spec.name, "differs_from_base": change, **prediction_json(p, scenario=echo),
             **({"run": run.to_json()} if run is not None else {})}
            for (path, spec, p), change, run, echo in zip(predictions, changes, runs, echoes, strict=True)]},
            indent=2))
        return
    table = Table("metric", *(Column(header=plain(label)) for label in labels),
                  title=plain(f"Compared with {scenarios[0].name}"))
    for label, cells in rows:  # user text (names, values) as text, never console markup
        table.add_row(plain(label), *map(plain, cells))
    table_console(120).print(table)
