"""FlowEngine: the SimPy process that shares bandwidth among concurrent transfers over time.

Model (SimGrid's flow level, see flows.py): a flow class submitted at time t pays `latency_s`, then
becomes active and shares every resource it uses with all other active flows by max-min fairness
(maxmin.py). Rates change only when a flow becomes active or finishes, so between those events the
system is a fluid with constant rates (fluid.py). One controller process walks from event to event:
it waits on "next completion, next arrival, or a new transfer" with a single pending timeout, and
recomputes rates at each event. Cost grows with events x max-min rounds x non-zeros, not with bytes.

The engine can share a `simpy.Environment` with other processes (compute streams): `transfer()`
returns an event they can yield on. Caveat: SimPy cannot cancel a timeout, so a timeout superseded
by a new transfer stays in the queue and fires later with no effect; it can carry `env.now` past
the last flow's end (only when a new flow speeds up another, which max-min allows). Read times from
`records` or from the event's value, not from `env.now` after `run()`.
"""

from __future__ import annotations

import heapq
from collections.abc import Generator, Sequence
from typing import Any

import numpy as np
import simpy

from simulator.network.flows import FlowClass, FlowRecord, Resource, check_resource_indices
from simulator.network.fluid import FluidState, clock_tolerance_s


class FlowEngine:
    """Flow-level network simulation over `resources`; see the module docstring for the model."""

    def __init__(self, resources: Sequence[Resource], env: simpy.Environment | None = None) -> None:
        self.resources = tuple(resources)
        self.env = env if env is not None else simpy.Environment()
        self.records: list[FlowRecord] = []  # in completion order
        self._state = FluidState(np.array([r.capacity_Bps for r in self.resources], dtype=float))
        self._flows: list[FlowClass] = []  # indexed by flow id
        self._start_s: list[float] = []  # by flow id
        self._transfer_of: list[int] = []  # by flow id: index of its transfer
        self._unfinished: list[int] = []  # by transfer: flows still running
        self._done: list[simpy.Event] = []  # by transfer
        self._transfer_records: list[list[FlowRecord]] = []  # by transfer
        self._arrivals: list[tuple[float, int]] = []  # heap of (activation time, flow id)
        self._wakeup = self.env.event()
        self._controller: simpy.Process | None = None
        self._last_s = self.env.now

    def transfer(self, flows: Sequence[FlowClass]) -> simpy.Event:
        """Submit flows now; the returned event fires when all have finished, with their records."""
        check_resource_indices(flows, len(self.resources))
        done = self.env.event()
        self._done.append(done)
        self._transfer_records.append([])
        self._unfinished.append(len(flows))
        if not flows:
            return done.succeed([])
        now = float(self.env.now)
        for flow in flows:
            flow_id = len(self._flows)
            self._flows.append(flow)
            self._start_s.append(now)
            self._transfer_of.append(len(self._done) - 1)
            heapq.heappush(self._arrivals, (now + flow.latency_s, flow_id))
        if self._controller is None:
            self._last_s = now
            self._controller = self.env.process(self._control())
        if not self._wakeup.triggered:
            self._wakeup.succeed()
        return done

    def run(self, until: float | simpy.Event | None = None) -> None:
        """Run the (shared) environment, as `simpy.Environment.run`."""
        self.env.run(until=until)

    def bytes_moved(self, resource_index: int) -> float:
        """Bytes carried so far by one link of resource `resource_index` (sum of usage x rate x dt)."""
        return float(self._state.bytes_per_resource[resource_index])

    def bytes_delivered(self) -> float:
        """Bytes delivered so far to receivers: sum over flows of multiplicity x bytes moved."""
        return self._state.bytes_delivered

    def _control(self) -> Generator[simpy.Event, Any, None]:
        """The one controller: settle the fluid at each event, then wait for the next one."""
        state = self._state
        while True:
            now = float(self.env.now)
            state.advance(now - self._last_s)
            self._last_s = now
            arrived = self._pop_arrivals(now)
            self._finish(state.settle(now, arrived, [self._flows[i] for i in arrived]), now)
            next_arrival = self._arrivals[0][0] - now if self._arrivals else np.inf
            delay = min(state.next_completion_s(), next_arrival)
            self._wakeup = self.env.event()
            waits = [self._wakeup] if np.isinf(delay) else [self._wakeup, self.env.timeout(max(delay, 0.0))]
            yield self.env.any_of(waits)

    def _pop_arrivals(self, now: float) -> list[int]:
        """Ids of the flows whose latency has elapsed by now (within the clock's resolution)."""
        horizon = now + clock_tolerance_s(now)
        arrived = []
        while self._arrivals and self._arrivals[0][0] <= horizon:
            arrived.append(heapq.heappop(self._arrivals)[1])
        return arrived

    def _finish(self, flow_ids: np.ndarray, now: float) -> None:
        """Record finished flows and fire the events of transfers that are now complete."""
        for flow_id in flow_ids.tolist():
            flow, start = self._flows[flow_id], self._start_s[flow_id]
            first_byte = start + flow.latency_s
            record = FlowRecord(flow.name, start, first_byte, now, flow.size_bytes, flow.multiplicity)
            self.records.append(record)
            index = self._transfer_of[flow_id]
            self._transfer_records[index].append(record)
            self._unfinished[index] -= 1
            if self._unfinished[index] == 0:
                self._done[index].succeed(self._transfer_records[index])
