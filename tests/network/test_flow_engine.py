"""FlowEngine on hand-computed scenarios: latency then max-min sharing, recomputed at each event."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest
import simpy

from simulator.network import FlowClass, FlowEngine, NetworkError, Resource


def link(capacity_Bps: float, name: str = "link") -> Resource:
    """One directed link."""
    return Resource(name, capacity_Bps)


def on(
    resource: int,
    size_bytes: float,
    name: str = "f",
    latency_s: float = 0.0,
    rate_cap_Bps: float | None = None,
) -> FlowClass:
    """A flow class crossing one resource with coefficient 1."""
    return FlowClass(name, size_bytes, ((resource, 1.0),), rate_cap_Bps=rate_cap_Bps, latency_s=latency_s)


def ends(engine: FlowEngine) -> dict[str, float]:
    """Flow name -> end time."""
    return {r.name: r.end_s for r in engine.records}


def test_one_flow_one_link_is_latency_plus_size_over_bandwidth() -> None:
    """One 1 GB flow on a 25 GB/s link with 5 us latency ends at 5e-6 + 1e9 / 25e9 s."""
    engine = FlowEngine([link(25e9)])
    engine.transfer([on(0, 1e9, latency_s=5e-6)])
    engine.run()
    (record,) = engine.records
    assert record.first_byte_s == 5e-6
    assert record.end_s == pytest.approx(5e-6 + 1e9 / 25e9, rel=1e-12)


def test_two_equal_flows_share_a_link_equally() -> None:
    """Two 10-byte flows on a 10 B/s link each get 5 B/s and both end at 2 s."""
    engine = FlowEngine([link(10.0)])
    engine.transfer([on(0, 10.0, "a"), on(0, 10.0, "b")])
    engine.run()
    assert ends(engine) == {"a": pytest.approx(2.0, rel=1e-12), "b": pytest.approx(2.0, rel=1e-12)}


def test_long_flow_speeds_up_when_short_one_finishes() -> None:
    """10 B and 30 B on a 10 B/s link: both at 5 B/s until 2 s, then the long one alone ends at 4 s."""
    engine = FlowEngine([link(10.0)])
    engine.transfer([on(0, 10.0, "short"), on(0, 30.0, "long")])
    engine.run()
    assert ends(engine) == {"short": pytest.approx(2.0, rel=1e-12), "long": pytest.approx(4.0, rel=1e-12)}


def test_latency_delays_activation_and_contention() -> None:
    """b (30 B) alone for 1 s at 10 B/s, then shares with a (10 B, latency 1 s): a ends 3 s, b 4 s."""
    engine = FlowEngine([link(10.0)])
    engine.transfer([on(0, 10.0, "a", latency_s=1.0), on(0, 30.0, "b")])
    engine.run()
    assert ends(engine) == {"a": pytest.approx(3.0, rel=1e-12), "b": pytest.approx(4.0, rel=1e-12)}


def test_transfers_started_at_different_times_contend() -> None:
    """A (20 B at t=0) alone moves 10 B by 1 s; B (5 B at t=1) shares 5 B/s: B ends 2 s, A 2.5 s."""
    engine = FlowEngine([link(10.0)])
    done: dict[str, float] = {}

    def submit(
        env: simpy.Environment, name: str, at_s: float, size: float
    ) -> Generator[simpy.Event, Any, None]:
        yield env.timeout(at_s)
        records = yield engine.transfer([on(0, size, name)])
        done[name] = records[0].end_s
        assert env.now == records[0].end_s

    engine.env.process(submit(engine.env, "A", 0.0, 20.0))
    engine.env.process(submit(engine.env, "B", 1.0, 5.0))
    engine.run()
    assert done == {"A": pytest.approx(2.5, rel=1e-12), "B": pytest.approx(2.0, rel=1e-12)}


def test_multiplicity_with_coefficient_equals_separate_flows() -> None:
    """A class of 4 members crossing one link (coefficient 4) = 4 separate flows on that link."""
    grouped = FlowEngine([link(8.0)])
    grouped.transfer([FlowClass("g", 6.0, ((0, 4.0),), multiplicity=4), on(0, 9.0, "other")])
    grouped.run()
    separate = FlowEngine([link(8.0)])
    separate.transfer([on(0, 6.0, f"m{i}") for i in range(4)] + [on(0, 9.0, "other")])
    separate.run()
    by_name = ends(separate)
    assert ends(grouped)["g"] == pytest.approx(by_name["m0"], rel=1e-12)
    assert ends(grouped)["other"] == pytest.approx(by_name["other"], rel=1e-12)
    assert grouped.bytes_moved(0) == pytest.approx(separate.bytes_moved(0), rel=1e-12)
    assert grouped.bytes_delivered() == pytest.approx(separate.bytes_delivered(), rel=1e-12)


def test_rate_cap_is_respected() -> None:
    """10 B capped at 2 B/s next to 20 B uncapped on 10 B/s: free gets 8 B/s (ends 2.5 s), capped 5 s.

    The capped flow does not speed up when the link frees: its cap, not the link, is its bottleneck.
    """
    engine = FlowEngine([link(10.0)])
    engine.transfer([on(0, 10.0, "capped", rate_cap_Bps=2.0), on(0, 20.0, "free")])
    engine.run()
    assert ends(engine) == {"capped": pytest.approx(5.0, rel=1e-12), "free": pytest.approx(2.5, rel=1e-12)}


def test_zero_capacity_resource_raises_instead_of_hanging() -> None:
    """A flow over a zero-capacity link can never finish: run() raises a NetworkError naming it."""
    engine = FlowEngine([link(0.0, "dead"), link(10.0)])
    engine.transfer([FlowClass("stuck", 1.0, ((1, 1.0), (0, 1.0)))])
    with pytest.raises(NetworkError, match="stuck.*zero-capacity resource"):
        engine.run()


def test_zero_size_and_unconstrained_flows_end_after_latency() -> None:
    """A zero-byte flow, and one with no usage and no cap (infinite rate), both end at their latency."""
    engine = FlowEngine([link(10.0)])
    engine.transfer([on(0, 0.0, "empty", latency_s=2.0), FlowClass("free", 5.0, (), latency_s=3.0)])
    engine.run()
    assert ends(engine) == {"empty": 2.0, "free": 3.0}


def test_empty_transfer_fires_immediately() -> None:
    """transfer([]) is an event that has already succeeded with no records."""
    engine = FlowEngine([link(10.0)])
    event = engine.transfer([])
    assert event.triggered and event.value == []


def test_bad_resource_index_raises() -> None:
    """A flow class naming a resource the engine does not have is rejected at transfer()."""
    engine = FlowEngine([link(10.0)])
    with pytest.raises(NetworkError, match=r"resource index\(es\) \[3\]"):
        engine.transfer([on(3, 1.0)])


def test_invalid_flow_class_raises() -> None:
    """Negative sizes, zero coefficients and zero rate caps are NetworkErrors at construction."""
    with pytest.raises(NetworkError, match="size_bytes"):
        FlowClass("x", -1.0, ())
    with pytest.raises(NetworkError, match="coefficients"):
        FlowClass("x", 1.0, ((0, 0.0),))
    with pytest.raises(NetworkError, match="rate_cap_Bps"):
        FlowClass("x", 1.0, (), rate_cap_Bps=0.0)


def test_shared_environment_with_a_compute_process() -> None:
    """A compute step of 1 s then a 10 B transfer on a 10 B/s link: the process resumes at 2 s."""
    env = simpy.Environment()
    engine = FlowEngine([link(10.0)], env=env)
    resumed: list[float] = []

    def stream(env: simpy.Environment) -> Generator[simpy.Event, Any, None]:
        yield env.timeout(1.0)
        yield engine.transfer([on(0, 10.0)])
        resumed.append(env.now)

    env.process(stream(env))
    engine.run()
    assert resumed == [pytest.approx(2.0, rel=1e-12)]


def test_nearly_equal_flows_finish_in_one_event() -> None:
    """Sizes equal within rounding (1 and 1 + 1e-13) finish together, not in a separate tiny step."""
    engine = FlowEngine([link(1.0)])
    engine.transfer([on(0, 1.0, "a"), on(0, 1.0 + 1e-13, "b")])
    engine.run()
    assert engine.records[0].end_s == engine.records[1].end_s == pytest.approx(2.0, rel=1e-12)


def test_late_clock_tiny_transfer_terminates() -> None:
    """At t = 1e9 s (clock ulp ~1.2e-7 s) a 1 us transfer ends at 1e9 + 1e-6 s within 4 ulps."""
    engine = FlowEngine([link(1e9)])
    engine.run(until=1e9)
    engine.transfer([on(0, 1e3)])
    engine.run()
    (record,) = engine.records
    assert record.end_s == pytest.approx(1e9 + 1e-6, abs=4 * 1.2e-7)
