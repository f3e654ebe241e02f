"""Lowering a predicted collective onto the flow engine, so concurrent collectives contend.

A collective over symmetric ranks is one flow class: every rank does the same, so one class of
size S stands for all of them (cost independent of the GPU count). Its usage of a resource is the
seconds-per-byte the collective needs there times the resource's line rate, so alone on idle links
the engine reproduces the closed form exactly: latency + fill first, then S at the bottleneck
rate (or at the channel/ramp-limited rate, carried as the flow's rate cap). When two collectives
overlap, max-min sharing of the same resources slows both.
"""

from __future__ import annotations

from simulator.collectives.comm import CommView
from simulator.collectives.cost import CollectiveEstimate
from simulator.network.flows import FlowClass, Resource

RESOURCE_NAMES = ("intra", "net")


def collective_resources(v: CommView) -> list[Resource]:
    """The shared resources of a communicator: a GPU's intra-node links and a node's NICs."""
    return [Resource("intra", v.intra_Bps), Resource("net", max(v.net_Bps, 1.0))]


def collective_flow(est: CollectiveEstimate, v: CommView, name: str | None = None) -> FlowClass:
    """The flow class of one collective (see module docstring)."""
    capacity = {"intra": v.intra_Bps, "net": max(v.net_Bps, 1.0)}
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
