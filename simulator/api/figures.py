"""The plotly figures of the API's results (`result.figure()`): this module imports plotly, and is itself
imported only when a figure is asked for. Step, scaling and comparison figures are the HTML report's
(simulator.report.figures)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from simulator.report import figures
from simulator.training.prediction import StepPrediction

if TYPE_CHECKING:
    from simulator.api.collective import CollectivePrediction
    from simulator.api.comparison import Comparison
    from simulator.api.measured import Calibration, CrossValidation, Validation
    from simulator.api.planning import Plan
    from simulator.api.prediction import Prediction, Scaling
    from simulator.api.sweeping import SweepResult

TEMPLATE = figures.TEMPLATE
GB = 1e9


def _step(p: Prediction) -> StepPrediction:
    if p._step is None:
        raise ValueError("this Prediction was built from data: its figure needs the prediction itself")
    return p._step


def prediction_figure(p: Prediction) -> go.Figure:
    """Where the critical GPU's step went (compute, waits by collective, other idle)."""
    return figures.time_breakdown_figure(_step(p))


def scaling_figure(s: Scaling) -> go.Figure:
    """Scaling efficiency against node count."""
    return figures.scaling_figure([(row.nodes, _step(p)) for row, p in zip(s.rows, s.predictions, strict=True)])


def comparison_figure(c: Comparison) -> go.Figure:
    """Each scenario's step: compute and idle time of the critical GPU."""
    return figures.compare_figure([(label, _step(p)) for label, p in zip(c.labels, c.predictions, strict=True)])


def plan_figure(plan: Plan) -> go.Figure:
    """Step time of each ranked layout, best at the top."""
    layouts = plan.layouts
    fig = go.Figure(go.Bar(x=[lay.step_time_s for lay in layouts], y=[f"{lay.rank}. {lay.description}"
                                                                      for lay in layouts], orientation="h",
                           customdata=[100 * lay.mfu for lay in layouts],
                           hovertemplate="%{y}: %{x:.3f} s, MFU %{customdata:.1f}%<extra></extra>"))
    fig.update_layout(template=TEMPLATE, title=f"{plan.model} on {plan.n_gpus} GPUs: step time by layout",
                      xaxis_title="step time (s)", yaxis={"autorange": "reversed"},
                      height=160 + 28 * len(layouts))
    return fig


def collective_figure(c: CollectivePrediction) -> go.Figure:
    """Bus bandwidth against size (log), the algorithm and protocol in the hover."""
    fig = go.Figure(go.Scatter(x=[r.size_bytes for r in c.rows], y=[r.busbw_GBps for r in c.rows],
                               mode="lines+markers", customdata=[[r.algo, r.proto, r.time_us] for r in c.rows],
                               hovertemplate="%{x} B: %{y:.1f} GB/s, %{customdata[2]:.1f} µs "
                               "(%{customdata[0]}/%{customdata[1]})<extra></extra>"))
    fig.update_layout(template=TEMPLATE, title=f"{c.op} on {c.topology or 'cluster'}: {c.ranks} ranks",
                      xaxis={"type": "log", "title": "size (bytes)"}, yaxis_title="busbw (GB/s)")
    return fig


def sweep_figure(r: SweepResult, metric: str = "tokens_per_s_per_gpu") -> go.Figure:
    """`metric` against the first axis, one line for each combination of the other axes."""
    if not r.axes:
        raise ValueError("a sweep of explicit scenarios has no axis to plot against")
    first, others = r.axes[0], r.axes[1:]
    lines: dict[str, list[dict[str, object]]] = defaultdict(list)
    for row in r.rows:
        if row["error"] is None:
            lines[", ".join(f"{axis}={row[axis]}" for axis in others) or metric].append(row)
    fig = go.Figure()
    for name, rows in lines.items():
        fig.add_trace(go.Scatter(x=[row[first] for row in rows], y=[row[metric] for row in rows],
                                 mode="lines+markers", name=name))
    fig.update_layout(template=TEMPLATE, title=f"{metric} by {first}", xaxis_title=first, yaxis_title=metric)
    return fig


def validation_figure(v: Validation) -> go.Figure:
    """Error on time against size, one series a log."""
    by_log: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for row in v.rows:
        by_log[row.file].append((row.size_bytes, row.error_pct))
    fig = go.Figure()
    for file, points in by_log.items():
        fig.add_trace(go.Scatter(x=[x for x, _ in points], y=[y for _, y in points], mode="markers", name=file,
                                 opacity=0.7))
    fig.update_layout(template=TEMPLATE, title="Error on time, (predicted - measured) / measured",
                      xaxis={"type": "log", "title": "size (bytes)"}, yaxis_title="error (%)")
    return fig


def calibration_figure(c: Calibration) -> go.Figure:
    """Each fitted parameter over its prior, one group of bars a hardware."""
    fig = go.Figure()
    by_hardware: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for p in c.parameters:
        if p.fitted and p.prior:
            by_hardware[p.hardware].append((p.name, p.value / p.prior))
    for hardware, values in by_hardware.items():
        fig.add_trace(go.Bar(x=[name for name, _ in values], y=[ratio for _, ratio in values], name=hardware))
    fig.update_layout(template=TEMPLATE, barmode="group", title="Fitted parameters over their priors",
                      yaxis_title="fitted / prior")
    return fig


def crossval_figure(c: CrossValidation) -> go.Figure:
    """Held-out median |error| (>= 1 MiB), prior against calibrated, a pair of bars a log."""
    files = [h.file for h in c.held_out]
    fig = go.Figure([go.Bar(x=files, y=[h.prior_ge_1MiB for h in c.held_out], name="prior"),
                     go.Bar(x=files, y=[h.calibrated_ge_1MiB for h in c.held_out], name="calibrated")])
    fig.update_layout(template=TEMPLATE, barmode="group", title="Held-out median |error| on time, sizes >= 1 MiB",
                      yaxis_title="median |error| (%)")
    return fig
