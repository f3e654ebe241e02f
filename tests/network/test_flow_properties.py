"""Invariants of the flow model, checked by hypothesis on random small networks.

Monotonicity in capacity is NOT a property of max-min sharing with completions in general (see
`test_more_capacity_can_delay_the_last_flow`): raising one link lets a flow take more of another
link from a longer flow. The claims tested are the ones that hold: (1) when every flow crosses a
single resource, each resource is a work-conserving server, so the time until all flows of a
transfer set finish never grows with any capacity, even with staggered latencies; (2) a single flow
class alone ends at latency + size / min(cap, min_r capacity_r / coefficient_r).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.network import FlowClass, FlowEngine, Resource, max_min_rates, uncontended_time_s

capacities = st.floats(min_value=0.5, max_value=100.0)
coefficients = st.floats(min_value=0.25, max_value=4.0)


@st.composite
def networks(
    draw: st.DrawFn, single_resource: bool = False, latency: bool = True
) -> tuple[list[Resource], list[FlowClass]]:
    """1-4 resources and 1-6 flow classes with random routes, sizes, caps, latencies, multiplicities."""
    n_resources = draw(st.integers(1, 4))
    resources = [Resource(f"r{i}", draw(capacities)) for i in range(n_resources)]
    flows = []
    for i in range(draw(st.integers(1, 6))):
        n_used = 1 if single_resource else draw(st.integers(1, n_resources))
        route = draw(st.permutations(range(n_resources)))[:n_used]
        usage = tuple((r, draw(coefficients)) for r in sorted(route))
        cap = None if single_resource else draw(st.none() | st.floats(min_value=0.5, max_value=50.0))
        flows.append(
            FlowClass(
                f"f{i}",
                draw(st.floats(min_value=0.0, max_value=1000.0)),
                usage,
                multiplicity=draw(st.integers(1, 8)),
                rate_cap_Bps=cap,
                latency_s=draw(st.floats(min_value=0.0, max_value=2.0)) if latency else 0.0,
            )
        )
    return resources, flows


def simulate(resources: list[Resource], flows: list[FlowClass]) -> FlowEngine:
    """Run one transfer of `flows` on a fresh engine."""
    engine = FlowEngine(resources)
    engine.transfer(flows)
    engine.run()
    return engine


@settings(max_examples=200, deadline=None)
@given(networks())
def test_bytes_are_conserved(net: tuple[list[Resource], list[FlowClass]]) -> None:
    """Bytes delivered = sum of multiplicity x size; bytes on each resource = sum of coefficient x size."""
    resources, flows = net
    engine = simulate(resources, flows)
    sent = sum(f.multiplicity * f.size_bytes for f in flows)
    assert engine.bytes_delivered() == pytest.approx(sent, rel=1e-9, abs=1e-9)
    for r in range(len(resources)):
        expected = sum(c * f.size_bytes for f in flows for i, c in f.usage if i == r)
        assert engine.bytes_moved(r) == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert len(engine.records) == len(flows)


@settings(max_examples=100, deadline=None)
@given(networks())
def test_same_input_gives_identical_records(net: tuple[list[Resource], list[FlowClass]]) -> None:
    """Determinism: two runs of the same transfer give bit-identical records in the same order."""
    resources, flows = net
    assert simulate(resources, flows).records == simulate(resources, flows).records


@settings(max_examples=200, deadline=None)
@given(networks())
def test_engine_equals_closed_form_when_alone(net: tuple[list[Resource], list[FlowClass]]) -> None:
    """One transfer on an idle engine ends when uncontended_time_s says (up to rounding)."""
    resources, flows = net
    end = max(r.end_s for r in simulate(resources, flows).records)
    assert uncontended_time_s(flows, resources) == pytest.approx(end, rel=1e-9, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(networks(single_resource=True))
def test_single_bottleneck_fast_path_equals_engine(net: tuple[list[Resource], list[FlowClass]]) -> None:
    """With one resource per flow, equal latency and no caps, L + max_r W_r / C_r is the engine's time."""
    resources, flows = net
    same_latency = [FlowClass(f.name, f.size_bytes, f.usage, f.multiplicity, None, 1e-3) for f in flows]
    end = max(r.end_s for r in simulate(resources, same_latency).records)
    assert uncontended_time_s(same_latency, resources) == pytest.approx(end, rel=1e-9, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(networks(single_resource=True), st.data())
def test_more_capacity_never_delays_single_resource_flows(
    net: tuple[list[Resource], list[FlowClass]], data: st.DataObject
) -> None:
    """Claim (1) of the module docstring: raising any capacity never delays the last flow's end."""
    resources, flows = net
    index = data.draw(st.integers(0, len(resources) - 1))
    factor = data.draw(st.floats(min_value=1.0, max_value=10.0))
    faster = list(resources)
    faster[index] = Resource("faster", resources[index].capacity_Bps * factor)
    before = max(r.end_s for r in simulate(resources, flows).records)
    after = max(r.end_s for r in simulate(faster, flows).records)
    assert after <= before * (1 + 1e-9) + 1e-12


@settings(max_examples=200, deadline=None)
@given(networks())
def test_single_class_time_is_latency_plus_size_over_bottleneck(
    net: tuple[list[Resource], list[FlowClass]],
) -> None:
    """Claim (2): one class alone ends at latency + size / min(cap, min_r C_r / coefficient_r)."""
    resources, flows = net
    flow = flows[0]
    bottleneck = min([resources[r].capacity_Bps / c for r, c in flow.usage] + [flow.rate_cap_Bps or np.inf])
    (record,) = simulate(resources, [flow]).records
    assert record.end_s == pytest.approx(flow.latency_s + flow.size_bytes / bottleneck, rel=1e-12)


def test_more_capacity_can_delay_the_last_flow() -> None:
    """Max-min is not monotone: raising r2 from 1 to 3 B/s moves the last end from 22/3 to 23/3 s.

    r0, r1, r2 = 3, 2, 1 B/s; f0 (2 B, coefficient 2 on r0, r1, r2), f1 (9 B, 2 on r0, 1 on r1).
    r2 = 1: f0 frozen at 0.5 by r2, f1 gets 1; f0 ends at 4 s, f1 has 5 B left at 1.5 B/s: 22/3 s.
    r2 = 3: r1 saturates first, both at 2/3; f0 ends at 3 s, f1 has 7 B left at 1.5 B/s: 23/3 s.
    """
    flows = [
        FlowClass("f0", 2.0, ((0, 2.0), (1, 2.0), (2, 2.0))),
        FlowClass("f1", 9.0, ((0, 2.0), (1, 1.0))),
    ]
    slow = [Resource("r0", 3.0), Resource("r1", 2.0), Resource("r2", 1.0)]
    fast = [Resource("r0", 3.0), Resource("r1", 2.0), Resource("r2", 3.0)]
    assert uncontended_time_s(flows, slow) == pytest.approx(22 / 3, rel=1e-12)
    assert uncontended_time_s(flows, fast) == pytest.approx(23 / 3, rel=1e-12)


@st.composite
def rate_problems(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Random (capacity, dense usage with zeros, active mask, caps) for max_min_rates."""
    n_resources, n_flows = draw(st.integers(1, 5)), draw(st.integers(1, 8))
    capacity = np.array([draw(st.sampled_from([0.0, 1.0, 2.0, 3.5, 10.0])) for _ in range(n_resources)])
    usage = np.array(
        [
            [draw(st.sampled_from([0.0, 0.0, 1.0, 2.0, 0.5])) for _ in range(n_resources)]
            for _ in range(n_flows)
        ]
    )
    active = np.array([draw(st.booleans()) for _ in range(n_flows)])
    caps = np.array([draw(st.sampled_from([np.inf, np.inf, 0.7, 3.0])) for _ in range(n_flows)])
    return capacity, usage, active, caps


@settings(max_examples=500, deadline=None)
@given(rate_problems())
def test_max_min_rates_are_feasible_and_every_flow_is_bottlenecked(
    problem: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> None:
    """Loads never exceed capacity, and each active flow is at its cap, unconstrained (inf), or has
    a saturated resource on which no flow has a higher rate (the max-min optimality condition)."""
    capacity, usage, active, caps = problem
    rates = max_min_rates(capacity, usage, active, caps)
    assert np.all(rates[~active] == 0.0)
    finite = np.where(np.isfinite(rates), rates, 0.0)
    load = usage.T @ finite
    assert np.all(load <= capacity * (1 + 1e-9) + 1e-12)
    for f in np.flatnonzero(active):
        if np.isinf(rates[f]):
            assert not usage[f].any() and caps[f] == np.inf
            continue
        if rates[f] >= caps[f] * (1 - 1e-12):
            continue
        bottlenecks = [
            r
            for r in np.flatnonzero(usage[f])
            if load[r] >= capacity[r] * (1 - 1e-9) - 1e-12
            and rates[f] >= finite[active & (usage[:, r] > 0)].max() * (1 - 1e-9)
        ]
        assert bottlenecks, f"flow {f} (rate {rates[f]}) has no bottleneck"
