"""Per-hop link figures shared by the builders, and `add_link`, the one way a builder adds a link.

Latencies are one-way hardware figures (wire, SerDes, switch or NIC traversal); software and
transport overheads (NCCL protocol latencies, EFA/TCPX floors) belong to the collective model.
A switch's traversal is split between the links that enter and leave it, so a path pays each switch
it crosses once: two NICs across one leaf pay 2 x (NIC + cable) + 1 x switch.
"""

from __future__ import annotations

import networkx as nx

# GPU <-> NVSwitch (or GPU <-> GPU) NVLink hop: SerDes plus half an NVSwitch traversal. Basis: NVSwitch
# port-to-port latency is a few hundred ns (NVIDIA NVSwitch whitepaper, 2018: "low latency"); the ~1-2 us
# GPU-to-GPU latency that p2pBandwidthLatencyTest reports is mostly software.
NVLINK_HOP_S = 150e-9
# GPU/NIC <-> PCIe switch: Broadcom PEX88000 / PEX9700 switches quote 100-150 ns port-to-port.
PCIE_SWITCH_HOP_S = 150e-9
# PCIe switch <-> CPU root port: root complex and fabric to memory, ~250 ns (basis: local DRAM from a
# device costs several hundred ns more than device-to-device through a switch).
PCIE_ROOT_HOP_S = 250e-9
# Socket-to-socket (UPI/QPI/xGMI): remote NUMA access costs ~100 ns more than local (Intel Memory
# Latency Checker figures on 2-socket Xeon Scalable hosts).
SMP_HOP_S = 100e-9
# NIC traversal, one side: ConnectX-6/7 product briefs quote "sub 600 ns" end-to-end NIC latency.
NIC_S = 500e-9
# Cable propagation: ~5 ns/m, ~10 m within a row of racks.
CABLE_S = 50e-9
# Switch port-to-port: InfiniBand Quantum (HDR QM8700 datasheet: 130 ns); Ethernet data-centre switches
# (Spectrum-2/3, Tomahawk class) ~300-700 ns cut-through, 500 ns taken for RoCE, EFA, TCP and Ethernet, and
# for HPE Slingshot's Rosetta (an Ethernet-based switch; no primary port-to-port figure was found).
SWITCH_S = {"ib": 130e-9, "roce": 500e-9, "efa": 500e-9, "slingshot": 500e-9, "tcp": 500e-9, "ethernet": 500e-9}


def nic_uplink_latency_s(kind: str) -> float:
    """NIC <-> leaf link: the NIC, the cable and half the leaf."""
    return NIC_S + CABLE_S + SWITCH_S[kind] / 2


def switch_link_latency_s(kind: str) -> float:
    """Switch <-> switch link: half of each switch and the cable."""
    return CABLE_S + SWITCH_S[kind]


def add_link(graph: nx.DiGraph, u: str, v: str, kind: str, bandwidth_Bps: float, latency_s: float) -> None:
    """Add the link u <-> v as two directed edges with the same figures; both ends must already be
    nodes with a role. The group of each direction is f"{kind}:{role_u}->{role_v}" (topologies.model)."""
    for a, b in ((u, v), (v, u)):
        group = f"{kind}:{graph.nodes[a]['role']}->{graph.nodes[b]['role']}"
        graph.add_edge(a, b, kind=kind, bandwidth_Bps=bandwidth_Bps, latency_s=latency_s, group=group)
