"""The report's figures: the repeated micro-steps as a band to the step's end, every part of the step
labelled with its time and share, hover text in plain language."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.report import figures
from simulator.scenario import DEFAULT_SCENARIO, resolve_scenario
from simulator.training.predict import predict_step
from simulator.training.prediction import MemoryBreakdown, StepPrediction
from simulator.training.timeline import RepeatedMicroSteps, Span


@pytest.fixture(scope="module")
def prediction() -> StepPrediction:
    topology, training, model = resolve_scenario(DEFAULT_SCENARIO)
    return predict_step(topology, training, model)


def _step(repeated: RepeatedMicroSteps | None, step_time_s: float = 6.0) -> StepPrediction:
    """A hand-made step: two compute spans and a reduction to 1.08 s, then `repeated`."""
    spans = (Span("m0.fwd0", "compute", "forward", 0.0, 0.5), Span("m0.bwd0", "compute", "backward", 0.5, 1.0),
             Span("m0.rs0", "rs", "reduce_scatter", 0.6, 1.08, 1 << 20))
    return StepPrediction(step_time_s=step_time_s, compute_s=5.9, exposed_comm_s=0.09,
                          idle_breakdown_s={}, tokens_per_step=1, n_gpus=8, model_flops_per_step=1.0,
                          peak_tflops=1.0, memory=MemoryBreakdown(1, 1, 1, 1, 1, 1), memory_capacity_bytes=1e12,
                          comm_by_collective_s={"reduce_scatter": 0.09}, spans=spans, repeated=repeated)


def _band(fig):
    return [trace for trace in fig.data if trace.name == figures.REPEATED_NAME]


def test_band_label_by_hand():
    """3 simulated micro-steps, then 12 repeats of 0.41 s: micro-steps 3-14, 12 x 410 ms, 4.92 s in all."""
    p = _step(RepeatedMicroSteps(simulated=3, period=1, periods=12, period_s=0.41))
    assert figures.repeated_text(p) == "micro-steps 3-14 repeat the simulated steady state: 12 x 410 ms"
    assert p.repeated is not None and p.repeated.total_s == pytest.approx(4.92)
    assert figures.simulated_s(p) == pytest.approx(6.0 - 4.92)
    periods = _step(RepeatedMicroSteps(simulated=10, period=2, periods=5, period_s=1.5))
    assert figures.repeated_text(periods) == ("micro-steps 10-19 repeat the simulated steady state: "
                                              "5 x 2 micro-steps x 1.5 s")


def test_band_spans_from_the_spans_end_to_the_step_time():
    """The band covers every row from the last span's end (1.08 s) to the step time (6 s), the x axis
    is the whole step, and the annotation says what the band stands for."""
    fig = figures.timeline_figure(_step(RepeatedMicroSteps(3, 1, 12, 0.41)))
    (band,) = _band(fig)
    assert set(band.y) == {"compute stream", "NCCL stream: reductions"}
    for base, width in zip(band.base, band.x, strict=True):
        assert base == pytest.approx(1080.0) and base + width == pytest.approx(6000.0)
    assert tuple(fig.layout.xaxis.range) == pytest.approx((0.0, 6000.0))
    assert "micro-steps 3-14 repeat" in fig.layout.annotations[0].text


def test_no_band_when_the_spans_are_the_whole_step():
    """Without repeated micro-steps (or with zero periods) no band and no annotation."""
    for repeated in (None, RepeatedMicroSteps(3, 1, 0, 0.41)):
        fig = figures.timeline_figure(_step(repeated, step_time_s=1.08))
        assert not _band(fig) and not fig.layout.annotations


def test_predicted_band_ends_at_the_predicted_step(prediction):
    """The default job (4 micro-steps, 3 simulated): its band starts where its spans end and ends at
    step_time_s, so the drawn step is the predicted one."""
    assert prediction.repeated is not None and prediction.repeated.simulated == 3
    (band,) = _band(figures.timeline_figure(prediction))
    drawn_s = max(span.end_s for span in prediction.spans)
    assert band.base[0] == pytest.approx(1e3 * drawn_s)
    assert band.base[0] + band.x[0] == pytest.approx(1e3 * prediction.step_time_s)


def test_utilisation_covers_the_simulated_micro_steps():
    """The heatmap's bins span the simulated part (1.08 s), not the repeated tail, which would read as idle."""
    fig = figures.utilisation_figure(_step(RepeatedMicroSteps(3, 1, 12, 0.41)), bins=4)
    assert max(fig.data[0].x) == pytest.approx(1e3 * 1.08 * 7 / 8)
    assert "simulated micro-steps 0-2" in fig.layout.title.text


def test_timeline_hover_names_tasks_in_plain_language():
    """A bar's hover title is its task's plain name; the task id is kept beside it."""
    fig = figures.timeline_figure(_step(None, step_time_s=1.08))
    forward = next(trace for trace in fig.data if trace.name == "forward")
    assert forward.customdata[0][0] == "forward, block 0, micro-batch 0" and forward.customdata[0][4] == "m0.fwd0"


def test_every_part_of_the_step_is_labelled_with_seconds_and_share():
    """compute 5.9 s of 6 s (98.3%), waiting on reduce_scatter 90 ms (1.5%), other idle 10 ms (0.17%):
    each part is a segment of the step's bar named with its time and share, the segments sum to the step."""
    fig = figures.time_breakdown_figure(_step(None))
    names = [trace.name for trace in fig.data if trace.orientation == "h" and list(trace.y) == ["step"]]
    assert names == ["compute: 5.9 s (98.3%)", "waiting on reduce_scatter: 90 ms (1.5%)",
                     "other idle: 10 ms (0.17%)"]
    segments = [trace.x[0] for trace in fig.data if list(trace.y) == ["step"]]
    assert sum(segments) == pytest.approx(6.0)
    idle = fig.data[-1]
    assert list(idle.text) == ["90 ms (1.5%)", "10 ms (0.17%)"]


@pytest.mark.parametrize(("part", "whole", "text"), [(96.1, 100, "96.1%"), (0.42, 100, "0.42%"),
                                                     (0.003, 100, "0.003%"), (1e-7, 100, "<0.001%"), (0, 1, "0.0%")])
def test_small_shares_keep_their_digits(part, whole, text):
    """A share under 1% keeps two significant digits instead of rounding to 0.0%."""
    assert figures._percent_text(part, whole) == text


def test_scale_figures_use_readable_log_ticks(prediction):
    """Node counts 1..2048 (12 of them): at most 10 labelled ticks, plain integers; tokens/s with SI labels."""
    rows = [(n, replace(prediction, n_gpus=8 * n, tokens_per_step=n * prediction.tokens_per_step))
            for n in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)]
    fig = figures.throughput_figure(rows)
    assert list(fig.layout.xaxis.ticktext) == ["1", "4", "16", "64", "256", "1,024"]
    assert fig.layout.yaxis.type == "log" and all(t[-1] in "0123456789kMGT" for t in fig.layout.yaxis.ticktext)


def test_pipeline_band_accounts_for_the_micro_batches_not_simulated():
    """A 1F1B pipeline of 64 micro-batches is simulated in part: the simulated micro-steps and the repeated
    ones make 64, and the spans' end plus what the repeats add is the step time."""
    training = DEFAULT_SCENARIO.training
    training = training.model_copy(update={"global_batch": 2048, "strategy": training.strategy.model_copy(
        update={"kind": "zero1"}), "parallel": training.parallel.model_copy(update={"pp": 2})})
    topology, resolved, model = resolve_scenario(DEFAULT_SCENARIO.model_copy(update={"training": training}))
    p = predict_step(topology, resolved, model)
    r = p.repeated
    assert r is not None and r.periods > 0 and r.simulated + r.micro_steps == 64
    assert max(span.end_s for span in p.spans) + r.total_s == pytest.approx(p.step_time_s, rel=1e-9)
    (band,) = _band(figures.timeline_figure(p))
    assert band.base[0] + band.x[0] == pytest.approx(1e3 * p.step_time_s)
