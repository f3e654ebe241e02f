"""`clustersim compare`: predict several scenarios and show what changes, relative to the first."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Column, Table

from simulator.cli.common import check_writable, plain, reflowed, write_text
from simulator.cli.predict import _load_scenario, _override, _run, prediction_json
from simulator.core.errors import ConfigError
from simulator.report.html import compare_report_html
from simulator.scenario import pace_slowdown
from simulator.training.prediction import StepPrediction

HELP = """Compare scenarios: predict each and print the differences that matter, relative to the first.

A what-if is a diff of two YAML files: copy a scenario, change the network, the node count, the
strategy, a bucket size, add a straggler (`stragglers: {slowdown: 1.2}`), and compare.

Examples:

  clustersim compare base.yaml roce.yaml more-nodes.yaml

  clustersim compare base.yaml straggler.yaml --json

  clustersim compare base.yaml roce.yaml --report what-if.html
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


def register(app: typer.Typer) -> None:
    """Add `compare` to the app."""
    app.command("compare", help=reflowed(HELP))(compare)


def _waiting_on(kind: str) -> Callable[[StepPrediction], float]:
    """A prediction's exposed wait on `kind` of communication."""
    return lambda p: p.comm_by_collective_s.get(kind, 0.0)


def _change(value: float, base: float) -> str:
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


def _leaves(data: object, prefix: str = "") -> dict[str, object]:
    """A nested mapping flattened to dotted paths (lists and scalars are leaves)."""
    if not isinstance(data, dict):
        return {prefix: data}
    flat: dict[str, object] = {}
    for key, value in data.items():
        flat.update(_leaves(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def _differences(base: dict[str, object], other: dict[str, object], most: int = 6) -> list[str]:
    """What `other` changes of `base` (resolved scenarios: presets expanded), as 'path: old -> new', the
    first `most` and a count of the rest; names, descriptions and sources left out."""
    a, b = _leaves(base), _leaves(other)
    changed = [f"{path}: {a.get(path)} -> {b.get(path)}" for path in dict.fromkeys([*a, *b])
               if a.get(path) != b.get(path) and path.rsplit(".", 1)[-1] not in ("name", "description", "source")]
    return changed[:most] + ([f"(+{len(changed) - most} more)"] if len(changed) > most else [])


def compare(
    scenarios: Annotated[list[Path], typer.Argument(help="Two or more scenario YAML files; the first is the base.")],
    report: Annotated[Path | None, typer.Option(help="Write a side-by-side HTML page.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the predictions as JSON.")] = False,
) -> None:
    if len(scenarios) < 2:
        raise ConfigError("compare needs at least two scenario files (the first is the base)")
    check_writable(report, "report")  # before the predictions, not after them
    predictions = []
    resolved: list[dict[str, object]] = []  # each scenario as predicted: presets expanded, overrides applied
    for path in scenarios:
        spec = _load_scenario(path)
        topology, training, model = _override(spec, dict(
            topology=None, nodes=None, gpus_per_node=None, model=None, strategy=None,
            micro_batch=None, global_batch=None, seq_len=None))
        slowdown = pace_slowdown(spec, topology.nodes * topology.gpus_per_node)
        predictions.append((path, spec, _run(topology, training, model, None, False, None, slowdown, spec.nccl_env)))
        resolved.append({"topology": topology.model_dump(), "training": training.model_dump(exclude={"model"}),
                         "model": model.model_dump(), "stragglers": spec.stragglers and spec.stragglers.model_dump(),
                         "jitter": spec.jitter and spec.jitter.model_dump(), "nccl_env": spec.nccl_env})
    labels = _labels([(path, spec.name) for path, spec, _ in predictions])
    changes = [_differences(resolved[0], other) for other in resolved]
    if report is not None:
        named = [(label, p) for label, (_, _, p) in zip(labels, predictions, strict=True)]
        write_text(report, compare_report_html(f"Compared with {scenarios[0].name}", named), "report")
    if as_json:
        typer.echo(json.dumps({"scenarios": [
            {"file": str(path), "name": spec.name, "differs_from_base": change, **prediction_json(p)}
            for (path, spec, p), change in zip(predictions, changes, strict=True)]}, indent=2))
        return
    table = Table("metric", *(Column(header=plain(label)) for label in labels),
                  title=plain(f"Compared with {scenarios[0].name}"))
    base = predictions[0][2]
    # what the exposed communication waited on, every kind any scenario has (tensor-parallel, pipeline
    # sends, the data-parallel collectives ...), right after the exposed communication
    waited = sorted({kind for _, _, p in predictions for kind in p.comm_by_collective_s})
    rows = [*ROWS[:5], *((f"  waiting on {kind}", _waiting_on(kind), "{:.3f} s") for kind in waited), *ROWS[5:]]
    for label, metric, fmt in rows:
        cells = [fmt.format(metric(p)) + ("" if p is base else " " + _change(metric(p), metric(base)))
                 for _, _, p in predictions]
        table.add_row(label, *cells)
    table.add_row("fits in memory", *("yes" if p.fits_in_memory else "[bold red]no[/]" for _, _, p in predictions))
    table.add_row("differs from the base", "(the base)", *("\n".join(change) or "nothing" for change in changes[1:]))
    Console(width=max(120, Console().width)).print(table)
