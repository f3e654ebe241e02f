"""The plotly figures of the HTML report (simulator.report.html): the step's timeline as a Gantt,
where the step's time went, memory against capacity, stream utilisation, and scaling curves.

Every figure is built from a StepPrediction alone; nothing here reads or writes files. The
timeline is the representative GPU's (all data-parallel ranks run the same plan), with one row per
stream as in the Chrome trace (simulator.report.trace).
"""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

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


def timeline_figure(p: StepPrediction) -> go.Figure:
    """Gantt of the representative GPU's step: one row per stream, bars coloured by task label."""
    streams = stream_order(p.spans)
    rows = [_row_name(s) for s in streams]
    fig = go.Figure()
    for label in _ordered({s.label for s in p.spans}, list(LABEL_COLOURS)):
        spans = [s for s in p.spans if s.label == label]
        fig.add_trace(go.Bar(
            name=label, orientation="h", y=[_row_name(row_of(s, streams)) for s in spans],
            base=[1e3 * s.start_s for s in spans], x=[1e3 * (s.end_s - s.start_s) for s in spans],
            marker={"color": LABEL_COLOURS.get(label, OTHER_COLOUR), "line": {"width": 0}},
            customdata=[[s.name, _size_text(s.size_bytes), 1e3 * s.start_s, 1e3 * (s.end_s - s.start_s)]
                        for s in spans],
            hovertemplate=("<b>%{customdata[0]}</b> (" + label + ")<br>start %{customdata[2]:.3f} ms, "
                           "duration %{customdata[3]:.3f} ms<br>size %{customdata[1]}<extra></extra>")))
    fig.update_layout(
        template=TEMPLATE, barmode="overlay", bargap=0.25, height=140 + 70 * len(rows),
        margin=MARGIN, title="Step timeline (representative GPU)",
        legend={"orientation": "h", "y": -0.35},
        xaxis={"title": "time since the step started (ms)", "range": [0, 1e3 * p.step_time_s]},
        yaxis={"categoryorder": "array", "categoryarray": rows, "autorange": "reversed"})
    return fig


def time_breakdown_figure(p: StepPrediction) -> go.Figure:
    """Where the critical GPU's step went (donut), and its idle time by cause (bars, ms)."""
    other_idle_s = max(0.0, p.critical_idle_s - p.exposed_comm_s)
    idle_parts = [(f"waiting on {name}", seconds, LABEL_COLOURS.get(name, OTHER_COLOUR))
                  for name, seconds in sorted(p.comm_by_collective_s.items())]
    idle_parts.append(("other idle", other_idle_s, "#BAB0AC"))
    parts = [("compute", p.compute_s, "#4C78A8"), *idle_parts]
    fig = make_subplots(rows=1, cols=2, specs=[[{"type": "domain"}, {"type": "xy"}]], column_widths=[0.4, 0.6],
                        subplot_titles=("the step", "GPU idle time by cause"))
    fig.add_trace(go.Pie(labels=[n for n, _, _ in parts], values=[s for _, s, _ in parts], hole=0.5, sort=False,
                         marker={"colors": [c for _, _, c in parts]}, textinfo="label+percent", textposition="inside",
                         showlegend=False,
                         hovertemplate="%{label}: %{value:.4f} s (%{percent})<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=[1e3 * s for _, s, _ in idle_parts], y=[n for n, _, _ in idle_parts], orientation="h",
                         marker={"color": [c for _, _, c in idle_parts]}, showlegend=False,
                         text=[f"{1e3 * s:.2f} ms" for _, s, _ in idle_parts], textposition="auto",
                         hovertemplate="%{y}: %{x:.3f} ms<extra></extra>"), row=1, col=2)
    fig.update_xaxes(title_text="ms per step", row=1, col=2)
    fig.update_yaxes(autorange="reversed", row=1, col=2)
    fig.update_layout(template=TEMPLATE, height=360, margin={**MARGIN, "t": 80},
                      title="Where the step's time went", uniformtext={"minsize": 10, "mode": "hide"})
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
                  annotation={"text": f"capacity {capacity_gib:.0f} GiB", "font": {"color": colour}})
    fig.update_layout(
        template=TEMPLATE, barmode="stack", height=260, margin=MARGIN,
        title={"text": f"Memory per GPU: {m.total_bytes / GIB:.1f} GiB of {capacity_gib:.0f} GiB, {verdict}",
               "font": {"color": colour}},
        legend={"orientation": "h", "y": -0.45, "traceorder": "normal"},
        xaxis={"title": "GiB", "range": [0, 1.08 * max(m.total_bytes / GIB, capacity_gib)]})
    return fig


def utilisation_figure(p: StepPrediction, bins: int = UTILISATION_BINS) -> go.Figure:
    """Heatmap of stream_utilisation: time bins across, streams down, busy fraction as colour."""
    streams, edges, busy = stream_utilisation(p.spans, p.step_time_s, bins)
    centres_ms = 1e3 * (edges[:-1] + edges[1:]) / 2
    fig = go.Figure(go.Heatmap(
        z=busy, x=centres_ms, y=[_row_name(s) for s in streams], zmin=0.0, zmax=1.0,
        colorscale="Blues", colorbar={"title": "busy"},
        hovertemplate="%{y}<br>around %{x:.1f} ms: busy %{z:.0%}<extra></extra>"))
    fig.update_layout(template=TEMPLATE, height=120 + 60 * len(streams), margin=MARGIN,
                      title=f"Stream utilisation ({bins} time bins)",
                      xaxis={"title": "time since the step started (ms)"}, yaxis={"autorange": "reversed"})
    return fig


def _log2_nodes_axis(nodes: list[int]) -> dict[str, object]:
    """A log x axis with a tick at each node count (node counts are usually powers of two)."""
    low, high = math.log10(min(nodes)), math.log10(max(nodes))
    pad = max(0.05, 0.05 * (high - low))
    return {"type": "log", "title": "nodes (log2 scale)", "tickvals": nodes, "ticktext": [str(n) for n in nodes],
            "range": [low - pad, high + pad]}


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
                      xaxis=_log2_nodes_axis(nodes), yaxis={"title": "% of the first row", "range": y_range})
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
                      title="Throughput", xaxis=_log2_nodes_axis(nodes),
                      yaxis={"title": "tokens/s (log)", "type": "log"}, legend={"x": 0.02, "y": 0.98})
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
