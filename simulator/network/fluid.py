"""The fluid state of the active flows, shared by the SimPy engine and the closed-form event loop.

Between two events (a flow becomes active, a flow finishes) every active flow moves at its max-min
rate; at an event the rates are recomputed. This module owns that piecewise-constant bookkeeping
(remaining bytes, rates, bytes carried per resource) and the numerical rules that keep it finite:

- a flow finishes when its remaining bytes are within `FINISH_RTOL` of its size, or when the time it
  still needs is below the clock's resolution (`CLOCK_ULPS` units in the last place of now; event
  times carry about one unit of rounding). Flows that would finish within rounding of each other
  therefore finish in the same event, the loop never schedules a step too small to move the clock
  (no Zeno loop), and the residual bytes of a finished flow count as delivered;
- an active flow whose rate is 0 can never finish (capacities are constant): `NetworkError`.

Clock-agnostic: callers pass the current time; the engine uses SimPy's clock, the closed form a float.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simulator.network.flows import FlowClass, NetworkError
from simulator.network.maxmin import fill_rates

FINISH_RTOL = 1e-12
CLOCK_ULPS = 4.0


def clock_tolerance_s(now_s: float) -> float:
    """The smallest time step worth scheduling at time now_s: CLOCK_ULPS units in the last place."""
    return CLOCK_ULPS * float(np.spacing(abs(now_s)))


class FluidState:
    """Active flows as parallel arrays plus their usage in COO form (rows index the active flows)."""

    def __init__(self, capacity_Bps: np.ndarray) -> None:
        self.capacity_Bps = np.asarray(capacity_Bps, dtype=float)
        self.ids = np.zeros(0, dtype=np.intp)  # caller's flow ids, in admission order
        self.size = np.zeros(0)
        self.remaining = np.zeros(0)
        self.rate = np.zeros(0)
        self.cap = np.zeros(0)
        self.multiplicity = np.zeros(0)
        self.names: list[str] = []
        self.rows = np.zeros(0, dtype=np.intp)
        self.cols = np.zeros(0, dtype=np.intp)
        self.vals = np.zeros(0)
        self.bytes_per_resource = np.zeros(self.capacity_Bps.shape[0])  # bytes carried by one link
        self.bytes_delivered = 0.0  # sum over flows of multiplicity x bytes moved

    def admit(self, ids: Sequence[int], flows: Sequence[FlowClass]) -> None:
        """Make `flows` active (their latency is already paid); rates stay stale until `recompute`."""
        if not flows:
            return
        n_old = self.ids.shape[0]
        rows = [n_old + i for i, flow in enumerate(flows) for _ in flow.usage]
        self.rows = np.concatenate([self.rows, np.asarray(rows, dtype=np.intp)])
        self.cols = np.concatenate([self.cols, [r for flow in flows for r, _ in flow.usage]]).astype(np.intp)
        self.vals = np.concatenate([self.vals, [c for flow in flows for _, c in flow.usage]])
        sizes = np.array([flow.size_bytes for flow in flows], dtype=float)
        caps = [np.inf if flow.rate_cap_Bps is None else flow.rate_cap_Bps for flow in flows]
        self.ids = np.concatenate([self.ids, np.asarray(ids, dtype=np.intp)])
        self.size = np.concatenate([self.size, sizes])
        self.remaining = np.concatenate([self.remaining, sizes])
        self.rate = np.concatenate([self.rate, np.zeros(len(flows))])
        self.cap = np.concatenate([self.cap, np.asarray(caps, dtype=float)])
        self.multiplicity = np.concatenate([self.multiplicity, [float(f.multiplicity) for f in flows]])
        self.names.extend(flow.name for flow in flows)

    def advance(self, dt_s: float) -> None:
        """Move every active flow forward by dt_s at its current rate."""
        if dt_s <= 0.0 or self.ids.shape[0] == 0:
            return
        # Infinitely fast flows finish at the instant they start (dt 0); never multiply inf by dt.
        self._move(np.minimum(np.where(np.isfinite(self.rate), self.rate, 0.0) * dt_s, self.remaining))

    def _move(self, moved: np.ndarray) -> None:
        """Take `moved` bytes (per active flow) off the remaining bytes and account them."""
        self.remaining -= moved
        self.bytes_delivered += float(moved @ self.multiplicity)
        self.bytes_per_resource += np.bincount(
            self.cols, weights=self.vals * moved[self.rows], minlength=self.bytes_per_resource.shape[0]
        )

    def pop_finished(self, now_s: float) -> np.ndarray:
        """Remove the flows that are done at now_s (see module docstring); return their ids."""
        with np.errstate(divide="ignore", invalid="ignore"):
            time_left = np.where(self.rate > 0.0, self.remaining / self.rate, np.inf)
        done = (self.remaining <= FINISH_RTOL * self.size) | (time_left <= clock_tolerance_s(now_s))
        if not done.any():
            return np.zeros(0, dtype=np.intp)
        # A finished flow delivered all its bytes: the residual is rounding, not loss.
        self._move(np.where(done, self.remaining, 0.0))
        finished = self.ids[done]
        keep = ~done
        entry_keep = keep[self.rows]
        new_row = np.cumsum(keep) - 1
        self.rows = new_row[self.rows[entry_keep]]
        self.cols, self.vals = self.cols[entry_keep], self.vals[entry_keep]
        for name in ("ids", "size", "remaining", "rate", "cap", "multiplicity"):
            setattr(self, name, getattr(self, name)[keep])
        self.names = [n for n, k in zip(self.names, keep, strict=True) if k]
        return finished

    def settle(self, now_s: float, ids: Sequence[int], flows: Sequence[FlowClass]) -> np.ndarray:
        """One event at now_s (after `advance`): admit `flows`, drop finished ones, recompute rates.

        Returns the ids of the flows that finished at now_s.
        """
        self.admit(ids, flows)
        finished = self.pop_finished(now_s)
        if len(flows) or finished.size:
            self.recompute()
        return finished

    def recompute(self) -> None:
        """Max-min rates for the active flows; raise NetworkError if one can never finish."""
        everyone = np.ones(self.ids.shape[0], dtype=bool)
        self.rate = fill_rates(self.capacity_Bps, self.rows, self.cols, self.vals, self.cap, everyone)
        stalled = np.flatnonzero(self.rate <= 0.0)
        if stalled.size:
            i = int(stalled[0])
            used = self.cols[self.rows == i]
            dead = [int(r) for r in used if self.capacity_Bps[r] <= 0.0]
            raise NetworkError(
                f"flow {self.names[i]!r} gets rate 0 and can never finish: it uses zero-capacity "
                f"resource(s) {dead}; give them a capacity > 0 or route the flow around them"
            )

    def next_completion_s(self) -> float:
        """Time until the next active flow finishes at the current rates (inf if none is active)."""
        if self.ids.shape[0] == 0:
            return np.inf
        with np.errstate(divide="ignore"):
            return float(np.min(self.remaining / self.rate))
