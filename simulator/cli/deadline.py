"""`plan --train-tokens T --deadline-days D`: the fewest GPUs, and the cheapest, that train by a deadline
at P90 (simulator.run.deadline), with days and cost against GPU count."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from simulator.cli.common import table_console
from simulator.collectives.nccl_setup import NcclSetup
from simulator.core.errors import ConfigError
from simulator.run.deadline import DeadlineRow, cheapest, fewest, plan_by_deadline
from simulator.run.spec import RunSpec
from simulator.training.search import SearchSpace, describe
from topologies.spec import TopologySpec
from workloads.spec import ModelSpec, TrainingSpec


def node_counts(text: str | None, nodes: int) -> list[int]:
    """--node-counts '16,32,64', or powers of two up to `nodes` (and `nodes`)."""
    if text is None:
        return sorted({2**k for k in range(nodes.bit_length()) if 2**k <= nodes} | {nodes})
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise ConfigError(f"--node-counts: expected comma-separated node counts >= 1, got {text!r}")
    return counts


def _layout(row: DeadlineRow) -> str:
    """'TP8 PP4 DP16, mb 1, zero1, full' (describe() without its longer words)."""
    lay = row.best.layout if row.best is not None else None
    if lay is None:
        return ""
    cp = f" CP{lay.cp}" if lay.cp > 1 else ""
    ep = f" EP{lay.ep}" if lay.ep > 1 else ""
    return f"TP{lay.tp} PP{lay.pp}{cp} DP{lay.dp}{ep}, mb {lay.micro_batch}, {lay.strategy}, {lay.recompute}"


def _row_json(row: DeadlineRow, usd: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {"nodes": row.nodes, "n_gpus": row.n_gpus, "refused": row.refused}
    if row.best is not None and row.run is not None:
        out.update(layout=describe(row.best.layout), step_time_s=row.best.prediction.step_time_s,
                   run=row.run.to_json(usd))
    return out


def show_deadline(topology: TopologySpec, training: TrainingSpec, model: ModelSpec, space: SearchSpace,
                  run: RunSpec, deadline_days: float, counts: list[int], keep: int, slack: float, workers: int,
                  usd: float | None, as_json: bool, nccl: NcclSetup) -> None:
    """Plan each node count (`nccl` running the collectives), print the curve and the two answers."""
    if not deadline_days > 0:
        raise ConfigError(f"--deadline-days must be > 0, got {deadline_days}")
    columns = (TextColumn("plan by deadline"), BarColumn(), MofNCompleteColumn(), TextColumn("node counts"),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("deadline", total=len(set(counts)))
        rows = plan_by_deadline(topology, training, model, space, run, counts, keep, slack, workers,
                                on_count=lambda _: progress.advance(task), nccl=nccl)
    few, cheap = fewest(rows, deadline_days), cheapest(rows, deadline_days)
    failures = run.failures if isinstance(run.failures, str) else "explicit"
    if as_json:
        typer.echo(json.dumps({
            "model": model.name, "topology": topology.name, "train_tokens": run.train_tokens,
            "deadline_days": deadline_days, "failures": failures,
            "fewest_gpus": _row_json(few, usd) if few else None, "cheapest": _row_json(cheap, usd) if cheap else None,
            "rows": [_row_json(r, usd) for r in rows]}, indent=2))
        return
    table = Table(title=f"{model.name} on {topology.name or 'cluster'}: {run.train_tokens:.3g} tokens by "
                  f"{deadline_days:g} days (P90, failures: {failures})", title_justify="left")
    for header in ("nodes", "GPUs", "fastest layout", "step s", "P50 days", "P90 days", "goodput", "GPU-hours",
                   *(("cost",) if usd is not None else ()), "by deadline"):
        table.add_column(header, justify="left" if header == "fastest layout" else "right")
    for r in rows:
        if r.best is None or r.run is None:
            table.add_row(str(r.nodes), f"{r.n_gpus:,}", f"[dim]{r.refused}[/]", *([""] * (6 + (usd is not None))))
            continue
        mark = " ".join(name for name, pick in (("fewest", few), ("cheapest", cheap)) if pick is r)
        table.add_row(str(r.nodes), f"{r.n_gpus:,}", _layout(r), f"{r.best.prediction.step_time_s:.2f}",
                      f"{r.run.percentile_s(50) / 86400:,.1f}", f"{r.p90_days():,.1f}",
                      f"{100 * r.run.goodput_fraction:.1f}%", f"{r.run.gpu_hours:,.0f}",
                      *((f"${r.run.gpu_hours * usd:,.0f}",) if usd is not None else ()),
                      ("yes " + mark).strip() if r.p90_days() <= deadline_days else "no")
    console = table_console(150)
    console.print(table)
    if few is None:
        console.print(f"No node count tried finishes by {deadline_days:g} days at P90: try more --node-counts.")
