"""Where a spec's link faults land: the devices each fault names (a device id, or a role expanded to every
device with it), the servers each faulty device touches, and the server groups the faults leave alike.

A faulty device touches its own server (a NIC, a GPU, an NVSwitch, a PCIe switch, a CPU) or the servers
attached to it (a leaf: the servers with a NIC on it; an NVL72 domain switch: the servers of its domain); a
spine touches none (every server reaches the spines alike). Servers touched by the same faulty roles (and
fabric devices) at the same factors are alike: one stands for the group. This is worked out two ways that
agree: from the spec alone (`fault_devices`, `servers_touched_by_spec`: no graph, so a prediction need not
build every server) and from a built graph (`servers_touched_in_graph`, for the whole cluster, where a
failed device's links are gone).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import networkx as nx

from topologies.fabric import Leaves, spec_leaves, spine_count
from topologies.hardware import intra_node_platform
from topologies.layout import device_id
from topologies.spec import TopologySpec

Touched = dict[int, list[tuple[str, float]]]  # server -> (role or fabric device id, factor) of its faults


@dataclass(frozen=True)
class ServerGroup:
    """`count` servers the faults leave alike: `example` stands for them; `servers` lists them and `faults`
    names their faulty devices (role or fabric id, factor), both empty for the servers no fault touches."""

    count: int
    example: int
    servers: tuple[int, ...]
    faults: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class _Cluster:
    """What names a spec's devices: its servers' roles, its leaves, spines and NVLink domains."""

    nodes: int
    roles: frozenset[str]
    leaves: Leaves | None
    spines: int
    domain_servers: int  # servers per NVL72 domain; 0 without multi-server domains

    @property
    def domains(self) -> int:
        return -(-self.nodes // self.domain_servers) if self.domain_servers else 0

    def fabric_ids(self, role: str) -> list[str]:
        """The fabric devices with `role` ("leaf", "spine", "nvswitch" for NVL72 domain switches)."""
        count = {"leaf": self.leaves.count if self.leaves else 0, "spine": self.spines}.get(role)
        if count is not None:
            return [f"{role}{i}" for i in range(count)]
        return [f"nvl{d}/nvswitch" for d in range(self.domains)] if role == "nvswitch" else []

    def servers_at(self, device: str) -> tuple[str, range] | None:
        """(label, servers touched) of a device id, None when there is no such device."""
        server = re.fullmatch(r"s(\d+)/(.+)", device)
        if server and int(server[1]) < self.nodes and server[2] in self.roles and device_id(
                int(server[1]), server[2]) == device:
            return server[2], range(int(server[1]), int(server[1]) + 1)
        leaf = re.fullmatch(r"leaf(\d+)", device)
        if leaf and self.leaves and device in self.fabric_ids("leaf"):
            return device, self.leaves.servers_of(int(leaf[1]))
        if re.fullmatch(r"spine\d+", device) and device in self.fabric_ids("spine"):
            return device, range(0)
        domain = re.fullmatch(r"nvl(\d+)/nvswitch", device)
        if domain and device in self.fabric_ids("nvswitch"):
            first = int(domain[1]) * self.domain_servers
            return device, range(first, min(first + self.domain_servers, self.nodes))
        return None


def _cluster(spec: TopologySpec, server_roles: frozenset[str]) -> _Cluster:
    leaves = spec_leaves(spec)
    spines = spine_count(leaves, spec.fabric.oversubscription, spec.fabric.spines) if leaves else 0
    nvl72 = intra_node_platform(spec.intra_node).layout == "nvl72"
    domain = spec.gpus_per_nvlink_domain // spec.gpus_per_node if nvl72 else 0
    return _Cluster(spec.nodes, server_roles, leaves, spines, domain)


def fault_devices(spec: TopologySpec, server_roles: frozenset[str]) -> list[list[str]] | None:
    """The device ids each of `spec.link_faults` names (`server_roles`: the roles of one server's devices), as
    topologies.build.apply_faults expands them; None when a fault names nothing the spec places."""
    cluster = _cluster(spec, server_roles)
    named = []
    for fault in spec.link_faults:
        if cluster.servers_at(fault.device) is not None:
            named.append([fault.device])
        elif fault.device in server_roles:
            named.append([device_id(s, fault.device) for s in range(spec.nodes)])
        elif cluster.fabric_ids(fault.device):
            named.append(cluster.fabric_ids(fault.device))
        else:
            return None
    return named


def device_factors(spec: TopologySpec, server_roles: frozenset[str]) -> dict[str, float] | None:
    """Each device `spec.link_faults` names with the product of their factors (0: failed), from the spec
    alone; None when a fault names nothing the spec places."""
    named = fault_devices(spec, server_roles)
    if named is None:
        return None
    factors: dict[str, float] = {}
    for fault, devices in zip(spec.link_faults, named, strict=True):
        for device in devices:
            factors[device] = factors.get(device, 1.0) * fault.factor
    return factors


def servers_touched_by_spec(spec: TopologySpec, server_roles: frozenset[str],
                            factors: dict[str, float]) -> Touched:
    """The faulty devices (role or fabric id, factor) in or next to each server, from the spec and the
    `factors` of device_factors: as in a built graph, a failed fabric device has no links left and touches
    no server."""
    cluster = _cluster(spec, server_roles)
    touched: Touched = {}
    for device, factor in factors.items():
        place = cluster.servers_at(device)
        assert place is not None  # device_factors placed every device
        label, servers = place
        if factor == 0.0 and label == device:  # a failed fabric device
            continue
        for s in servers:
            touched.setdefault(s, []).append((label, factor))
    return touched


def servers_touched_in_graph(graph: nx.DiGraph, fault_factors: dict[str, float]) -> Touched:
    """The faulty devices (role or fabric id, factor) in or next to each server of a built cluster: a server's
    own devices and the fabric devices its NICs or GPUs attach to (a failed device has no links left, so it
    touches only its own server)."""
    touched: Touched = {}
    for device, factor in fault_factors.items():
        server = int(graph.nodes[device]["server"])
        if server >= 0:
            servers, label = {server}, str(graph.nodes[device]["role"])
        else:
            servers = {int(graph.nodes[n]["server"]) for n in (*graph.pred[device], *graph.succ[device])
                       if graph.nodes[n]["kind"] in ("nic", "gpu")}
            label = device
        for s in servers:
            touched.setdefault(s, []).append((label, factor))
    return touched


def server_groups(touched: Touched, n_servers: int) -> tuple[ServerGroup, ...]:
    """The servers grouped by the faults that touch them, the untouched ones first (as the lowest of them),
    each group by its lowest server: servers with the same faulty roles at the same factors (NIC 3 at 0.1 on
    s0 or on s5) are alike."""
    by_faults: dict[tuple[tuple[str, float], ...], list[int]] = {}
    for server in sorted(touched):
        by_faults.setdefault(tuple(sorted(touched[server])), []).append(server)
    groups = []
    healthy = n_servers - len(touched)
    if healthy:
        first = next(s for s in range(n_servers) if s not in touched)
        groups.append(ServerGroup(healthy, first, (), ()))
    groups += [ServerGroup(len(servers), servers[0], tuple(servers), faults) for faults, servers in by_faults.items()]
    return tuple(groups)
