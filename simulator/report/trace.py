"""Chrome Trace Event JSON of a simulated step, for Perfetto (ui.perfetto.dev) and chrome://tracing.

Format: the Trace Event Format (Google, "Trace Event Format" document): a JSON object with
`traceEvents`, a list of events with `ph` (phase), `ts` (microseconds), `pid`, `tid`, `name`.
Complete events (`ph: "X"`) carry `dur`, a plain-language name (simulator.report.names) and the
task's id in `args.task`; metadata events (`ph: "M"`) name processes and threads;
counter events (`ph: "C"`) draw tracks. One process is the representative GPU of the
data-parallel group (every rank runs the same timeline); one thread per stream (compute, the
all-gather stream, the reduction stream); counter tracks show how many collectives are in flight
and how loaded the GPU's intra-node links, its node's NICs and its share of the spines are
(fraction of their achievable rate). Ranks are symmetric, so the timeline is folded into one
GPU, or with pipeline parallelism one GPU per stage (threads named by stage); `expand` lists
global GPU ranks to draw instead, one process per node and one thread per GPU stream, each a copy
of the representative timeline (without pipeline parallelism only).
"""

from __future__ import annotations

from typing import Any

from simulator.report.names import span_titles
from simulator.training.timeline import Span

STREAM_NAMES = {"compute": "compute stream", "tp": "NCCL stream: tensor / expert parallel",
                "cp": "NCCL stream: context-parallel ring",
                "ag": "NCCL stream: all-gather", "rs": "NCCL stream: reductions",
                "ar": "NCCL stream: all-reduce across replicas (HSDP)",
                "send": "NCCL stream: send to next stage", "send_back": "NCCL stream: send to previous stage"}


def _counters(spans: tuple[Span, ...]) -> list[dict[str, Any]]:
    """Counter events: collectives in flight, and each resource's load, at every change."""
    changes: list[tuple[float, str, float]] = []
    for span in spans:
        if span.size_bytes:
            changes += [(span.start_s, "collectives", 1.0), (span.end_s, "collectives", -1.0)]
        for resource, load in span.resource_load:
            changes += [(span.start_s, resource, load), (span.end_s, resource, -load)]
    level: dict[str, float] = {}
    events = []
    for time_s, track, delta in sorted(changes):
        level[track] = level.get(track, 0.0) + delta
        name = "collectives in flight" if track == "collectives" else f"load: {track} links"
        value = round(level[track], 9) if track == "collectives" else max(0.0, round(level[track], 6))
        events.append({"ph": "C", "pid": 0, "tid": 0, "name": name, "ts": time_s * 1e6,
                       "args": {"value": value}})
    return events


def trace_events(spans: tuple[Span, ...], title: str, expand: tuple[int, ...] = (),
                 gpus_per_node: int = 8) -> dict[str, Any]:
    """The trace of one step (see module docstring)."""
    if expand:
        return _expanded(spans, title, expand, gpus_per_node)
    streams = _ordered_streams(spans)
    stages = sorted({span.stage for span in spans})
    threads = [(stage, stream) for stage in stages for stream in streams
               if any(s.stage == stage and s.stream == stream for s in spans)]
    tid = {thread: index for index, thread in enumerate(threads)}
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": 0, "tid": 0, "name": "process_name", "args": {"name": title}},
    ]
    for stage, stream in threads:
        name = STREAM_NAMES.get(stream, stream)
        events.append({"ph": "M", "pid": 0, "tid": tid[stage, stream], "name": "thread_name",
                       "args": {"name": f"stage {stage}: {name}" if len(stages) > 1 else name}})
    titles = span_titles(spans)
    for span in sorted(spans, key=lambda s: (s.start_s, s.name)):
        events.append(_span_event(span, titles[span.name], 0, tid[span.stage, span.stream]))
    events += _counters(spans)
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"title": title}}


def _ordered_streams(spans: tuple[Span, ...]) -> list[str]:
    """The streams present, compute first, then the all-gather and the reduction streams."""
    order = list(STREAM_NAMES)
    return sorted({span.stream for span in spans}, key=lambda s: order.index(s) if s in order else len(order))


def _span_event(span: Span, title: str, pid: int, tid: int) -> dict[str, Any]:
    """A complete event named in plain language (simulator.report.names), the task's id in its args."""
    args: dict[str, Any] = {"task": span.name, "label": span.label}
    if span.size_bytes:
        args["size_bytes"] = span.size_bytes
    return {"ph": "X", "pid": pid, "tid": tid, "name": title, "cat": span.label,
            "ts": span.start_s * 1e6, "dur": (span.end_s - span.start_s) * 1e6, "args": args}


def _expanded(spans: tuple[Span, ...], title: str, ranks: tuple[int, ...], gpus_per_node: int) -> dict[str, Any]:
    """One process per node, one thread per GPU stream, for the chosen global ranks."""
    streams = _ordered_streams(spans)
    titles = span_titles(spans)
    events: list[dict[str, Any]] = []
    for node in sorted({rank // gpus_per_node for rank in ranks}):
        events.append({"ph": "M", "pid": node, "tid": 0, "name": "process_name",
                       "args": {"name": f"{title}: node {node}"}})
    for rank in ranks:
        node, local = divmod(rank, gpus_per_node)
        for index, stream in enumerate(streams):
            tid = local * len(streams) + index
            events.append({"ph": "M", "pid": node, "tid": tid, "name": "thread_name",
                           "args": {"name": f"GPU {rank}: {STREAM_NAMES.get(stream, stream)}"}})
            events += [_span_event(span, titles[span.name], node, tid) for span in spans if span.stream == stream]
    events += _counters(spans)
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"title": title, "ranks": list(ranks)}}
