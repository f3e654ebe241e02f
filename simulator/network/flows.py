"""The vocabulary of the flow-level network model: resources, flow classes, flow records, errors.

A *resource* is anything with a capacity in bytes per second: one directed link, or a symmetry group
of identical links (then `capacity_Bps` is the capacity of one link of the group). A *flow class*
stands for `multiplicity` identical flows; each member moves `size_bytes`. Its `usage` lists, per
resource index, how much of that resource one unit of the per-member rate consumes. The coefficient
already folds in how many members of the class cross each link of a group (2.0 when two members
share every link), so the sharing constraint per resource r is

    sum_f usage[f, r] * rate[f] <= capacity[r]            (rate = per-member rate, bytes/s)

and `multiplicity` only counts bytes. The engine does not know about topologies: callers (routing,
collectives) compute the coefficients. Model as in SimGrid's flow-level network (Velho et al.,
"On the validity of flow-level TCP network models for grid and cloud simulations", TOMACS 2013):
latency is paid first, then bandwidth is shared by max-min fairness.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from simulator.core.errors import ClusterSimError


class NetworkError(ClusterSimError):
    """A flow cannot be simulated: bad flow or resource data, or a flow that can never finish."""


@dataclass(frozen=True)
class Resource:
    """A capacity-limited resource: a directed link or one link of a symmetry group of identical links."""

    name: str
    capacity_Bps: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.capacity_Bps) and self.capacity_Bps >= 0.0):
            raise NetworkError(
                f"resource {self.name!r}: capacity_Bps must be finite and >= 0, got {self.capacity_Bps!r}"
            )


@dataclass(frozen=True)
class FlowClass:
    """`multiplicity` identical transfers of `size_bytes` each: wait `latency_s`, then share bandwidth.

    `usage` is a tuple of (resource index, coefficient) pairs with distinct indices and coefficients
    > 0. `rate_cap_Bps` bounds the per-member rate (a per-channel protocol limit, a NIC's injection
    rate); without a cap and without usage a flow is infinitely fast, so callers should give one.
    """

    name: str
    size_bytes: float
    usage: tuple[tuple[int, float], ...]
    multiplicity: int = 1
    rate_cap_Bps: float | None = None
    latency_s: float = 0.0

    def __post_init__(self) -> None:
        where = f"flow class {self.name!r}"
        if not (math.isfinite(self.size_bytes) and self.size_bytes >= 0.0):
            raise NetworkError(f"{where}: size_bytes must be finite and >= 0, got {self.size_bytes!r}")
        if not (math.isfinite(self.latency_s) and self.latency_s >= 0.0):
            raise NetworkError(f"{where}: latency_s must be finite and >= 0, got {self.latency_s!r}")
        if self.multiplicity < 1:
            raise NetworkError(f"{where}: multiplicity must be >= 1, got {self.multiplicity!r}")
        if self.rate_cap_Bps is not None and not self.rate_cap_Bps > 0.0:
            raise NetworkError(f"{where}: rate_cap_Bps must be > 0 or None, got {self.rate_cap_Bps!r}")
        indices = [index for index, _ in self.usage]
        if len(set(indices)) != len(indices) or any(index < 0 for index in indices):
            raise NetworkError(f"{where}: usage indices must be distinct and >= 0, got {indices}")
        bad = [coef for _, coef in self.usage if not (math.isfinite(coef) and coef > 0.0)]
        if bad:
            raise NetworkError(f"{where}: usage coefficients must be finite and > 0, got {bad}")


def check_resource_indices(flows: Sequence[FlowClass], n_resources: int) -> None:
    """Raise NetworkError naming the first flow class that uses a resource index >= n_resources."""
    for flow in flows:
        bad = [index for index, _ in flow.usage if index >= n_resources]
        if bad:
            raise NetworkError(
                f"flow class {flow.name!r} uses resource index(es) {bad}; "
                f"valid indices are 0..{n_resources - 1}"
            )


@dataclass(frozen=True)
class FlowRecord:
    """What happened to one flow class: submitted at `start_s`, active from `first_byte_s`, done at `end_s`.

    `first_byte_s` = `start_s` + latency; every member of the class has the same record.
    """

    name: str
    start_s: float
    first_byte_s: float
    end_s: float
    size_bytes: float
    multiplicity: int
