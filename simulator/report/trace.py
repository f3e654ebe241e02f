"""Chrome Trace Event JSON of a simulated step, for Perfetto (ui.perfetto.dev) and chrome://tracing.

Format: the Trace Event Format (Google, "Trace Event Format" document): a JSON object with
`traceEvents`, a list of events with `ph` (phase), `ts` (microseconds), `pid`, `tid`, `name`.
Complete events (`ph: "X"`) carry `dur`; metadata events (`ph: "M"`) name processes and threads;
counter events (`ph: "C"`) draw tracks. One process is the representative GPU of the
data-parallel group (every rank runs the same timeline); one thread per stream (compute, the
all-gather stream, the reduction stream); a counter track shows how many collectives are in
flight.
"""

from __future__ import annotations

from typing import Any

from simulator.training.timeline import Span

STREAM_NAMES = {"compute": "compute stream", "ag": "NCCL stream: all-gather", "rs": "NCCL stream: reductions"}


def trace_events(spans: tuple[Span, ...], title: str) -> dict[str, Any]:
    """The trace of one step (see module docstring)."""
    streams = sorted({span.stream for span in spans}, key=lambda s: list(STREAM_NAMES).index(s)
                     if s in STREAM_NAMES else len(STREAM_NAMES))
    tid = {stream: index for index, stream in enumerate(streams)}
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": 0, "tid": 0, "name": "process_name", "args": {"name": title}},
    ]
    events += [{"ph": "M", "pid": 0, "tid": tid[s], "name": "thread_name", "args": {"name": STREAM_NAMES.get(s, s)}}
               for s in streams]
    changes: list[tuple[float, int]] = []
    for span in sorted(spans, key=lambda s: (s.start_s, s.name)):
        args: dict[str, Any] = {"label": span.label}
        if span.size_bytes:
            args["size_bytes"] = span.size_bytes
            changes += [(span.start_s, 1), (span.end_s, -1)]
        events.append({"ph": "X", "pid": 0, "tid": tid[span.stream], "name": span.name, "cat": span.label,
                       "ts": span.start_s * 1e6, "dur": (span.end_s - span.start_s) * 1e6, "args": args})
    in_flight = 0
    for time_s, delta in sorted(changes):
        in_flight += delta
        events.append({"ph": "C", "pid": 0, "tid": 0, "name": "collectives in flight", "ts": time_s * 1e6,
                       "args": {"collectives": in_flight}})
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"title": title}}
