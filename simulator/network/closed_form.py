"""Closed-form time of a set of flows that start together on an otherwise idle network.

This is the fast path that sweeps use instead of the SimPy engine when a transfer runs alone. It is
the same model as `FlowEngine` (latency first, then max-min sharing, rates recomputed at each start
and finish; see engine.py) evaluated by a plain event loop over the shared fluid state, so it agrees
with the engine up to floating-point rounding of the event times, for any flows.

Simple form. With common latency L, the time is at least L + max_r W_r / C_r, where
W_r = sum_f usage[f, r] * size_f is the work resource r must carry (one link of a group) and C_r its
capacity. It is *exact* when in addition no flow has a rate cap and every flow uses exactly one
resource: progressive filling then keeps each resource saturated while any of its flows is active
(its flows have no other bottleneck), so each resource drains its work at full capacity. That case
(a collective step whose flows cross one bottleneck group each) skips the event loop. Otherwise
max-min is not work-conserving across resources and the event loop is needed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simulator.network.flows import FlowClass, Resource, check_resource_indices
from simulator.network.fluid import FluidState, clock_tolerance_s


def uncontended_time_s(flows: Sequence[FlowClass], resources: Sequence[Resource]) -> float:
    """Seconds from a common start until the last of `flows` finishes, alone on `resources`.

    Equals the span FlowEngine gives for one `transfer(flows)` on an idle engine (up to rounding).
    Raises NetworkError when a flow can never finish (it uses a zero-capacity resource).
    """
    check_resource_indices(flows, len(resources))
    capacity = np.array([r.capacity_Bps for r in resources], dtype=float)
    simple = _single_bottleneck_time_s(flows, capacity)
    if simple is not None:
        return simple
    order = sorted(range(len(flows)), key=lambda i: (flows[i].latency_s, i))
    state = FluidState(capacity)
    now, k = 0.0, 0
    while True:
        horizon = now + clock_tolerance_s(now)
        arrived = []
        while k < len(order) and flows[order[k]].latency_s <= horizon:
            arrived.append(order[k])
            k += 1
        state.settle(now, arrived, [flows[i] for i in arrived])
        next_arrival = flows[order[k]].latency_s - now if k < len(order) else np.inf
        delay = min(state.next_completion_s(), next_arrival)
        if np.isinf(delay):  # nothing active, nothing to come: the last flow finished at `now`
            return now
        later = now + max(delay, 0.0)
        state.advance(later - now)
        now = later


def _single_bottleneck_time_s(flows: Sequence[FlowClass], capacity_Bps: np.ndarray) -> float | None:
    """L + max_r W_r / C_r when that is exact (see the module docstring); None otherwise."""
    if not flows:
        return 0.0
    latencies = {flow.latency_s for flow in flows}
    if len(latencies) != 1 or any(flow.rate_cap_Bps is not None or len(flow.usage) != 1 for flow in flows):
        return None
    cols = np.array([flow.usage[0][0] for flow in flows], dtype=np.intp)
    work = np.bincount(
        cols, weights=[flow.usage[0][1] * flow.size_bytes for flow in flows], minlength=capacity_Bps.size
    )
    if np.any(capacity_Bps[work > 0.0] <= 0.0):
        return None  # a stall: let the event loop raise the engine's error
    busy = np.divide(work, capacity_Bps, out=np.zeros_like(work), where=work > 0.0)
    return latencies.pop() + float(busy.max(initial=0.0))
