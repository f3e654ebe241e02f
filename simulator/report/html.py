"""The HTML report of `predict --report` and `scale --report`: one self-contained page.

The page embeds plotly.js inline once (with the first figure) and every figure after it as a div
and a script, so it opens offline, from a file, with no server and no network. Each figure has a
caption that defines what it shows (DESIGN.md section 9 metric names). The figures themselves are
built in simulator.report.figures; this module lays out the page. Pure functions: the CLI writes
the text.
"""

from __future__ import annotations

from html import escape

import plotly.graph_objects as go
import plotly.io as pio

from simulator.report import figures, run_figures
from simulator.run.summary import RunPrediction
from simulator.training.prediction import StepPrediction

GIB = 1024**3
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px auto; max-width: 1320px;
       color: #222; padding: 0 16px; }
h1 { font-size: 1.5em; margin-bottom: 4px; }
h2 { font-size: 1.15em; margin: 28px 0 4px; }
.source { color: #666; margin-top: 0; }
.metrics { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.metric { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 150px; }
.metric .value { font-size: 1.35em; font-weight: 600; }
.metric .name { color: #666; font-size: 0.85em; }
.metric.oom { border-color: #D62728; color: #D62728; }
.caption { color: #444; font-size: 0.9em; max-width: 1100px; line-height: 1.4; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: right; }
th { background: #f5f5f5; }
td.oom { color: #D62728; font-weight: 600; }
"""

METRICS_CAPTION = (
    "step_time_s: wall time of one optimizer step (all micro-batches). tokens/s: tokens of the step / step_time_s. "
    "MFU = model TFLOP/s per GPU (6N + attention FLOPs per token, no recomputation) / the GPU's dense peak. "
    "gpu_idle_s: the step minus each GPU's own compute (the busy time of its compute stream), averaged over all "
    "the job's GPUs (a straggler's wait counts on the GPUs that wait; per class below); "
    "gpu_idle_fraction = gpu_idle_s / step_time_s. exposed_comm_s: time the compute stream waits on a collective. "
    "Memory: bytes per GPU against the GPU's capacity; out of memory is a result, not an error.")
TIMELINE_CAPTION = (
    "The model simulates one representative GPU: every data-parallel rank runs the same plan, so this is "
    "each rank's timeline. One row per CUDA stream: compute (forward, backward, recompute, optimizer), the NCCL "
    "stream of parameter all-gathers, the NCCL stream of gradient reductions. Hover a bar for the task's name, "
    "the bytes its collective moves, and its duration. With many micro-steps only the first few are simulated "
    "span by span; the others repeat the simulated steady state exactly, each adding the same time, and are "
    "drawn as one hatched band from the end of the simulated ones to the end of the step (in the real step they "
    "run before the last micro-step, whose gradient reductions and optimizer end the step). The same spans are "
    "written by --trace as Chrome Trace Event JSON for Perfetto.")
BREAKDOWN_CAPTION = (
    "The critical GPU's step as one bar, each part named in the legend with its time and share of the step "
    "(small parts are hard to see in the bar and are drawn again below, on their own scale). "
    "Compute = compute_s, the busy time of its compute stream; its idle time, "
    "step_time_s - compute_s, is split "
    "into exposed communication by collective (time the compute stream waits on it; they sum to exposed_comm_s) "
    "and other idle = the rest (waits on the optimizer's inputs, or the step ending on a "
    "communication stream after compute is done).")
MEMORY_CAPTION = (
    "Bytes per GPU by what holds them: parameters, gradients and optimizer states as the ZeRO paper counts them "
    "(sharded by the strategy's stage), activations (Korthikanti et al.), communication buffers and gathered FSDP "
    "units, and a CUDA/NCCL reserve. The dashed line is the GPU's memory; it and the title turn red when the "
    "total does not fit.")
UTILISATION_CAPTION = (
    "The simulated part of the step (all of it, unless its micro-steps repeat: see the timeline) is cut into "
    "{bins} equal time bins; a cell is the fraction of its bin that the stream spends "
    "running a task (kernels on the compute stream, a collective in flight on an NCCL stream). The model "
    "simulates one representative GPU, so these are that GPU's streams: a busy NCCL stream means its collective "
    "is in flight on the GPU's links (shared, max-min fair, with the other stream's collective), not the "
    "utilisation of each physical link of the cluster.")
SCALE_CAPTION = (
    "The same job (same per-GPU micro-batch and gradient accumulation) predicted at each node count. "
    "scaling_efficiency(N) = tokens_per_s_per_gpu at N / tokens_per_s_per_gpu at the first node count. "
    "Node counts are on a log axis; the dotted line is 100%.")
THROUGHPUT_CAPTION = (
    "tokens_per_s of the whole cluster at each node count. The dotted ideal is the first row's per-GPU rate "
    "(tokens_per_s_per_gpu) times the GPUs: perfectly linear scaling. Both axes are logarithmic.")


def _figure_sections(sections: list[tuple[str, str, go.Figure, str]]) -> str:
    """(div id, heading, figure, caption) -> HTML; plotly.js is embedded inline with the first figure."""
    out = []
    for index, (div_id, heading, fig, caption) in enumerate(sections):
        div = pio.to_html(fig, full_html=False, include_plotlyjs=index == 0, config=PLOTLY_CONFIG, div_id=div_id)
        out.append(f'<section>\n<h2>{escape(heading)}</h2>\n{div}\n<p class="caption">{escape(caption)}</p>\n'
                   "</section>")
    return "\n".join(out)


def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{escape(title)}</title>\n'
            f"<style>{STYLE}</style>\n</head>\n<body>\n<h1>{escape(title)}</h1>\n{body}\n</body>\n</html>\n")


def _source(p: StepPrediction) -> str:
    calibration = p.calibration or "none (prior parameters)"
    return f'<p class="source">Model: {escape(p.model)}. Calibration: {escape(calibration)}.</p>'


def _metric(name: str, value: str, oom: bool = False) -> str:
    css = "metric oom" if oom else "metric"
    return f'<div class="{css}"><div class="value">{escape(value)}</div><div class="name">{escape(name)}</div></div>'


def _metrics(p: StepPrediction) -> str:
    verdict = "fits" if p.fits_in_memory else "OUT OF MEMORY"
    cards = [
        _metric("step time", f"{p.step_time_s:.3f} s"),
        _metric(f"tokens/s ({p.tokens_per_s_per_gpu:,.0f} per GPU, {p.n_gpus} GPUs)", f"{p.tokens_per_s:,.0f}"),
        _metric(f"MFU ({p.tflops_per_gpu:.1f} model TFLOP/s per GPU)", f"{100 * p.mfu:.1f}%"),
        _metric(f"GPU idle, all GPUs' average ({p.gpu_idle_s:.3f} s)", f"{100 * p.gpu_idle_fraction:.1f}%"),
        *(_metric(f"GPU idle: {name}, {c['gpus']:,.0f} GPUs ({c['idle_s']:.3f} s)", f"{100 * c['idle_fraction']:.1f}%")
          for name, c in p.gpu_idle_by_class.items() if len(p.gpu_idle_by_class) > 1),
        _metric("exposed communication", f"{p.exposed_comm_s:.3f} s"),
        _metric(f"memory per GPU: {p.memory_per_gpu_bytes / GIB:.1f} of {p.memory_capacity_bytes / GIB:.3g} GiB",
                verdict, oom=not p.fits_in_memory),
    ]
    return (f'<div class="metrics">\n{"".join(cards)}\n</div>\n'
            f'<p class="caption">{escape(METRICS_CAPTION)}</p>')


def _planning(p: StepPrediction, tokens: float, usd_per_gpu_hour: float | None) -> str:
    """Failure-free planning figures for `tokens` tokens: days, GPU-hours, cost at a price, GPU energy."""
    cards = [_metric(f"days to train on {tokens:.3g} tokens", f"{p.time_to_train_s(tokens) / 86400:,.1f}"),
             _metric("GPU-hours", f"{p.gpu_hours(tokens):,.0f}"),
             _metric("GPU energy (MWh)", f"{p.energy_kwh(tokens) / 1000:,.1f}")]
    if usd_per_gpu_hour is not None:
        cost = p.gpu_hours(tokens) * usd_per_gpu_hour
        cards.append(_metric(f"cost at ${usd_per_gpu_hour:g} per GPU-hour", f"${cost:,.0f}"))
    return f'<div class="metrics">\n{"".join(cards)}\n</div>'


def step_report_html(title: str, p: StepPrediction, run: RunPrediction | None = None, job: str = "",
                     planning: tuple[float, float | None] | None = None) -> str:
    """The report of one predicted step: the job as resolved (`job`: sequence, batches, recomputation,
    precision), key metrics, the failure-free time, GPU-hours, cost and energy of training on `planning`'s
    (tokens, price per GPU-hour), timeline, time and idle breakdown, memory against capacity, and stream
    utilisation (see the module docstring); with a run through failures, its finish times and goodput
    waterfall first."""
    sections = [
        ("timeline", "Step timeline", figures.timeline_figure(p), TIMELINE_CAPTION),
        ("time-breakdown", "Where the time went", figures.time_breakdown_figure(p), BREAKDOWN_CAPTION),
        ("memory", "Memory per GPU", figures.memory_figure(p), MEMORY_CAPTION),
        ("utilisation", "Link / stream utilisation", figures.utilisation_figure(p),
         UTILISATION_CAPTION.format(bins=figures.UTILISATION_BINS)),
    ]
    if run is not None:
        sections[:0] = [("finish-times", "Time to train, over the Monte Carlo runs",
                         run_figures.finish_time_figure(run),
                         run_figures.FINISH_CAPTION),
                        ("goodput", "Goodput: where the wall time went", run_figures.goodput_waterfall_figure(run),
                         run_figures.WATERFALL_CAPTION)]
    inputs = f'<p class="source">Job: {escape(job)}.</p>\n' if job else ""
    plan = f"{_planning(p, *planning)}\n" if planning is not None else ""
    return _page(title, f"{_source(p)}\n{inputs}{_metrics(p)}\n{plan}{_figure_sections(sections)}")


def _scale_table(rows: list[tuple[int, StepPrediction]]) -> str:
    base = rows[0][1].tokens_per_s_per_gpu
    head = ("nodes", "GPUs", "step time (s)", "tokens/s", "tokens/s/GPU", "TFLOP/s/GPU", "MFU", "GPU idle",
            "exposed comm (s)", "memory/GPU (GiB)", "fits", "scaling efficiency")
    lines = ["<table>", "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    for n, p in rows:
        cells = (str(n), str(p.n_gpus), f"{p.step_time_s:.3f}", f"{p.tokens_per_s:,.0f}",
                 f"{p.tokens_per_s_per_gpu:,.0f}", f"{p.tflops_per_gpu:.1f}", f"{100 * p.mfu:.1f}%",
                 f"{100 * p.gpu_idle_fraction:.1f}%", f"{p.exposed_comm_s:.3f}", f"{p.memory_per_gpu_bytes / GIB:.1f}")
        fits = "<td>yes</td>" if p.fits_in_memory else '<td class="oom">OUT OF MEMORY</td>'
        lines.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + fits
                     + f"<td>{100 * p.tokens_per_s_per_gpu / base:.1f}%</td></tr>")
    lines.append("</table>")
    return "\n".join(lines)


def scale_report_html(title: str, rows: list[tuple[int, StepPrediction]]) -> str:
    """The report of `scale`: scaling efficiency and throughput against nodes, and the per-row table.
    `rows` are (nodes, prediction), the first being the reference of scaling efficiency."""
    if not rows:
        raise ValueError("scale_report_html needs at least one (nodes, prediction) row")
    sections = [
        ("scaling-efficiency", "Scaling efficiency", figures.scaling_figure(rows), SCALE_CAPTION),
        ("throughput", "Throughput", figures.throughput_figure(rows), THROUGHPUT_CAPTION),
    ]
    body = (f"{_source(rows[0][1])}\n{_figure_sections(sections)}\n<section>\n<h2>Per node count</h2>\n"
            f'{_scale_table(rows)}\n<p class="caption">{escape(METRICS_CAPTION)}</p>\n</section>')
    return _page(title, body)


COMPARE_CAPTION = (
    "Each scenario's step split into compute (the busy compute stream of the critical GPU: the straggler, "
    "where there is one) and its idle time (step_time_s - compute_s: exposed communication and "
    "other waits); the bars sum to the step time. The table gives each metric and its change from the first "
    "scenario.")


def compare_report_html(title: str, named: list[tuple[str, StepPrediction]],
                        rows: list[tuple[str, list[str]]]) -> str:
    """Side by side: several scenarios' steps (the first is the base), a stacked time chart, and the
    compared metrics as `compare` prints them (`rows`: label, a cell per scenario)."""
    if len(named) < 2:
        raise ValueError("compare_report_html needs at least two scenarios")
    base = named[0][1]
    lines = ["<table>", "<tr><th>metric</th>" + "".join(f"<th>{escape(name)}</th>" for name, _ in named) + "</tr>"]
    for label, cells in rows:
        tds = "".join(f'<td class="oom">{escape(c)}</td>' if c == "NO" else f"<td>{escape(c)}</td>" for c in cells)
        lines.append(f'<tr><th style="text-align:left">{escape(label)}</th>{tds}</tr>')
    lines.append("</table>")
    sections = [("compare-time", "Where each step's time went", figures.compare_figure(named), COMPARE_CAPTION)]
    body = (f"{_source(base)}\n{_figure_sections(sections)}\n<section>\n<h2>Side by side</h2>\n"
            + "\n".join(lines) + f'\n<p class="caption">{escape(METRICS_CAPTION)}</p>\n</section>')
    return _page(title, body)
