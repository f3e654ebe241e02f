"""One-server builders: the host (CPU sockets, PCIe switches, GPUs, NICs) plus the server's NVLink
fabric (an NVSwitch, a direct NVLink mesh, NVLink bridges between pairs of cards, or none), and the
replication of that server `n` times.

An NVSwitch server is modelled as one aggregated "nvswitch" device; each GPU's link to it carries the
GPU's whole NVLink bandwidth (per direction). Direct meshes (ABCI-V full mesh of 4, DGX-1 hybrid cube
mesh) take their pair map from data/intra_node.yaml. NVL72 trays have no NVSwitch of their own: the
rack-wide domain is built by topologies.fabric.nvlink_domains.
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx

from simulator.core.units import GBps_to_Bps
from topologies.hardware import GpuSpec, IntraNodePlatform, intra_node_platform, pcie_GBps_per_direction
from topologies.layout import (
    cpu_count,
    cpu_of_pcie_switch,
    device_id,
    gpu_of_nic,
    node_attrs,
    pcie_switch_count,
    pcie_switch_of_gpu,
)
from topologies.links import NVLINK_HOP_S, PCIE_ROOT_HOP_S, PCIE_SWITCH_HOP_S, SMP_HOP_S, add_link
from topologies.spec import TopologySpec

NIC_PCIE_LANES = 16  # ConnectX-6/7 and EFA adapters are x16 devices


def _add_host(graph: nx.DiGraph, gpus: int, nics: int, gpu: GpuSpec, platform: IntraNodePlatform) -> None:
    """Add server 0's CPU sockets, PCIe switches, GPUs and NICs with their PCIe and SMP links.

    GPU links run at the lower of the GPU's and the host's PCIe generation; NIC and switch uplinks at
    the host's generation, x16. The sockets are joined by one SMP link (UPI/QPI/xGMI)."""
    switches, cpus = pcie_switch_count(gpus), cpu_count(gpus)
    host_Bps = GBps_to_Bps(pcie_GBps_per_direction(platform.host_pcie_gen, NIC_PCIE_LANES))
    gpu_Bps = GBps_to_Bps(pcie_GBps_per_direction(min(gpu.pcie_gen, platform.host_pcie_gen), gpu.pcie_lanes))
    for c in range(cpus):
        graph.add_node(device_id(0, f"cpu{c}"), **node_attrs("cpu", 0, c, f"cpu{c}"))
    for c in range(1, cpus):
        add_link(graph, device_id(0, "cpu0"), device_id(0, f"cpu{c}"), "smp",
                 GBps_to_Bps(platform.smp_GBps_per_direction), SMP_HOP_S)
    for j in range(switches):
        switch = device_id(0, f"pcie{j}")
        graph.add_node(switch, **node_attrs("pcie_switch", 0, j, f"pcie{j}"))
        add_link(graph, switch, device_id(0, f"cpu{cpu_of_pcie_switch(j, gpus)}"), "pcie", host_Bps, PCIE_ROOT_HOP_S)
    for i in range(gpus):
        graph.add_node(device_id(0, f"gpu{i}"), **node_attrs("gpu", 0, i, f"gpu{i}"))
        add_link(graph, device_id(0, f"gpu{i}"), device_id(0, f"pcie{pcie_switch_of_gpu(i)}"), "pcie",
                 gpu_Bps, PCIE_SWITCH_HOP_S)
    for k in range(nics):
        graph.add_node(device_id(0, f"nic{k}"), **node_attrs("nic", 0, k, f"nic{k}"))
        parent = device_id(0, f"pcie{pcie_switch_of_gpu(gpu_of_nic(k, gpus, nics))}")
        add_link(graph, device_id(0, f"nic{k}"), parent, "pcie", host_Bps, PCIE_SWITCH_HOP_S)


def _add_nvswitch(graph: nx.DiGraph, gpus: int, gpu: GpuSpec, platform: IntraNodePlatform) -> None:
    """Add server 0's NVSwitch (aggregated) and each GPU's NVLinks to it: the links the platform wires, each at
    the module's per-link rate."""
    switch = device_id(0, "nvswitch")
    graph.add_node(switch, **node_attrs("nvswitch", 0, 0, "nvswitch"))
    wired_GBps = gpu.nvlink_GBps_per_direction * platform.nvlinks_per_gpu / gpu.nvlinks
    for i in range(gpus):
        add_link(graph, device_id(0, f"gpu{i}"), switch, "nvlink", GBps_to_Bps(wired_GBps), NVLINK_HOP_S)


def _add_nvlink_mesh(graph: nx.DiGraph, gpus: int, gpu: GpuSpec, platform: IntraNodePlatform) -> None:
    """Add the direct NVLinks of `platform`'s pair map among server 0's first `gpus` GPUs; a pair joined by
    n links carries n x the per-link bandwidth."""
    per_link_GBps = gpu.nvlink_GBps_per_direction / gpu.nvlinks
    for a, b, links in platform.nvlink_pairs:
        if a < gpus and b < gpus:
            add_link(graph, device_id(0, f"gpu{a}"), device_id(0, f"gpu{b}"), "nvlink",
                     GBps_to_Bps(links * per_link_GBps), NVLINK_HOP_S)


def _add_nvlink_bridges(graph: nx.DiGraph, gpus: int, gpu: GpuSpec) -> None:
    """Add the NVLink bridges of server 0's cards: GPUs 2k and 2k + 1, each bridge carrying the card's NVLinks
    (an odd last card has none)."""
    for a in range(0, gpus - 1, 2):
        add_link(graph, device_id(0, f"gpu{a}"), device_id(0, f"gpu{a + 1}"), "nvlink",
                 GBps_to_Bps(gpu.nvlink_GBps_per_direction), NVLINK_HOP_S)


def build_server(spec: TopologySpec, gpu: GpuSpec) -> nx.DiGraph:
    """One server of `spec` (as server 0): host, NICs and its own NVLink fabric."""
    platform = intra_node_platform(spec.intra_node)
    nics = spec.inter_node.nics_per_node if spec.inter_node else 0
    graph = nx.DiGraph()
    _add_host(graph, spec.gpus_per_node, nics, gpu, platform)
    if platform.layout == "nvswitch":
        _add_nvswitch(graph, spec.gpus_per_node, gpu, platform)
    elif platform.layout == "nvlink_mesh":
        _add_nvlink_mesh(graph, spec.gpus_per_node, gpu, platform)
    elif platform.layout == "pcie_bridged":
        _add_nvlink_bridges(graph, spec.gpus_per_node, gpu)
    return graph


def replicate_server(server: nx.DiGraph, servers: Iterable[int]) -> nx.DiGraph:
    """Copies of a server-0 graph as the given servers (range(n): all n), device ids and `server` attributes
    renumbered."""
    prefix = device_id(0, "")
    nodes = [(n.removeprefix(prefix), attrs) for n, attrs in server.nodes(data=True)]
    edges = [(u.removeprefix(prefix), v.removeprefix(prefix), attrs) for u, v, attrs in server.edges(data=True)]
    graph = nx.DiGraph()
    for s in servers:
        graph.add_nodes_from((device_id(s, role), {**attrs, "server": s}) for role, attrs in nodes)
        graph.add_edges_from((device_id(s, u), device_id(s, v), attrs) for u, v, attrs in edges)
    return graph
