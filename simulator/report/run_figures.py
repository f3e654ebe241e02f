"""Figures of a run through failures (`predict --train-tokens ... --report`): the distribution of finish
times over the Monte Carlo runs, and a waterfall from the failure-free time to the wall time."""

from __future__ import annotations

import plotly.graph_objects as go

from simulator.run.summary import RunPrediction

DAY = 86400.0

FINISH_CAPTION = (
    "Wall time to train on the given tokens in each Monte Carlo run (one seed each): failures strike at "
    "random (exponential gaps per component class), each throws away the work since the last checkpoint and "
    "costs a restart. The dashed lines are P10, P50 (time_to_train_s) and P90; the dotted one is the "
    "failure-free time.")
WATERFALL_CAPTION = (
    "From the failure-free training time to the mean wall time: blocking checkpoint saves, training thrown "
    "away by failures (since the last checkpoint), restarts (detection, rescheduling, reload) and waits for a "
    "repaired node when no hot spare was free. goodput_fraction = failure-free time / wall time.")


def finish_time_figure(r: RunPrediction) -> go.Figure:
    fig = go.Figure(go.Histogram(x=r.samples.wall_s / DAY, nbinsx=40, marker_color="#1F77B4", name="runs"))
    for q, name in ((10, "P10"), (50, "P50"), (90, "P90")):
        fig.add_vline(x=r.percentile_s(q) / DAY, line_dash="dash", annotation_text=name)
    fig.add_vline(x=r.params.work_s / DAY, line_dash="dot", line_color="#2CA02C", annotation_text="no failures")
    fig.update_layout(xaxis_title="days to train", yaxis_title="runs", bargap=0.05, height=380,
                      margin={"t": 30, "b": 40})
    return fig


def goodput_waterfall_figure(r: RunPrediction) -> go.Figure:
    lost = r.lost_s_by_cause
    labels = ["failure-free training", "checkpoint saves", "lost work", "restarts", "spare waits", "wall time"]
    values = [r.params.work_s, lost["checkpoint"], lost["lost_work"], lost["restart"], lost["spare_wait"]]
    days = [v / DAY for v in values]
    fig = go.Figure(go.Waterfall(x=labels, y=[*days, sum(days)], measure=["absolute", *["relative"] * 4, "total"],
                                 text=[f"{d:,.2f} d" for d in [*days, sum(days)]], textposition="outside"))
    fig.update_layout(yaxis_title="days", height=380, margin={"t": 30, "b": 40},
                      title=f"goodput {100 * r.goodput_fraction:.1f}%")
    return fig
