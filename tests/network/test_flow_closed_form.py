"""The closed-form time of a transfer alone on an idle network, against hand-computed values."""

from __future__ import annotations

import pytest

from simulator.network import FlowClass, NetworkError, Resource, uncontended_time_s


def test_single_bottleneck_form() -> None:
    """Equal latency 1 s, one resource per flow: 1 + max(12 / 4, (2 x 5 + 6) / 8) = 4 s."""
    resources = [Resource("a", 4.0), Resource("b", 8.0)]
    flows = [
        FlowClass("x", 12.0, ((0, 1.0),), latency_s=1.0),
        FlowClass("y", 5.0, ((1, 2.0),), multiplicity=2, latency_s=1.0),
        FlowClass("z", 6.0, ((1, 1.0),), latency_s=1.0),
    ]
    assert uncontended_time_s(flows, resources) == pytest.approx(4.0, rel=1e-15)


def test_event_loop_with_staggered_latencies() -> None:
    """b (30 B) starts at 0, a (10 B) joins at 1 s on the same 10 B/s link: last end at 4 s."""
    flows = [FlowClass("a", 10.0, ((0, 1.0),), latency_s=1.0), FlowClass("b", 30.0, ((0, 1.0),))]
    assert uncontended_time_s(flows, [Resource("l", 10.0)]) == pytest.approx(4.0, rel=1e-12)


def test_classic_example_with_completions() -> None:
    """Links A, B, C = 1, 2, 3 B/s; f0 (1 B) on all three, f1, f2, f3 (3 B) on one each.

    Rates 0.5, 0.5, 1.5, 2.5: f3 ends at 1.2 s, f2 at 2 s; f0 and f1 hold A at 0.5 each until 2 s
    (1 B each), so f0 ends at 2 s and f1, then alone on A at 1 B/s, has 2 B left: ends at 4 s.
    """
    resources = [Resource("A", 1.0), Resource("B", 2.0), Resource("C", 3.0)]
    flows = [
        FlowClass("f0", 1.0, ((0, 1.0), (1, 1.0), (2, 1.0))),
        FlowClass("f1", 3.0, ((0, 1.0),)),
        FlowClass("f2", 3.0, ((1, 1.0),)),
        FlowClass("f3", 3.0, ((2, 1.0),)),
    ]
    assert uncontended_time_s(flows, resources) == pytest.approx(4.0, rel=1e-12)


def test_no_flows_take_no_time() -> None:
    """An empty set of flows takes 0 s."""
    assert uncontended_time_s([], [Resource("l", 1.0)]) == 0.0


def test_zero_capacity_raises() -> None:
    """Both the fast path and the event loop refuse a flow over a zero-capacity resource."""
    dead = [Resource("dead", 0.0)]
    with pytest.raises(NetworkError, match="zero-capacity"):
        uncontended_time_s([FlowClass("x", 1.0, ((0, 1.0),))], dead)
    with pytest.raises(NetworkError, match="zero-capacity"):
        uncontended_time_s([FlowClass("x", 1.0, ((0, 1.0),), rate_cap_Bps=1.0)], dead)
