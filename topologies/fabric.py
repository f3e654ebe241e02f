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
from collections.abc import Collection
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Leaves:
    """Which NIC ports each leaf holds, without listing them: `servers` servers of `nics` NICs in groups
    of `per_group` consecutive servers; a group's NICs share one leaf (`rails` False: leaf_spine and
    single_switch) or NIC i of each server of a group sits on the group's rail leaf i (rail_optimized).
    Leaves are numbered group by group, rail by rail within a group."""

    servers: int
    nics: int
    per_group: int
    rails: bool
    ports_per_leaf: int  # the ports a leaf is provisioned for (its uplinks are sized on them)

    @property
    def count(self) -> int:
        groups = -(-self.servers // self.per_group)
        return groups * self.nics if self.rails else groups

    def servers_of(self, leaf: int) -> range:
        """The servers with a NIC on `leaf`."""
        group = leaf // self.nics if self.rails else leaf
        return range(group * self.per_group, min((group + 1) * self.per_group, self.servers))

    def ports(self, leaf: int) -> list[Port]:
        """The (server, NIC) ports on `leaf`, in the order they are cabled."""
        if self.rails:
            return [(s, leaf % self.nics) for s in self.servers_of(leaf)]
        return [(s, k) for s in self.servers_of(leaf) for k in range(self.nics)]

    def leaf_of(self, server: int, nic: int) -> int:
        """The leaf NIC `nic` of `server` sits on."""
        group = server // self.per_group
        return group * self.nics + nic if self.rails else group

    def leaves_of(self, server: int) -> list[int]:
        """The leaves `server`'s NICs sit on."""
        group = server // self.per_group
        return [group * self.nics + k for k in range(self.nics)] if self.rails else [group]


def _add_switch(graph: nx.DiGraph, kind: str, index: int) -> str:
    switch = f"{kind}{index}"
    graph.add_node(switch, **node_attrs(kind, -1, index, kind))
    return switch


def spine_count(leaves: Leaves, oversubscription: float, spines: int | None) -> int:
    """Spines above the leaves: none for a single leaf, else `spines` or enough for the leaf's uplinks."""
    if leaves.count < 2:
        return 0
    return spines or min(MAX_DEFAULT_SPINES, math.ceil(leaves.ports_per_leaf / oversubscription))


def _two_tier(
    leaves: Leaves,
    nic_Bps: float,
    link_kind: str,
    oversubscription: float,
    spines: int | None,
    only: Collection[int] | None = None,
) -> nx.DiGraph:
    """Leaves holding their NIC ports, joined by spines when there is more than one leaf. `only` (servers)
    keeps the leaves those servers' NICs sit on, all the ports of each (a leaf's share of its uplinks counts
    its servers), or only those servers' ports on a single leaf (which has no uplinks), and every spine."""
    graph = nx.DiGraph()
    kept = range(leaves.count) if only is None else sorted({leaf for s in only for leaf in leaves.leaves_of(s)})
    leaf_ids = []
    for index in kept:
        leaf = _add_switch(graph, "leaf", index)
        leaf_ids.append(leaf)
        for server, k in leaves.ports(index):
            if only is not None and leaves.count < 2 and server not in only:
                continue
            nic = device_id(server, f"nic{k}")
            graph.add_node(nic, **node_attrs("nic", server, k, f"nic{k}"))
            add_link(graph, nic, leaf, link_kind, nic_Bps, nic_uplink_latency_s(link_kind))
    n_spines = spine_count(leaves, oversubscription, spines)
    if n_spines:
        link_Bps = leaves.ports_per_leaf * nic_Bps / oversubscription / n_spines
        spine_ids = [_add_switch(graph, "spine", index) for index in range(n_spines)]
        for leaf in leaf_ids:
            for spine in spine_ids:
                add_link(graph, leaf, spine, link_kind, link_Bps, switch_link_latency_s(link_kind))
    return graph


def single_switch(servers: int, nics: int, nic_Bps: float, link_kind: str) -> nx.DiGraph:
    """Every NIC of every server on one switch ("leaf0")."""
    return _two_tier(fabric_leaves("single_switch", servers, nics), nic_Bps, link_kind, 1.0, None)


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
    leaves = fabric_leaves("leaf_spine", servers, nics, nodes_per_leaf)
    return _two_tier(leaves, nic_Bps, link_kind, oversubscription, spines)


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
    leaves = fabric_leaves("rail_optimized", servers, nics, nodes_per_leaf)
    return _two_tier(leaves, nic_Bps, link_kind, oversubscription, spines)


def fabric_leaves(kind: str, servers: int, nics: int, nodes_per_leaf: int | None = None) -> Leaves:
    """The leaves of a fabric of `kind` (see the module docstring for the default group sizes)."""
    if kind == "single_switch":
        return Leaves(servers, nics, max(1, servers), False, servers * nics)
    if kind == "leaf_spine":
        per_leaf = nodes_per_leaf or max(1, LEAF_DOWNLINK_PORTS // nics)
        return Leaves(servers, nics, per_leaf, False, per_leaf * nics)
    per_leaf = nodes_per_leaf or LEAF_DOWNLINK_PORTS
    return Leaves(servers, nics, per_leaf, True, per_leaf)


def spec_leaves(spec: TopologySpec) -> Leaves | None:
    """The leaves of `spec`'s fabric (None when it has no inter_node network)."""
    net, fabric = spec.inter_node, spec.fabric
    if net is None:
        return None
    return fabric_leaves(fabric.kind, spec.nodes, net.nics_per_node, fabric.nodes_per_leaf)


def fabric_counts(spec: TopologySpec) -> tuple[int, int, int]:
    """(NICs, cables, switches) of `spec`'s fabric, counted without building it: every NIC port cabled to its
    leaf, every leaf to every spine (zeros without an inter_node network)."""
    leaves = spec_leaves(spec)
    if leaves is None:
        return 0, 0, 0
    spines = spine_count(leaves, spec.fabric.oversubscription, spec.fabric.spines)
    ports = leaves.servers * leaves.nics
    return ports, ports + leaves.count * spines, leaves.count + spines


def build_fabric(spec: TopologySpec, only: Collection[int] | None = None) -> nx.DiGraph:
    """The inter-node fabric of `spec` (empty when it has no inter_node network); with `only` (servers), the
    part of it those servers' NICs reach (see _two_tier)."""
    net, fabric, leaves = spec.inter_node, spec.fabric, spec_leaves(spec)
    if net is None or leaves is None:
        return nx.DiGraph()
    return _two_tier(leaves, gbps_to_Bps(net.nic_gbps), net.nic_link_kind, fabric.oversubscription, fabric.spines,
                     only)


def _groups(servers: int, per_group: int) -> list[range]:
    return [range(start, min(start + per_group, servers)) for start in range(0, servers, per_group)]


def nvlink_domains(servers: int, gpus_per_server: int, domain_gpus: int, gpu: GpuSpec,
                   only: Collection[int] | None = None) -> nx.DiGraph:
    """NVLink domains spanning servers (GB200 NVL72): consecutive servers fill a domain of `domain_gpus`
    GPUs whose NVSwitch trays are modelled as one device "nvl{d}/nvswitch"; each GPU's link to it carries
    the GPU's whole NVLink bandwidth per direction. The last domain may be partly filled. With `only`
    (servers), the domains that hold them."""
    graph = nx.DiGraph()
    nvlink_Bps = GBps_to_Bps(gpu.nvlink_GBps_per_direction)
    for d, group in enumerate(_groups(servers, domain_gpus // gpus_per_server)):
        if only is not None and not any(s in group for s in only):
            continue
        switch = f"nvl{d}/nvswitch"
        graph.add_node(switch, **node_attrs("nvswitch", -1, d, "nvswitch"))
        for s in group:
            for i in range(gpus_per_server):
                gpu_node = device_id(s, f"gpu{i}")
                graph.add_node(gpu_node, **node_attrs("gpu", s, i, f"gpu{i}"))
                add_link(graph, gpu_node, switch, "nvlink", nvlink_Bps, NVLINK_HOP_S)
    return graph
