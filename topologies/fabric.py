"""Fabric builders: the switches between servers and the NVLink domains that span servers.

Each builder returns a new graph holding its switches, the servers' NICs (or GPUs) they attach to,
and the links between them; topologies.build merges it with the servers.
- single_switch: every NIC on one switch.
- leaf_spine: `nodes_per_leaf` servers (all their NICs) under each leaf, every leaf linked to every
  spine. A leaf's uplink bandwidth is its designed downlink bandwidth / oversubscription, spread
  evenly over the spines (a leaf is provisioned for its full port count even if partly filled).
- rail_optimized (NVIDIA DGX SuperPOD reference architectures): servers in scalable units of
  `nodes_per_leaf`; NIC i of every server of a unit on that unit's leaf (rail) i; leaves joined by
  spines as in leaf_spine. A single leaf needs no spines.
- nvlink_domains (GB200 NVL72): every GPU of a domain linked to the domain's shared NVSwitch.
Spines are logical: in a fabric larger than a real spine's radix one stands for a spine group.
"""

from __future__ import annotations

import math

import networkx as nx

from simulator.core.units import GBps_to_Bps, gbps_to_Bps
from topologies.hardware import GpuSpec
from topologies.layout import device_id, node_attrs
from topologies.links import NVLINK_HOP_S, add_link, nic_uplink_latency_s, switch_link_latency_s
from topologies.spec import TopologySpec

# Default leaf: 32 server-facing ports, half of a 64-port switch (NVIDIA Quantum-2 QM9700: 64 x 400G;
# DGX SuperPOD H100 scalable unit: 32 servers per rail leaf), the other half uplinks.
LEAF_DOWNLINK_PORTS = 32
MAX_DEFAULT_SPINES = 64

Port = tuple[int, int]  # (server, NIC index)


def _add_switch(graph: nx.DiGraph, kind: str, index: int) -> str:
    switch = f"{kind}{index}"
    graph.add_node(switch, **node_attrs(kind, -1, index, kind))
    return switch


def _two_tier(
    leaves: list[list[Port]],
    ports_per_leaf: int,
    nic_Bps: float,
    link_kind: str,
    oversubscription: float,
    spines: int | None,
) -> nx.DiGraph:
    """Leaves holding the given NIC ports, joined by spines when there is more than one leaf."""
    graph = nx.DiGraph()
    leaf_ids = []
    for index, members in enumerate(leaves):
        leaf = _add_switch(graph, "leaf", index)
        leaf_ids.append(leaf)
        for server, k in members:
            nic = device_id(server, f"nic{k}")
            graph.add_node(nic, **node_attrs("nic", server, k, f"nic{k}"))
            add_link(graph, nic, leaf, link_kind, nic_Bps, nic_uplink_latency_s(link_kind))
    if len(leaves) > 1:
        n_spines = spines or min(MAX_DEFAULT_SPINES, math.ceil(ports_per_leaf / oversubscription))
        link_Bps = ports_per_leaf * nic_Bps / oversubscription / n_spines
        spine_ids = [_add_switch(graph, "spine", index) for index in range(n_spines)]
        for leaf in leaf_ids:
            for spine in spine_ids:
                add_link(graph, leaf, spine, link_kind, link_Bps, switch_link_latency_s(link_kind))
    return graph


def _groups(servers: int, per_group: int) -> list[range]:
    return [range(start, min(start + per_group, servers)) for start in range(0, servers, per_group)]


def single_switch(servers: int, nics: int, nic_Bps: float, link_kind: str) -> nx.DiGraph:
    """Every NIC of every server on one switch ("leaf0")."""
    ports = [(s, k) for s in range(servers) for k in range(nics)]
    return _two_tier([ports], len(ports), nic_Bps, link_kind, 1.0, None)


def leaf_spine(
    servers: int,
    nics: int,
    nic_Bps: float,
    link_kind: str,
    oversubscription: float = 1.0,
    nodes_per_leaf: int | None = None,
    spines: int | None = None,
) -> nx.DiGraph:
    """`nodes_per_leaf` whole servers per leaf (default: 32 ports' worth), leaves under spines."""
    per_leaf = nodes_per_leaf or max(1, LEAF_DOWNLINK_PORTS // nics)
    leaves = [[(s, k) for s in group for k in range(nics)] for group in _groups(servers, per_leaf)]
    return _two_tier(leaves, per_leaf * nics, nic_Bps, link_kind, oversubscription, spines)


def rail_optimized(
    servers: int,
    nics: int,
    nic_Bps: float,
    link_kind: str,
    oversubscription: float = 1.0,
    nodes_per_leaf: int | None = None,
    spines: int | None = None,
) -> nx.DiGraph:
    """NIC i of each server of a scalable unit on rail leaf i of that unit; leaves under spines."""
    per_leaf = nodes_per_leaf or LEAF_DOWNLINK_PORTS
    leaves = [[(s, k) for s in group] for group in _groups(servers, per_leaf) for k in range(nics)]
    return _two_tier(leaves, per_leaf, nic_Bps, link_kind, oversubscription, spines)


def build_fabric(spec: TopologySpec) -> nx.DiGraph:
    """The inter-node fabric of `spec` (empty when it has no inter_node network)."""
    net, fabric = spec.inter_node, spec.fabric
    if net is None:
        return nx.DiGraph()
    nic_Bps = gbps_to_Bps(net.nic_gbps)
    if fabric.kind == "single_switch":
        return single_switch(spec.nodes, net.nics_per_node, nic_Bps, net.nic_link_kind)
    builder = leaf_spine if fabric.kind == "leaf_spine" else rail_optimized
    return builder(spec.nodes, net.nics_per_node, nic_Bps, net.nic_link_kind, fabric.oversubscription,
                   fabric.nodes_per_leaf, fabric.spines)


def nvlink_domains(servers: int, gpus_per_server: int, domain_gpus: int, gpu: GpuSpec) -> nx.DiGraph:
    """NVLink domains spanning servers (GB200 NVL72): consecutive servers fill a domain of `domain_gpus`
    GPUs whose NVSwitch trays are modelled as one device "nvl{d}/nvswitch"; each GPU's link to it carries
    the GPU's whole NVLink bandwidth per direction. The last domain may be partly filled."""
    graph = nx.DiGraph()
    nvlink_Bps = GBps_to_Bps(gpu.nvlink_GBps_per_direction)
    for d, group in enumerate(_groups(servers, domain_gpus // gpus_per_server)):
        switch = f"nvl{d}/nvswitch"
        graph.add_node(switch, **node_attrs("nvswitch", -1, d, "nvswitch"))
        for s in group:
            for i in range(gpus_per_server):
                gpu_node = device_id(s, f"gpu{i}")
                graph.add_node(gpu_node, **node_attrs("gpu", s, i, f"gpu{i}"))
                add_link(graph, gpu_node, switch, "nvlink", nvlink_Bps, NVLINK_HOP_S)
    return graph
