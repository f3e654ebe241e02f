"""`clustersim validate-training`: predict published training-throughput cases and report the error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from simulator.cli.common import plain, reflowed, table_console
from simulator.collectives.nccl_setup import NcclSetup
from simulator.collectives.select import selection_option
from simulator.core.errors import ConfigError
from simulator.core.input_file import read_input_text
from simulator.training.predict import predict_step
from simulator.training.prediction import StepPrediction
from simulator.validation.training_cases import TrainingCase, parse_cases
from simulator.validation.training_fit import (
    ATTENTION_FACTORS,
    TrainingCrossval,
    crossval_by_source,
    crossval_to_json,
    curves,
)
from simulator.validation.training_report import (
    CaseResult,
    Summary,
    TrainingReport,
    choose_metric,
    evaluate,
    memory_summary,
    report_to_json,
)
from topologies.spec import TopologySpec
from workloads.spec import ModelSpec, TrainingSpec

HELP = """Predict each published training case that the tool can express and compare with the source.

Cases (a YAML list of published runs, each with its id, source, model, training, cluster and metrics, as
benchmarks/data/heldout_training_cases.yaml holds them) are lowered onto a topology preset, a model shape, a
data-parallel strategy (FSDP, ZeRO-1/2/3, DDP) and tensor, pipeline and context parallelism with the
conventions of the framework that ran them (rank placement, sequence parallelism, pipeline schedule,
ring attention). ZeRO-Offload, LoRA without a rank (outside NeMo), packed sequences of unstated lengths
(outside InternEvo, whose packing bounds them at seq_len), models without a stated shape and layouts
whose tp x pp x cp x dp is not the GPU count are skipped with the reason, as are malformed cases (a section
missing, a field of the wrong type, an id used twice; --strict refuses the file instead). Fields a case does not state
are filled with stated defaults (listed per case; such cases are flagged); a checkpointing policy of
some layers without saying which takes the share the case's published hfu and mfu imply.

Metric per case, the first the source publishes: model TFLOP/s per GPU, MFU %, tokens/s/GPU
(by the names of the shared cases, else by their words: "tokens_per_second_per_gpu", "TFLOPS/GPU";
then the cluster's tokens/s or samples/s, or the step time: "step_time_ms", "sec_per_iteration").
Where the source also publishes its tokens/s, the prediction is read in the source's own FLOPs per
token (published x predicted / published tokens/s), so a FLOP-counting convention is not scored as
speed; otherwise, where the source's TFLOP/s count recomputation (hardware FLOPs), the prediction is
converted (x 4/3 with full activation checkpointing). Error = |predicted - published| / published.

Summaries per source and overall: median |error| over the expressed cases; the lookup-table
baseline (each case predicted by the median of the other cases with the same GPU, strategy family
and metric); the change figure (pairs differing only in GPU count or inter-node bandwidth: error
of the predicted throughput ratio, and of the lookup table's ratio 1); coverage = expressed /
in-scope cases (a data-parallel family understood), also apart for the cases with and without
tensor, pipeline or context parallelism (rows "ALL tp/pp" and "ALL dp-only"). Memory: where a case
publishes the memory a GPU used, the predicted memory per GPU against it (a line after the table; JSON:
`memory` and, per case, `memory_pct_error`).

--crossval source: the attention kernels' efficiency per GPU generation and kernel (FlashAttention-2,
cuDNN, MPT's Triton kernel) is the one constant the published runs inform; each source is held out in
turn, the factor fitted on the others (median
|error|, over a grid of 0.6-1.6 times the shipped table) and the held-out source predicted with it. A
factor is fitted only where the runs it moves come from two sources or more (one source cannot tell the
kernel's rate from its own setup); elsewhere it stays at the shipped table (JSON: crossval.informing_sources).
The pooled held-out error is the honest figure (JSON: crossval.median_abs_pct_error, and per source).

Examples:

  clustersim validate-training benchmarks/data/heldout_training_cases.yaml

  clustersim validate-training cases.yaml --source llmfoundry

  clustersim validate-training cases.yaml --json > training-accuracy.json

  clustersim validate-training cases.yaml --crossval source   # leave-one-source-out error (minutes)

  clustersim validate-training cases.yaml --nccl-selection nccl   # collectives as NCCL's tuner picks them
"""


def register(app: typer.Typer) -> None:
    """Add the `validate-training` command to the app."""
    app.command("validate-training", help=reflowed(HELP))(validate_training)


def _unreadable(case: TrainingCase) -> str | None:
    """Why a case is malformed (a field of the wrong type, a published metric that is no throughput), or None."""
    if case.problem is not None:
        return case.problem
    try:
        choose_metric(case)
    except ConfigError as exc:
        return str(exc)
    return None


def _select(cases: list[TrainingCase], prefix: str | None, strict: bool) -> list[TrainingCase]:
    """The cases to predict: those of `prefix`. A malformed case is kept, to be reported as skipped with its
    reason, unless `strict`, which refuses it; a file none of whose cases can be read is refused either way."""
    kept = cases if prefix is None else [c for c in cases if c.id.startswith(prefix)]
    if not kept:
        sources = sorted({c.source for c in cases})
        raise ConfigError(f"--source: no case id starts with {prefix!r}; sources: {', '.join(sources)}")
    problems = [reason for c in kept if (reason := _unreadable(c)) is not None]
    if problems and (strict or len(problems) == len(kept) == 1):
        raise ConfigError(problems[0])
    if len(problems) == len(kept):
        more = f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
        raise ConfigError(f"no case could be read: {'; '.join(problems[:3])}{more}")
    return kept


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _notes(r: CaseResult) -> str:
    if r.skipped:
        return f"[dim]skipped: {r.skipped}[/]"
    notes = ["[yellow]may not fit in memory[/]"] if r.fits_in_memory is False else []
    if r.metric is not None and r.metric.hardware_flops:
        notes.append("hardware FLOPs (recompute counted)")
    if r.defaults:
        notes.append("[yellow]defaults:[/] " + "; ".join(r.defaults))
    return " | ".join(notes)


def _case_table(report: TrainingReport) -> Table:
    table = Table(title="Training throughput: predicted vs published", show_lines=False)
    for col in ("case", "metric", "published", "predicted", "error", "lookup err", "notes"):
        table.add_column(col, justify="right" if col in ("published", "predicted", "error", "lookup err") else "left",
                         overflow="fold")
    for r in report.cases:
        table.add_row(plain(r.id), r.metric.key if r.metric else "-", _num(r.published), _num(r.predicted),
                      _pct(r.abs_pct_error), _pct(r.lookup_abs_pct_error), _notes(r))
    return table


def _summary_row(s: Summary) -> list[str | Text]:
    coverage = "-" if s.coverage is None else f"{s.expressed}/{s.in_scope} ({s.coverage:.0%})"
    return [plain(s.source), str(s.cases), coverage, _pct(s.median_abs_pct_error),
            f"{_pct(s.lookup_median_abs_pct_error)} ({s.lookup_cases}; sim {_pct(s.simulator_median_on_lookup_cases)})",
            str(s.pairs), _pct(s.change_median_abs_pct_error), _pct(s.change_lookup_median_abs_pct_error)]


def _summary_table(report: TrainingReport) -> Table:
    table = Table(title="Median |error| per source (lookup table: median of the other cases, same GPU/family/metric)")
    for col in ("source", "cases", "coverage", "median err", "lookup err (n; sim on n)", "pairs", "change err",
                "lookup change err"):
        table.add_column(col, justify="left" if col == "source" else "right")
    for source in report.sources:
        table.add_row(*_summary_row(report.summary(source)))
    table.add_section()
    table.add_row(*_summary_row(report.summary(model_parallel=True)))
    table.add_row(*_summary_row(report.summary(model_parallel=False)))
    table.add_row(*_summary_row(report.summary()))
    return table


def _crossval_table(result: TrainingCrossval) -> Table:
    table = Table(title="Leave one source out: the attention efficiency factor per GPU generation and kernel "
                  "fitted on the other sources")
    for col in ("source", "cases", "held-out err", "prior err", "factors used"):
        table.add_column(col, justify="left" if col in ("source", "factors used") else "right")
    for fold in result.folds:
        factors = ", ".join(f"{group} x{f:.2f}" for group, f in sorted(fold.factors.items()))
        table.add_row(fold.source, str(len(fold.errors)), _pct(fold.median_abs_pct_error),
                      _pct(fold.prior_median_abs_pct_error), factors)
    table.add_section()
    fitted = ", ".join(f"{group} x{f:.2f}" for group, f in sorted(result.fitted.items()))
    table.add_row("ALL (held out)", str(sum(len(f.errors) for f in result.folds)), _pct(result.median_abs_pct_error),
                  _pct(result.prior_median_abs_pct_error), f"in-sample fit: {fitted} "
                  f"({_pct(result.in_sample_median_abs_pct_error)})")
    return table


def _progress() -> Progress:
    """A progress bar on stderr, gone when the work is done (the report follows on stdout)."""
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=True)


def _evaluate(selected: list[TrainingCase], nccl: NcclSetup) -> TrainingReport:
    """Predict the expressible cases (with progress) and compare with the sources."""
    with _progress() as progress:
        task = progress.add_task("predicting the cases", total=len(selected))

        def predictor(topology: TopologySpec, training: TrainingSpec, model: ModelSpec) -> StepPrediction:
            progress.advance(task)
            return predict_step(topology, training, model, nccl=nccl)
        return evaluate(selected, predictor)


def _crossval(selected: list[TrainingCase], nccl: NcclSetup) -> tuple[TrainingReport, TrainingCrossval]:
    """Predict the cases at every factor of the grid (with progress), then leave each source out."""
    reports = {}
    with _progress() as progress:
        task = progress.add_task("attention factor grid", total=len(ATTENTION_FACTORS) * len(selected))
        for factor in ATTENTION_FACTORS:
            def predictor(topology: TopologySpec, training: TrainingSpec, model: ModelSpec,
                          factor: float = factor) -> StepPrediction:
                progress.advance(task)
                return predict_step(topology, training, model, nccl=nccl, attention_scale=factor)
            reports[factor] = evaluate(selected, predictor)
    return reports[1.0], crossval_by_source(curves(reports), ATTENTION_FACTORS)


def validate_training(
    cases: Annotated[Path, typer.Argument(
        help="Training cases YAML: published runs as benchmarks/data/heldout_training_cases.yaml holds them.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    source: Annotated[str | None, typer.Option(help="Only cases whose id starts with this prefix (e.g. llmfoundry).")]
    = None,
    crossval: Annotated[str | None, typer.Option(
        help="'source': refit the attention efficiency per GPU generation and kernel with each source left out and "
        "report the error on the held-out source (predicts every case 5 times: minutes).")] = None,
    nccl_selection: Annotated[str, typer.Option(
        help="Each collective's algorithm and protocol in every step: model (the pair the cost model prices "
        "fastest) or nccl (the pair NCCL's tuner ranks first, of the newest release).")] = "model",
    strict: Annotated[bool, typer.Option(
        help="Refuse the file if any case is malformed (by default such a case is reported as skipped with the "
        "reason, as a case the tool cannot express, and the others are predicted).")] = False,
) -> None:
    if crossval not in (None, "source"):
        raise ConfigError(f"--crossval: only 'source' (leave one source out), got {crossval!r}")
    nccl = NcclSetup(selection=selection_option(nccl_selection, "--nccl-selection"))
    selected = _select(parse_cases(read_input_text(cases, "training cases file"), str(cases), strict), source, strict)
    if crossval:
        report, result = _crossval(selected, nccl)
    else:
        report, result = _evaluate(selected, nccl), None
    if as_json:
        payload = report_to_json(report)
        if result is not None:
            payload["crossval"] = crossval_to_json(result)
        typer.echo(json.dumps(payload, indent=2))
        return
    console = table_console(200)
    console.print(_case_table(report))
    console.print(_summary_table(report))
    memory = memory_summary(report)
    if memory["cases"]:
        console.print(f"Memory per GPU against the {memory['cases']} cases that publish it: median |error| "
                      f"{memory['median_abs_pct_error']:.1f}% (signed median {memory['median_pct_error']:+.1f}%)")
    if result is not None:
        console.print(_crossval_table(result))
