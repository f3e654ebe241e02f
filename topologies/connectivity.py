"""Whether failed devices leave every GPU able to reach every other, worked out without building the whole
cluster: a server with no failed device in it is connected inside (checked on one server's graph) and stands
as one node, joined to the leaves its NICs sit on and to its NVL72 domain switch; a server with a failed device
is laid out device by device, less the failed devices' links; every leaf that has not failed meets every
spine that has not (so all of them meet when one spine is left). The answer is the whole graph's
(topologies.build.apply_faults), at a cost of a few operations per server and per failed server's link.
"""

from __future__ import annotations

import re

import networkx as nx

from topologies.fabric import spec_leaves, spine_count
from topologies.hardware import intra_node_platform
from topologies.layout import device_id
from topologies.spec import TopologySpec


class _Components:
    """Union-find over device ids."""

    def __init__(self) -> None:
        self._parent: dict[str, str] = {}

    def find(self, node: str) -> str:
        root = node
        while self._parent.get(root, root) != root:
            root = self._parent[root]
        while node != root:
            self._parent[node], node = root, self._parent.get(node, node)
        return root

    def join(self, a: str, b: str) -> None:
        self._parent[self.find(a)] = self.find(b)


def stays_connected(spec: TopologySpec, server: nx.DiGraph, factors: dict[str, float]) -> bool:
    """True when, with the links of every device at factor 0 in `factors` removed, all GPUs of `spec` still
    reach each other (`server`: one server's graph, as server 0). False also when a server is not connected
    inside to begin with (then only the whole graph can tell)."""
    if not nx.is_connected(server.to_undirected(as_view=True)):
        return False
    failed = {device for device, factor in factors.items() if factor == 0.0}
    prefix = device_id(0, "")
    links = [(str(u).removeprefix(prefix), str(v).removeprefix(prefix)) for u, v in server.edges]
    gpu_roles = [str(n).removeprefix(prefix) for n, kind in server.nodes(data="kind") if kind == "gpu"]
    broken = {int(m[1]) for device in failed if (m := re.fullmatch(r"s(\d+)/.+", device))}
    leaves = spec_leaves(spec)
    nics = spec.inter_node.nics_per_node if spec.inter_node else 0
    domain_servers = spec.gpus_per_nvlink_domain // spec.gpus_per_node if intra_node_platform(
        spec.intra_node).layout == "nvl72" else 0
    parts = _Components()
    gpus = []
    for s in range(spec.nodes):
        def node(role: str, s: int = s) -> str:
            return device_id(s, role) if s in broken else f"s{s}"
        if s in broken:
            for u, v in links:
                if device_id(s, u) not in failed and device_id(s, v) not in failed:
                    parts.join(device_id(s, u), device_id(s, v))
        for k in range(nics if leaves else 0):
            nic, leaf = device_id(s, f"nic{k}"), f"leaf{leaves.leaf_of(s, k)}" if leaves else ""
            if nic not in failed and leaf not in failed:
                parts.join(node(f"nic{k}"), leaf)
        for role in gpu_roles:
            gpus.append(node(role))
            switch = f"nvl{s // domain_servers}/nvswitch" if domain_servers else ""
            if switch and device_id(s, role) not in failed and switch not in failed:
                parts.join(node(role), switch)
    spines = spine_count(leaves, spec.fabric.oversubscription, spec.fabric.spines) if leaves else 0
    if any(f"spine{j}" not in failed for j in range(spines)) and leaves:
        alive = [f"leaf{i}" for i in range(leaves.count) if f"leaf{i}" not in failed]
        for leaf in alive[1:]:
            parts.join(leaf, alive[0])
    return len({parts.find(gpu) for gpu in gpus}) == 1
