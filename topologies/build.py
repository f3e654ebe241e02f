"""`build`: the one entry point from a TopologySpec to a Topology of the whole cluster, and
`build_representative`, the part of it a prediction reads (one server of each fault group). Both compose the
builders of topologies.node (one server, replicated) and topologies.fabric (NVLink domains, network fabric)
and freeze the result."""

from __future__ import annotations

import functools
import re

import networkx as nx

from simulator.core.errors import ConfigError, TopologyError
from topologies.connectivity import stays_connected
from topologies.fabric import build_fabric, nvlink_domains
from topologies.faults import (
    device_factors,
    fault_devices,
    server_groups,
    servers_touched_by_spec,
    servers_touched_in_graph,
)
from topologies.hardware import gpu_spec, intra_node_platform
from topologies.model import Topology
from topologies.node import build_server, replicate_server
from topologies.spec import TopologySpec


@functools.lru_cache(maxsize=4)
def build(spec: TopologySpec) -> Topology:
    """The cluster of `spec` as a frozen device graph (see topologies.model for its attributes). Specs are
    frozen and graphs read-only, so the last few built are kept: a prediction, a sweep's scenarios and a
    plan's layouts on one cluster build it once."""
    gpu = gpu_spec(spec.gpu)
    graph = replicate_server(build_server(spec, gpu), range(spec.nodes))
    if intra_node_platform(spec.intra_node).layout == "nvl72":
        graph.update(nvlink_domains(spec.nodes, spec.gpus_per_node, spec.gpus_per_nvlink_domain, gpu))
    graph.update(build_fabric(spec))
    factors = apply_faults(graph, spec)
    return Topology(spec=spec, gpu=gpu, graph=nx.freeze(graph), fault_factors=factors,
                    servers_touched=servers_touched_in_graph(graph, factors))


@functools.lru_cache(maxsize=64)
def build_representative(spec: TopologySpec) -> Topology:
    """The cluster of `spec` as a prediction prices it: one server of each group the faults leave alike
    (topologies.faults.server_groups) stands for the group, so only those servers are built, with servers 0
    and 1 (the topology's per-GPU figures are read on server 0; a peer to route to), the NVL72 domains that
    hold them, the
    leaves their NICs sit on with every port of each (a leaf's share of its uplinks counts its servers),
    every spine and those leaves' links to them. Every link built has the figures and faults it has in the
    whole cluster (`build`), so what a prediction reads of these servers is the same; the cost grows with
    the server groups, not the servers. A failed device (factor 0) loses its links here as there; whether the
    failures cut GPUs off is worked out without the whole graph (topologies.connectivity), which is built only
    to report a cut (or a fault naming no device). Cached by spec: a sweep's scenarios on one cluster share
    it."""
    gpu = gpu_spec(spec.gpu)
    server = build_server(spec, gpu)
    roles = frozenset(str(role) for _, role in server.nodes(data="role"))
    factors = device_factors(spec, roles)
    if factors is None or (0.0 in factors.values() and not stays_connected(spec, server, factors)):
        return build(spec)  # the whole cluster's error: an unknown device (listing what exists), or the cut
    touched = servers_touched_by_spec(spec, roles, factors)
    servers = {*range(min(spec.nodes, 2)), *(group.example for group in server_groups(touched, spec.nodes))}
    nvl72 = intra_node_platform(spec.intra_node).layout == "nvl72"
    domains = nvlink_domains(spec.nodes, spec.gpus_per_node, spec.gpus_per_nvlink_domain, gpu, servers) if nvl72 \
        else nx.DiGraph()
    servers |= {int(s) for _, s in domains.nodes(data="server") if s >= 0}
    graph = replicate_server(server, sorted(servers))
    graph.update(domains)
    graph.update(build_fabric(spec, servers))
    for fault, devices in zip(spec.link_faults, fault_devices(spec, roles) or [], strict=True):
        for device in devices:
            if device in graph and fault.factor == 0.0:
                graph.remove_edges_from(list(graph.in_edges(device)) + list(graph.out_edges(device)))
            elif device in graph:
                _scale_links(graph, device, fault.factor)
    return Topology(spec=spec, gpu=gpu, graph=nx.freeze(graph), fault_factors=factors, servers_touched=touched,
                    servers_built=frozenset(servers))


def _scale_links(graph: nx.DiGraph, device: str, factor: float) -> None:
    """Run every link of `device`, both directions, at `factor` of its rate."""
    for u, v in list(graph.in_edges(device)) + list(graph.out_edges(device)):
        graph.edges[u, v]["bandwidth_Bps"] *= factor


def apply_faults(graph: nx.DiGraph, spec: TopologySpec) -> dict[str, float]:
    """Scale the links of each faulty device by its factor; remove them where it failed (factor 0).
    A failure that leaves some GPUs unable to reach the others is a TopologyError naming the cut.
    Returns each faulty device (a role expanded to its devices) with the product of its factors."""
    failed: list[str] = []
    factors: dict[str, float] = {}
    for fault in spec.link_faults:
        devices = [fault.device] if fault.device in graph else [
            node for node, role in graph.nodes(data="role") if role == fault.device]
        if not devices:
            raise ConfigError(f"link_faults: no device or role {fault.device!r} in this cluster; "
                              f"{_fault_targets(graph)}")
        for device in devices:
            factors[device] = factors.get(device, 1.0) * fault.factor
            edges = list(graph.in_edges(device)) + list(graph.out_edges(device))
            if fault.factor == 0.0:
                graph.remove_edges_from(edges)
                failed.append(device)
            else:
                _scale_links(graph, device, fault.factor)
    if failed:
        gpus = [node for node, kind in graph.nodes(data="kind") if kind == "gpu"]
        reach = nx.node_connected_component(graph.to_undirected(as_view=True), gpus[0])
        cut_off = [gpu for gpu in gpus if gpu not in reach]
        if cut_off:
            raise TopologyError(
                f"link_faults: failing {', '.join(failed[:4])}{' ...' if len(failed) > 4 else ''} partitions the "
                f"cluster: {len(cut_off)} of {len(gpus)} GPUs (e.g. {cut_off[0]}) can no longer reach the others"
            )
    return factors


def _fault_targets(graph: nx.DiGraph) -> str:
    """What link_faults can name in `graph`: its roles (numbered ones as ranges, gpu0-7) and a device of each
    kind (s0/nic0, leaf0)."""
    numbered: dict[str, list[int]] = {}
    example: dict[str, str] = {}
    for node, role in sorted(graph.nodes(data="role"), key=lambda pair: str(pair[0])):
        if not role:
            continue
        match = re.fullmatch(r"(.*?)(\d+)", role)
        stem = match.group(1) if match else role
        numbered.setdefault(stem, [])
        if match:
            numbered[stem].append(int(match.group(2)))
        example.setdefault(stem, node)
    roles = [stem if not n else f"{stem}{min(n)}" if min(n) == max(n) else f"{stem}{min(n)}-{max(n)}"
             for stem, n in sorted(numbered.items())]
    return f"roles: {', '.join(roles)}; devices, e.g. {', '.join(example[stem] for stem in sorted(example))}"
