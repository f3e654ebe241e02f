"""The results of predict, scale, plan, compare, sweep, collective and validate: frozen, plain data, records,
figures, and numbers that agree with each other and with hand-computed values."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from simulator import ConfigError, Scenario, collective, compare, plan, predict, scale, sweep, validate

FIXTURES = Path(__file__).resolve().parents[1] / "measurements" / "fixtures"
SMALL = Scenario(model="llama2-7b", nodes=1, micro_batch=1, seq_len=1024)


def test_a_prediction_is_frozen_and_its_json_is_its_dict():
    """Results are frozen dataclasses; to_json() is json.dumps(to_dict())."""
    p = predict(SMALL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.step_time_s = 1.0  # type: ignore[misc]
    assert json.loads(p.to_json()) == p.to_dict()
    assert p.tokens_per_s == pytest.approx(p.tokens_per_step / p.step_time_s)


def test_a_run_section_adds_the_time_to_train_through_failures():
    """A scenario with `run` predicts the Monte Carlo too: P50 at least the failure-free time, which is whole
    steps of the predicted step (so within one step of tokens / throughput)."""
    p = predict(SMALL.replace(run={"train_tokens": 1e9, "runs": 20}))
    assert p.run is not None and p.train_tokens == 1e9
    assert p.run["time_to_train_s"] >= p.run["failure_free_s"]
    assert 0.0 <= p.run["failure_free_s"] - p.time_to_train_s < p.step_time_s


def test_a_bad_price_is_one_line():
    """A negative price per GPU-hour raises ConfigError naming it."""
    with pytest.raises(ConfigError, match="usd_per_gpu_hour"):
        predict(SMALL, usd_per_gpu_hour=-1.0)


def test_the_trace_is_chrome_trace_data():
    """`trace()` gives Chrome Trace Event data with the step's spans."""
    trace = predict(SMALL).trace()
    assert any(event.get("ph") == "X" for event in trace["traceEvents"])


def test_scaling_rows_and_records():
    """The first row's efficiency is 1 by definition; each row's prediction is the one it reports."""
    s = scale(SMALL, nodes=[1, 2])
    records = s.to_records()
    assert [r["nodes"] for r in records] == [1, 2] and records[0]["scaling_efficiency"] == 1.0
    assert records[1]["scaling_efficiency"] == pytest.approx(
        s.predictions[1].tokens_per_s_per_gpu / s.predictions[0].tokens_per_s_per_gpu)
    assert s.predictions[1].step_time_s == records[1]["step_time_s"]


def test_a_planned_layout_predicts_its_own_step():
    """The best layout's scenario, predicted, gives the step time the search reported for it."""
    result = plan(Scenario(model="llama2-7b", nodes=1, seq_len=1024, global_batch=16), micro_batches=(1, 2),
                  strategies=("zero1", "fsdp"), recompute=("none",), keep=3, workers=1)
    assert result.layouts and result.to_records()[0]["rank"] == 1
    assert predict(result.best.scenario).step_time_s == pytest.approx(result.best.step_time_s, rel=1e-9)
    assert [lay.step_time_s for lay in result.layouts] == sorted(lay.step_time_s for lay in result.layouts)


def test_a_bad_plan_option_is_one_line():
    """An unknown strategy in the search space raises ConfigError naming it and the valid ones."""
    with pytest.raises(ConfigError, match="zero9.*ddp"):
        plan(SMALL, strategies=("zero9",))


def test_compare_names_what_changed():
    """Each variant's differences name the field it changes; the base's change is nothing."""
    c = compare(SMALL, SMALL.replace(strategy="zero2"), labels=["base", "zero2"])
    assert c.differences[0] == () and c.differences[1] == ("training.strategy.kind: fsdp -> zero2",)
    rows = c.to_records()
    assert rows[0]["step_time_s_change"] == 0.0 and rows[1]["label"] == "zero2"
    assert c.to_dict()["scenarios"][1]["step_time_s"] == c.predictions[1].step_time_s


def test_compare_needs_two_scenarios():
    """One scenario is not a comparison: ConfigError."""
    with pytest.raises(ConfigError, match="at least two"):
        compare(SMALL)


def test_collective_busbw_is_the_nccl_tests_factor():
    """all_reduce busbw = algbw x 2(n-1)/n (nccl-tests' PERFORMANCE.md); algbw = size / time."""
    c = collective("dgx-h100", 2, min_bytes="1M", max_bytes="4M")
    assert c.ranks == 16 and [r["size_bytes"] for r in c.to_records()] == [2**20, 2**21, 2**22]
    for row in c.rows:
        assert row.algbw_GBps == pytest.approx(row.size_bytes / row.time_us / 1e3)
        assert row.busbw_GBps == pytest.approx(row.algbw_GBps * 2 * 15 / 16)


def test_collective_takes_nccl_tests_tool_names():
    """op spelled as nccl-tests names its tools (allreduce, all_gather_perf) is that collective."""
    assert collective(op="allreduce", min_bytes="1M", max_bytes="1M").rows == collective(
        op="all_reduce", min_bytes="1M", max_bytes="1M").rows
    assert collective(op="all_gather_perf", min_bytes="1M", max_bytes="1M").op == "all_gather"


@pytest.mark.parametrize(("options", "needle"), [
    ({"op": "allredux"}, "all_reduce"), ({"sizes": [0, 8]}, "sizes"), ({"min_bytes": "1Q"}, "min_bytes"),
])
def test_collective_refuses_bad_input(options, needle):
    """An unknown collective, a size of 0, a size that does not parse: one-line ConfigError naming it."""
    with pytest.raises(ConfigError) as caught:
        collective(**options)
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_validate_reports_every_row():
    """Each measured row of the fixture manifest becomes a record; the signed error agrees with the times."""
    v = validate(FIXTURES / "published_manifest.yaml")
    report = v.to_dict()
    assert len(v.rows) == report["points"] == sum(log["points"] for log in report["logs"])
    for row in v.rows:
        assert row.error_pct == pytest.approx(100 * (row.predicted_time_us / row.measured_time_us - 1))


def test_validate_one_log_is_its_manifest_entry():
    """One log and its cluster's fields, without a manifest, give the rows its manifest entry gives."""
    file = "nccl_tests_abridged_devices_2x8.txt"
    cluster = {"gpu": "H100-SXM5-80GB", "gpus_per_node": 8, "intra_node": "nvswitch-nvlink4",
               "inter_node": {"transport": "ib", "nics_per_node": 8, "nic_gbps": 400}}
    with pytest.warns(UserWarning, match="abridged"):
        alone = validate(log=FIXTURES / file, topology=cluster, nodes=2, op="allreduce")
    listed = [row for row in validate(FIXTURES / "published_manifest.yaml").rows if row.file == file]
    assert alone.rows == tuple(listed) and len(listed) == 5


@pytest.mark.parametrize(("options", "needle"), [
    ({}, "give a manifest"),
    ({"manifest": FIXTURES / "published_manifest.yaml", "log": FIXTURES / "nccl_tests_all_reduce_2x8.json"},
     "not both"),
    ({"log": FIXTURES / "nccl_tests_all_reduce_2x8.json"}, "topology"),
    ({"manifest": FIXTURES / "published_manifest.yaml", "nodes": 2}, "describe one log"),
    ({"log": FIXTURES / "nccl_tests_all_reduce_2x8.json", "topology": "dgx-h100", "nodes": 2, "run": 0},
     "runs are counted from 1"),
])
def test_validate_refuses_a_log_without_its_cluster(options, needle):
    """A manifest or a log (with its cluster), one at a time: one-line ConfigError naming what is missing."""
    with pytest.raises(ConfigError, match=needle):
        validate(**options)


def test_sweep_rows_in_the_sweep_order():
    """A two-point sweep gives one row per point, in its axis order, with the metrics filled in."""
    spec = {"base": {"topology": "dgx-h100", "nodes": 1,
                     "training": {"model": "llama2-7b", "seq_len": 1024, "micro_batch": 1}},
            "axes": {"training.strategy.kind": ["fsdp", "zero2"]}}
    result = sweep(spec, workers=1)
    assert [r["training.strategy.kind"] for r in result.to_records()] == ["fsdp", "zero2"]
    assert all(r["error"] is None and r["step_time_s"] > 0 for r in result.rows)
    assert result.axes == ("training.strategy.kind",)


@pytest.mark.parametrize("make", [
    lambda: predict(SMALL), lambda: scale(SMALL, nodes=[1, 2]), lambda: collective(min_bytes="1M", max_bytes="2M"),
    lambda: compare(SMALL, SMALL.replace(strategy="zero2")),
])
def test_figures_are_plotly_figures(make):
    """`figure()` builds a plotly Figure with at least one trace."""
    figure = make().figure()
    assert type(figure).__name__ == "Figure" and len(figure.data) >= 1
