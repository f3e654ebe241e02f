"""The plotly figures of the HTML report (simulator.report.html): the step's timeline as a Gantt,
where the step's time went, memory against capacity, stream utilisation, and scaling curves.

Every figure is built from a StepPrediction alone; nothing here reads or writes files. The
timeline is the representative GPU's (all data-parallel ranks run the same plan), with one row per
stream as in the Chrome trace (simulator.report.trace), its tasks named in plain language
(simulator.report.names). A step of many micro-steps is simulated for its first few only, the
others repeating the steady state (StepPrediction.repeated): the timeline draws them as one labelled
band to the step's end, so that no part of the axis reads as idle time that is not.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from simulator.report.axes import count_log_axis, log_axis
from simulator.report.names import span_titles
from simulator.report.trace import STREAM_NAMES
from simulator.training.prediction import StepPrediction
from simulator.training.timeline import Span

GIB = 1024**3
MIB = 1024**2
TEMPLATE = "plotly_white"
LABEL_COLOURS = {
    "forward": "#4C78A8", "backward": "#F58518", "recompute": "#B279A2", "optimizer": "#54A24B",
    "all_gather": "#72B7B2", "reduce_scatter": "#E45756", "all_reduce": "#EECA3B",
}
OTHER_COLOUR = "#9D755D"
REPEATED_COLOUR = "#BAB0AC"
REPEATED_NAME = "repeated micro-steps"
OOM_COLOUR = "#D62728"
UTILISATION_BINS = 100
MARGIN = {"l": 10, "r": 10, "t": 50, "b": 40}


def _ordered(names: set[str], known: list[str]) -> list[str]:
    """`names` in the order of `known`, then any others alphabetically."""
    return sorted(names, key=lambda name: (known.index(name) if name in known else len(known), name))


def stream_order(spans: tuple[Span, ...]) -> list[str]:
    """The rows of a timeline: its streams, compute first, then the collective streams; with
    pipeline parallelism one set per stage ("stage 1: compute")."""
    stages = sorted({span.stage for span in spans})
    streams = _ordered({span.stream for span in spans}, list(STREAM_NAMES))
    if len(stages) < 2:
        return streams
    present = {(span.stage, span.stream) for span in spans}
    return [f"stage {k}: {stream}" for k in stages for stream in streams if (k, stream) in present]


def row_of(span: Span, rows: list[str]) -> str:
    """The row `span` is drawn on, among `rows` (from stream_order)."""
    return span.stream if span.stream in rows else f"stage {span.stage}: {span.stream}"


def _row_name(row: str) -> str:
    stage, _, stream = row.rpartition(": ")
    return f"{stage}: {STREAM_NAMES.get(stream, stream)}" if stage else STREAM_NAMES.get(stream, stream)


def stream_utilisation(spans: tuple[Span, ...], step_time_s: float,
                       bins: int = UTILISATION_BINS) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(streams, bin edges in s, busy fraction per stream and bin): the fraction of each of `bins`
    equal time bins over [0, step_time_s] that a stream spends running a task. A stream runs its
    tasks in order, so the fraction is at most 1 (clipped against rounding)."""
    streams = stream_order(spans)
    edges = np.linspace(0.0, step_time_s, bins + 1)
    width = step_time_s / bins if step_time_s > 0 else 1.0
    busy = np.zeros((len(streams), bins))
    for row, stream in enumerate(streams):
        starts = np.array([s.start_s for s in spans if row_of(s, streams) == stream])
        ends = np.array([s.end_s for s in spans if row_of(s, streams) == stream])
        # busy time before each edge = sum over spans of clip(edge - start, 0, duration)
        before = np.clip(edges[:, None] - starts[None, :], 0.0, (ends - starts)[None, :]).sum(axis=1)
        busy[row] = np.diff(before) / width
    return streams, edges, np.clip(busy, 0.0, 1.0)


def _size_text(size_bytes: int) -> str:
    if not size_bytes:
        return "-"
    return f"{size_bytes / GIB:.2f} GiB" if size_bytes >= GIB else f"{size_bytes / MIB:.1f} MiB"


def _seconds_text(seconds: float) -> str:
    """2.5 -> '2.5 s', 0.41 -> '410 ms', 3e-5 -> '30 µs' (three significant digits); under a nanosecond '0 s'
    (what is left of a difference of sums)."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return "0 s"


def repeated_text(p: StepPrediction, sep: str = " ") -> str | None:
    """What the micro-steps left out of the spans add, in words ('micro-steps 3-14 repeat the simulated
    steady state: 12 x 410 ms'; `sep` between its parts); None when the spans are the whole step."""
    r = p.repeated
    if r is None or r.periods == 0:
        return None
    first, last = r.simulated, r.simulated + r.micro_steps - 1
    steps = f"micro-step {first} repeats" if first == last else f"micro-steps {first}-{last} repeat"
    each = (f"{r.periods} x {_seconds_text(r.period_s)}" if r.period == 1
            else f"{r.periods} x {r.period} micro-steps x {_seconds_text(r.period_s)}")
    return f"{steps}{sep}the simulated steady state:{sep}{each}"


def simulated_s(p: StepPrediction) -> float:
    """Where the spans end: the step time less what the repeated micro-steps add."""
    return p.step_time_s - (p.repeated.total_s if p.repeated is not None else 0.0)


def timeline_figure(p: StepPrediction) -> go.Figure:
    """Gantt of the representative GPU's step: one row per stream, bars coloured by task label, named in
    plain language; the micro-steps that were not simulated as a hatched band from the spans' end to the
    step's (repeated_text labels it)."""
    streams = stream_order(p.spans)
    rows = [_row_name(s) for s in streams]
    titles = span_titles(p.spans)
    fig = go.Figure()
    for label in _ordered({s.label for s in p.spans}, list(LABEL_COLOURS)):
        spans = [s for s in p.spans if s.label == label]
        fig.add_trace(go.Bar(
            name=label, orientation="h", y=[_row_name(row_of(s, streams)) for s in spans],
            base=[1e3 * s.start_s for s in spans], x=[1e3 * (s.end_s - s.start_s) for s in spans],
            marker={"color": LABEL_COLOURS.get(label, OTHER_COLOUR), "line": {"width": 0}},
            customdata=[[html.escape(titles[s.name]), _size_text(s.size_bytes), 1e3 * s.start_s,
                         1e3 * (s.end_s - s.start_s), html.escape(s.name)] for s in spans],
            hovertemplate=("<b>%{customdata[0]}</b><br>start %{customdata[2]:.3f} ms, "
                           "duration %{customdata[3]:.3f} ms<br>size %{customdata[1]}<br>task %{customdata[4]} ("
                           + label + ")<extra></extra>")))
    band = repeated_text(p)
    if band is not None:
        start_ms, end_ms = 1e3 * simulated_s(p), 1e3 * p.step_time_s
        fig.add_trace(go.Bar(
            name=REPEATED_NAME, orientation="h", y=rows, base=[start_ms] * len(rows), x=[end_ms - start_ms] * len(rows),
            marker={"color": "rgba(186, 176, 172, 0.35)", "line": {"width": 0},
                    "pattern": {"shape": "/", "fgcolor": REPEATED_COLOUR}},
            hovertemplate=f"<b>{band}</b><br>from {start_ms:.1f} ms to {end_ms:.1f} ms<extra></extra>"))
        fig.add_annotation(x=(start_ms + end_ms) / 2, y=0.5, xref="x", yref="paper", showarrow=False,
                           text=repeated_text(p, sep="<br>"), bgcolor="rgba(255, 255, 255, 0.85)",
                           font={"size": 12})
    fig.update_layout(
        template=TEMPLATE, barmode="overlay", bargap=0.25, height=140 + 70 * len(rows),
        margin=MARGIN, title="Step timeline (representative GPU)",
        legend={"orientation": "h", "y": -0.35},
        xaxis={"title": "time since the step started (ms)", "range": [0, 1e3 * p.step_time_s], "tickformat": ","},
        yaxis={"categoryorder": "array", "categoryarray": rows, "autorange": "reversed"})
    return fig


def _percent_text(part: float, whole: float) -> str:
    """A share in percent with the digits a small one needs: 96.1%, 0.42%, 0.003%, <0.001%."""
    if whole <= 0:
        return "0%"
    pct = 100 * part / whole
    if pct == 0 or pct >= 1:
        return f"{pct:.1f}%"
    return f"{pct:.2g}%" if pct >= 0.001 else "<0.001%"


def breakdown_parts(p: StepPrediction) -> list[tuple[str, float, str]]:
    """(name, seconds, colour) of the critical GPU's step: compute, exposed communication by collective, other
    idle; they sum to step_time_s."""
    other_idle_s = max(0.0, p.critical_idle_s - p.exposed_comm_s)
    idle = [(f"waiting on {name}", seconds, LABEL_COLOURS.get(name, OTHER_COLOUR))
            for name, seconds in sorted(p.comm_by_collective_s.items())]
    return [("compute", p.compute_s, "#4C78A8"), *idle, ("other idle", other_idle_s, "#BAB0AC")]


def time_breakdown_figure(p: StepPrediction) -> go.Figure:
    """Where the critical GPU's step went: one horizontal bar stacked by part, each part in the legend with
    its seconds and share (so a slice of 0.2% is named as clearly as one of 99.8%), and below it the idle
    parts alone on their own scale (ms), each labelled with its milliseconds and share of the step."""
    parts = breakdown_parts(p)
    total = sum(seconds for _, seconds, _ in parts)
    fig = make_subplots(rows=2, cols=1, row_heights=[0.3, 0.7], vertical_spacing=0.25,
                        subplot_titles=("the step", "GPU idle time by cause"))
    for name, seconds, colour in parts:
        share = _percent_text(seconds, total)
        fig.add_trace(go.Bar(name=f"{name}: {_seconds_text(seconds)} ({share})", x=[seconds], y=["step"],
                             orientation="h", marker={"color": colour}, text=[f"{name} {share}"], textposition="inside",
                             insidetextanchor="middle", legendgroup="parts",
                             hovertemplate=f"{name}: {_seconds_text(seconds)} ({share})<extra></extra>"), row=1, col=1)
    idle = parts[1:]
    fig.add_trace(go.Bar(x=[1e3 * s for _, s, _ in idle], y=[n for n, _, _ in idle], orientation="h",
                         marker={"color": [c for _, _, c in idle]}, showlegend=False,
                         text=[f"{_seconds_text(s)} ({_percent_text(s, total)})" for _, s, _ in idle],
                         textposition="outside", cliponaxis=False,
                         hovertemplate="%{y}: %{x:.3f} ms<extra></extra>"), row=2, col=1)
    fig.update_xaxes(range=[0, total], ticksuffix=" s", row=1, col=1)
    fig.update_xaxes(title_text="ms per step", range=[0, 1.3e3 * max([s for _, s, _ in idle] + [1e-9])], row=2, col=1)
    fig.update_yaxes(showticklabels=False, row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=2, col=1)
    fig.update_layout(template=TEMPLATE, barmode="stack", height=300 + 28 * len(idle), margin={**MARGIN, "t": 80},
                      title="Where the step's time went", uniformtext={"minsize": 10, "mode": "hide"},
                      legend={"orientation": "v", "x": 1.02, "y": 1.0, "traceorder": "normal",
                              "title": {"text": "the step's parts"}})
    return fig


def memory_figure(p: StepPrediction) -> go.Figure:
    """Memory per GPU stacked by what holds it, against the GPU's capacity (red when it does not fit)."""
    m = p.memory
    parts = (("parameters", m.parameters_bytes, "#4C78A8"), ("gradients", m.gradients_bytes, "#F58518"),
             ("optimizer states", m.optimizer_bytes, "#54A24B"), ("activations", m.activations_bytes, "#B279A2"),
             ("buffers", m.buffers_bytes, "#72B7B2"), ("reserve", m.reserve_bytes, "#BAB0AC"))
    fig = go.Figure()
    for name, size, colour in parts:
        fig.add_trace(go.Bar(name=name, x=[size / GIB], y=["per GPU"], orientation="h", marker={"color": colour},
                             hovertemplate=name + ": %{x:.2f} GiB<extra></extra>"))
    capacity_gib = p.memory_capacity_bytes / GIB
    colour = "#555555" if p.fits_in_memory else OOM_COLOUR
    verdict = "fits" if p.fits_in_memory else "OUT OF MEMORY"
    fig.add_vline(x=capacity_gib, line={"color": colour, "width": 3, "dash": "dash"},
                  annotation={"text": f"capacity {capacity_gib:.3g} GiB", "font": {"color": colour}})
    fig.update_layout(
        template=TEMPLATE, barmode="stack", height=260, margin=MARGIN,
        title={"text": f"Memory per GPU: {m.total_bytes / GIB:.1f} GiB of {capacity_gib:.0f} GiB, {verdict}",
               "font": {"color": colour}},
        legend={"orientation": "h", "y": -0.45, "traceorder": "normal"},
        xaxis={"title": "GiB", "range": [0, 1.08 * max(m.total_bytes / GIB, capacity_gib)]})
    return fig


def utilisation_figure(p: StepPrediction, bins: int = UTILISATION_BINS) -> go.Figure:
    """Heatmap of stream_utilisation: time bins across, streams down, busy fraction as colour; over the
    simulated micro-steps only (the repeated ones are not simulated span by span)."""
    window_s = simulated_s(p)
    streams, edges, busy = stream_utilisation(p.spans, window_s, bins)
    centres_ms = 1e3 * (edges[:-1] + edges[1:]) / 2
    title = f"Stream utilisation ({bins} time bins)"
    if p.repeated is not None and p.repeated.periods:
        title = (f"Stream utilisation over the simulated micro-steps 0-{p.repeated.simulated - 1} "
                 f"(the step's first {_seconds_text(window_s)} of {_seconds_text(p.step_time_s)}; {bins} time bins)")
    fig = go.Figure(go.Heatmap(
        z=busy, x=centres_ms, y=[_row_name(s) for s in streams], zmin=0.0, zmax=1.0,
        colorscale="Blues", colorbar={"title": "busy"},
        hovertemplate="%{y}<br>around %{x:.1f} ms: busy %{z:.0%}<extra></extra>"))
    fig.update_layout(template=TEMPLATE, height=120 + 60 * len(streams), margin=MARGIN,
                      title=title, xaxis={"title": "time since the step started (ms)", "tickformat": ","},
                      yaxis={"autorange": "reversed"})
    return fig


def scaling_figure(rows: list[tuple[int, StepPrediction]]) -> go.Figure:
    """Scaling efficiency (per-GPU throughput / the first row's) against node count."""
    nodes = [n for n, _ in rows]
    base = rows[0][1].tokens_per_s_per_gpu
    efficiency = [100 * p.tokens_per_s_per_gpu / base for _, p in rows]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=nodes, y=efficiency, mode="lines+markers", name="scaling efficiency",
                             hovertemplate="%{x} nodes: %{y:.1f}%<extra></extra>"))
    fig.add_hline(y=100, line={"color": "#888888", "dash": "dot"}, annotation={"text": "ideal"})
    # at least 80-105% so that a percent of noise does not look like a cliff
    y_range = [min(80.0, min(efficiency) - 5), max(105.0, max(efficiency) + 5)]
    fig.update_layout(template=TEMPLATE, height=380, margin=MARGIN, title="Scaling efficiency",
                      xaxis=count_log_axis(nodes, "nodes (log scale)"),
                      yaxis={"title": "% of the first row", "range": y_range})
    return fig


def throughput_figure(rows: list[tuple[int, StepPrediction]]) -> go.Figure:
    """Cluster tokens/s against node count, with the ideal: the first row's per-GPU rate x GPUs."""
    nodes = [n for n, _ in rows]
    base = rows[0][1].tokens_per_s_per_gpu
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=nodes, y=[p.tokens_per_s for _, p in rows], mode="lines+markers", name="predicted",
                             hovertemplate="%{x} nodes: %{y:,.0f} tokens/s<extra></extra>"))
    fig.add_trace(go.Scatter(x=nodes, y=[base * p.n_gpus for _, p in rows], mode="lines", name="ideal (linear)",
                             line={"dash": "dot", "color": "#888888"}, hoverinfo="skip"))
    fig.update_layout(template=TEMPLATE, height=380, margin=MARGIN,
                      title="Throughput", xaxis=count_log_axis(nodes, "nodes (log scale)"),
                      yaxis=log_axis([*(p.tokens_per_s for _, p in rows), *(base * p.n_gpus for _, p in rows)],
                                     "tokens/s (log scale)"),
                      legend={"x": 0.02, "y": 0.98})
    return fig


def compare_figure(named: list[tuple[str, StepPrediction]]) -> go.Figure:
    """Stacked bars per scenario: the critical GPU's compute and its idle time (they sum to the step)."""
    # plotly reads tick labels as its HTML subset (<a href>, <b>, <br>) and decodes entities: escaped, a
    # scenario's name is shown as written and never becomes a link
    names = [html.escape(name) for name, _ in named]
    fig = go.Figure()
    parts = (("compute", lambda p: p.compute_s), ("idle", lambda p: p.critical_idle_s))
    for label, value in parts:
        fig.add_trace(go.Bar(name=label, x=names, y=[value(p) for _, p in named]))
    fig.update_layout(barmode="stack", yaxis_title="seconds per step", template="plotly_white", height=420,
                      title="Step time by part")
    return fig
