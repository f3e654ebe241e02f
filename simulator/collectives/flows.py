"""Lowering a predicted collective onto the flow engine, so concurrent collectives contend.

A collective over symmetric ranks is one flow class: every rank does the same, so one class of
size S stands for all of them (cost independent of the GPU count). The shared resources are a
GPU's intra-node links and its node's NICs. A class's usage of a resource is the seconds-per-byte
the collective needs there times the resource's capacity, so alone on idle links the engine
reproduces the closed form exactly: latency + fill first, then S at the bottleneck rate (or at
the channel-limited rate, carried as the flow's rate cap). When collectives overlap, max-min
sharing of the same resources slows each. A group that owns only a share of a resource (one
GPU's part of its node's NICs) has that share in its seconds-per-byte already.

Back-to-back calls of one collective (repeated_flow) are one class with their bytes added and the
latency of the series (simulator.collectives.cost.repeated_latency_s).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from simulator.collectives.comm import CommView
from simulator.collectives.cost import CollectiveEstimate, repeated_latency_s
from simulator.network.flows import FlowClass, Resource

RESOURCE_NAMES = ("intra", "net", "spine")


def resource_capacities(v: CommView) -> dict[str, float]:
    """Capacity of the shared resources of a cluster: a GPU's intra-node links, its node's NICs,
    its node's share of leaf uplinks (a floor of 1 B/s keeps absent ones valid; a fabric without
    spines gets the NICs' figure, unused)."""
    spine = v.spine_Bps if math.isfinite(v.spine_Bps) else v.net_Bps
    return {"intra": max(v.intra_Bps, 1.0), "net": max(v.net_Bps, 1.0), "spine": max(spine, 1.0)}


def repeated_flow(est: CollectiveEstimate, capacity: Mapping[str, float], name: str, count: int) -> FlowClass:
    """`count` back-to-back calls of the collective `est` prices, as one flow class (module docstring)."""
    flow = collective_flow(est, capacity, name)
    if count == 1:
        return flow
    return replace(flow, size_bytes=flow.size_bytes * count, latency_s=repeated_latency_s(est, count))


def collective_resources(capacity: Mapping[str, float]) -> list[Resource]:
    """The flow engine's resources, in RESOURCE_NAMES order."""
    return [Resource(name, capacity[name]) for name in RESOURCE_NAMES]


def collective_flow(est: CollectiveEstimate, capacity: Mapping[str, float], name: str | None = None) -> FlowClass:
    """The flow class of one collective (see module docstring)."""
    usage = tuple(
        (RESOURCE_NAMES.index(resource), spb * capacity[resource])
        for resource, spb in est.demand_s_per_byte
        if spb > 0
    )
    rate_cap = est.size_bytes / est.bandwidth_s if est.bandwidth_s > 0 else None
    return FlowClass(
        name=name or f"{est.op}:{est.size_bytes}B:{est.algo}/{est.proto}",
        size_bytes=float(est.size_bytes),
        usage=usage,
        rate_cap_Bps=rate_cap,
        latency_s=est.latency_s + est.fill_s,
    )
