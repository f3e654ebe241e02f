"""`predict --trace`: valid Chrome Trace Event JSON with spans for every stream."""

from __future__ import annotations

import json
import subprocess
import sys

from simulator.report.trace import trace_events
from simulator.training.timeline import Span

PHASES = {"X", "M", "C"}


def test_trace_is_valid_trace_event_json(tmp_path):
    """Every event has the Trace Event Format's required keys; complete events have a duration
    >= 0; the compute stream and both NCCL streams appear; spans on a stream do not overlap."""
    out = tmp_path / "step.json"
    result = subprocess.run([sys.executable, "-m", "simulator.cli.app", "predict", "--trace", str(out)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    trace = json.loads(out.read_text())
    events = trace["traceEvents"]
    assert events and trace["displayTimeUnit"] == "ms"
    for event in events:
        assert event["ph"] in PHASES and {"pid", "tid", "name"} <= set(event)
        if event["ph"] != "M":
            assert isinstance(event["ts"], float | int) and event["ts"] >= 0
        if event["ph"] == "X":
            assert event["dur"] >= 0
    threads = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert threads == {"compute stream", "NCCL stream: all-gather", "NCCL stream: reductions"}
    by_tid: dict[int, list[tuple[float, float]]] = {}
    for e in events:
        if e["ph"] == "X":
            by_tid.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_tid.values():
        spans.sort()
        assert all(a_end <= b_start + 1e-6 for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False))
    # the default job's 4 micro-steps are simulated for the first 3: the title says the drawn spans end before
    # the step and gives the step's time (a trace shorter than its step must say so)
    drawn = max(e["ts"] + e["dur"] for e in events if e["ph"] == "X") / 1e6
    step = json.loads(subprocess.run([sys.executable, "-m", "simulator.cli.app", "predict", "--json"],
                                     capture_output=True, text=True).stdout)["step_time_s"]
    title = next(e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name")
    assert drawn < step and f"the micro-steps simulated, to {drawn:.3f} s" in title and f"{step:.3f} s)" in title


def test_trace_to_a_missing_folder_is_a_clear_error(tmp_path):
    """--trace into a folder that does not exist: exit 2 naming the file."""
    target = tmp_path / "nope" / "step.json"
    result = subprocess.run([sys.executable, "-m", "simulator.cli.app", "predict", "--trace", str(target)],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "step.json" in result.stderr


def test_trace_expands_chosen_gpus_and_draws_link_load(tmp_path):
    """--trace-gpus 0,1,9: one process per node (nodes 0 and 1), one thread per GPU stream, each a
    copy of the representative timeline; counter tracks give the intra-node and NIC load in [0, 1.5]."""
    out = tmp_path / "step.json"
    result = subprocess.run([sys.executable, "-m", "simulator.cli.app", "predict", "--trace", str(out),
                             "--trace-gpus", "0,1,9"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    events = json.loads(out.read_text())["traceEvents"]
    threads = [e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
    assert len(threads) == 3 * 3 and threads[0] == "GPU 0: compute stream"
    assert {e["pid"] for e in events if e["ph"] == "X"} == {0, 1}
    per_thread: dict[tuple[int, int], int] = {}
    for e in events:
        if e["ph"] == "X":
            per_thread[(e["pid"], e["tid"])] = per_thread.get((e["pid"], e["tid"]), 0) + 1
    assert len(set(per_thread.values())) <= 3  # every GPU's copy of a stream has the same spans
    loads = [e["args"]["value"] for e in events if e["ph"] == "C" and e["name"].startswith("load:")]
    assert loads and all(0.0 <= value <= 1.5 for value in loads)


def test_trace_spans_have_plain_names_and_keep_the_task_id():
    """A span is named in plain language; its task id, label and bytes are in its args (folded and
    expanded traces alike)."""
    spans = (Span("m0.ag_fwd3", "ag", "all_gather", 0.0, 0.001, 4096),
             Span("m0.fwd3", "compute", "forward", 0.001, 0.002))
    for trace in (trace_events(spans, "t"), trace_events(spans, "t", expand=(0,))):
        events = {e["args"]["task"]: e for e in trace["traceEvents"] if e["ph"] == "X"}
        assert events["m0.ag_fwd3"]["name"] == "all-gather, block 3 forward, micro-batch 0"
        assert events["m0.ag_fwd3"]["args"] == {"task": "m0.ag_fwd3", "label": "all_gather", "size_bytes": 4096}
        assert events["m0.fwd3"]["name"] == "forward, block 3, micro-batch 0"
