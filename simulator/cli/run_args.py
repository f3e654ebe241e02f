"""The run options shared by `predict` and `plan` (--train-tokens, --failures, --checkpoint-interval), the
run spec they make with the scenario's `run:` section, and its Monte Carlo behind a progress bar."""

from __future__ import annotations

import math
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simulator.core.errors import ConfigError, config_error_from
from simulator.run.params import save_seconds
from simulator.run.presets import load_failures
from simulator.run.spec import RunSpec, parse_tokens
from simulator.run.summary import RunPrediction, predict_run
from simulator.training.prediction import StepPrediction
from topologies.spec import TopologySpec
from workloads.spec import ModelSpec, TrainingSpec

TrainTokensOpt = Annotated[str | None, typer.Option(
    help="Tokens to train on (15T, 300B, 1.5e12): time to train through failures, checkpoints and restarts "
    "(Monte Carlo), GPU-hours, cost, energy.")]
FailuresOpt = Annotated[str | None, typer.Option(
    help="Failure preset for the run: llama3 (default; Llama 3 405B's 54 days on 16K H100), rsc1, rsc2, none.")]
IntervalOpt = Annotated[str | None, typer.Option(
    help="Training seconds between checkpoints, or optimal (Young: sqrt(2 x save x job MTBF); default).")]


def _interval(text: str) -> float | str:
    if text.strip().lower() == "optimal":
        return "optimal"
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise ConfigError(f"--checkpoint-interval: expected seconds > 0 or optimal, got {text!r}")
    return value


def run_spec(base: RunSpec | None, train_tokens: str | None, failures: str | None,
             interval: str | None) -> RunSpec | None:
    """The scenario's `run:` with the options applied; None when no tokens are given anywhere.
    ConfigError (one line) on a bad option or an unknown preset."""
    tokens = parse_tokens(train_tokens) if train_tokens is not None else None
    if base is None and tokens is None:
        if failures is not None or interval is not None:
            raise ConfigError("--failures and --checkpoint-interval describe a run: give --train-tokens too")
        return None
    data: dict[str, Any] = base.model_dump(by_alias=True) if base is not None else {}
    if tokens is not None:
        data["train_tokens"] = tokens
    if failures is not None:
        data["failures"] = failures
    if interval is not None:
        data["checkpoint"] = {**data.get("checkpoint", {}), "interval_s": _interval(interval)}
    try:
        spec = RunSpec.model_validate(data)
    except ValidationError as exc:
        raise config_error_from(exc, "run") from None
    if isinstance(spec.failures, str):
        load_failures(spec.failures)  # an unknown preset: the one-line error listing them
    return spec


def check_run(spec: RunSpec, topology: TopologySpec, training: TrainingSpec, model: ModelSpec) -> None:
    """Input errors the step prediction need not wait for (an interval shorter than a save)."""
    save_seconds(spec, topology, training, model)


def predict_run_shown(spec: RunSpec, topology: TopologySpec, training: TrainingSpec, model: ModelSpec,
                      step: StepPrediction, label: str = "run") -> RunPrediction:
    """predict_run with a progress bar of the Monte Carlo runs on stderr."""
    columns = (TextColumn(f"{label}: Monte Carlo"), BarColumn(), MofNCompleteColumn(), TextColumn("runs"),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(label, total=spec.runs)
        return predict_run(spec, topology, training, model, step, on_batch=lambda n: progress.advance(task, n))


def run_rows(r: RunPrediction, usd_per_gpu_hour: float | None) -> list[tuple[str, str]]:
    """Rows for a metric/value table: the run through failures."""
    p, day = r.params, 86400.0
    cost = f", ${r.gpu_hours * usd_per_gpu_hour:,.0f}" if usd_per_gpu_hour is not None else ""
    lost = r.lost_s_by_cause
    wall = sum(lost.values()) + p.work_s
    mtbf = f"job MTBF {p.job_mtbf_s / 3600:.2f} h" if p.rate_per_s > 0 else "no failures"
    rows = [
        (f"with failures ({r.failures}, {r.runs} runs)",
         f"{r.percentile_s(50) / day:,.1f} days (P10 {r.percentile_s(10) / day:,.1f}, P90 "
         f"{r.percentile_s(90) / day:,.1f}), goodput {100 * r.goodput_fraction:.1f}%"),
        ("  interruptions", f"{r.samples.interruptions.mean():,.1f} ({r.interruptions_per_day:.2f} a day, {mtbf})"),
        ("  checkpoints", f"every {p.interval_s:,.0f} s, {p.save_block_s:.1f} s blocking, "
                          f"{p.checkpoint_bytes / 1e12:.2f} TB; restart {p.restart_s:.0f} s"),
    ]
    rows += [(f"  time {name.replace('_', ' ')}", f"{seconds / day:,.2f} days ({100 * seconds / wall:.1f}%)")
             for name, seconds in lost.items() if seconds > 0]
    rows.append(("  GPU-hours, energy", f"{r.gpu_hours:,.0f}{cost}, {r.energy_kwh / 1000:,.1f} MWh (GPUs)"))
    return rows
