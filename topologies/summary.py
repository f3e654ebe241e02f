"""What a built topology adds up to: device and link counts, bandwidth totals and bisection
bandwidth (for `clustersim topology show` and notebooks)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import networkx as nx
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from topologies.model import Topology

_FLOW_UNITS = 2**30  # scipy's max-flow works in int32: capacities are scaled to at most this many units


@dataclass(frozen=True)
class LinkTotals:
    """Directed links of one kind: how many, and their bandwidths summed (bytes/s)."""

    count: int
    total_bandwidth_Bps: float


@dataclass(frozen=True)
class TopologySummary:
    """The headline figures of a topology; bandwidths are bytes/s, one direction."""

    name: str | None
    gpu: str
    servers: int
    gpus_per_server: int
    n_gpus: int
    intra_node: str
    transport: str | None
    fabric: str | None
    routing: str | None  # how the fabric spreads flows over its spines: adaptive or ecmp (TopologySpec.routing)
    devices_by_kind: dict[str, int]
    links_by_kind: dict[str, LinkTotals]
    bisection_bandwidth_Bps: float
    intra_bandwidth_Bps: float
    nic_bandwidth_per_server_Bps: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready plain data."""
        return asdict(self)


def _max_flow_Bps(graph: nx.DiGraph, sources: list[str], sinks: list[str]) -> float:
    """Maximum flow (bytes/s) from all `sources` to all `sinks` over the links of `graph`."""
    if not sources or not sinks:
        return 0.0
    index = {node: i for i, node in enumerate(graph)}
    edges = [(index[u], index[v], float(bw)) for u, v, bw in graph.edges(data="bandwidth_Bps")]
    total_Bps = sum(bw for _, _, bw in edges)
    if total_Bps == 0.0:
        return 0.0
    # A power of ten keeps datasheet bandwidths (multiples of 1e6 B/s or more) exact after scaling.
    unit_Bps = 10.0 ** max(0, math.ceil(math.log10(total_Bps / _FLOW_UNITS)))
    source, sink = len(index), len(index) + 1
    rows = [u for u, _, _ in edges] + [source] * len(sources) + [index[n] for n in sinks]
    cols = [v for _, v, _ in edges] + [index[n] for n in sources] + [sink] * len(sinks)
    caps = [int(bw / unit_Bps) for _, _, bw in edges] + [_FLOW_UNITS] * (len(sources) + len(sinks))
    matrix = csr_matrix((np.array(caps, dtype=np.int32), (rows, cols)), shape=(sink + 1, sink + 1))
    return float(maximum_flow(matrix, source, sink, method="dinic").flow_value) * unit_Bps


def bisection_bandwidth_Bps(topology: Topology) -> float:
    """Bisection bandwidth, one direction: the max flow (= min cut) between two halves of the cluster,
    computed exactly with scipy's Dinic max-flow on a subgraph of the topology.

    Several servers: servers [0, n // 2) against the rest, over the fabric switches, the NICs and the
    NVLink-domain switches with their GPUs (NVL72); the servers' insides are left out so that no server
    relays traffic. One server: its GPUs [0, g // 2) against the rest, over its NVLinks (and NVSwitch)
    when it has any, since NCCL does not add PCIe paths to NVLink ones, else over its PCIe tree."""
    graph = topology.graph
    attrs = graph.nodes
    if topology.n_servers > 1:
        half = topology.n_servers // 2
        keep = [n for n in graph if attrs[n]["server"] < 0 or attrs[n]["kind"] in ("gpu", "nic")]
        ends = [n for n in keep if attrs[n]["server"] >= 0]
        sources = [n for n in ends if attrs[n]["server"] < half]
        sinks = [n for n in ends if attrs[n]["server"] >= half]
    else:
        half = topology.gpus_per_server // 2
        if topology.platform.layout in ("pcie", "pcie_bridged"):
            keep = [n for n in graph if attrs[n]["server"] == 0 and attrs[n]["kind"] != "nic"]
        else:  # server 0's GPUs and its NVSwitch, or its NVL72 domain switch (server -1)
            keep = [n for n in graph if attrs[n]["kind"] in ("gpu", "nvswitch") and attrs[n]["server"] in (0, -1)]
        gpus = [n for n in keep if attrs[n]["kind"] == "gpu"]
        sources = [n for n in gpus if attrs[n]["local"] < half]
        sinks = [n for n in gpus if attrs[n]["local"] >= half]
    return _max_flow_Bps(graph.subgraph(keep), sources, sinks)


def summarize(topology: Topology) -> TopologySummary:
    """Counts, totals and bisection bandwidth of `topology`."""
    devices: dict[str, int] = {}
    for _, kind in topology.graph.nodes(data="kind"):
        devices[kind] = devices.get(kind, 0) + 1
    counts: dict[str, int] = {}
    totals: dict[str, float] = {}
    for _, _, link in topology.graph.edges(data=True):
        counts[link["kind"]] = counts.get(link["kind"], 0) + 1
        totals[link["kind"]] = totals.get(link["kind"], 0.0) + float(link["bandwidth_Bps"])
    spec = topology.spec
    return TopologySummary(
        name=spec.name,
        gpu=spec.gpu,
        servers=topology.n_servers,
        gpus_per_server=topology.gpus_per_server,
        n_gpus=topology.n_gpus,
        intra_node=spec.intra_node,
        transport=topology.transport,
        fabric=spec.fabric.kind if spec.inter_node else None,
        routing=spec.routing if spec.inter_node else None,
        devices_by_kind=dict(sorted(devices.items())),
        links_by_kind={kind: LinkTotals(counts[kind], totals[kind]) for kind in sorted(counts)},
        bisection_bandwidth_Bps=bisection_bandwidth_Bps(topology),
        intra_bandwidth_Bps=topology.intra_bandwidth_Bps,
        nic_bandwidth_per_server_Bps=topology.nics_per_server * topology.nic_bandwidth_Bps,
    )
