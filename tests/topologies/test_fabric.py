"""Fabrics: leaf and spine counts, oversubscription, rails, and bisection bandwidth by hand."""

from __future__ import annotations

import pytest

from topologies.summary import bisection_bandwidth_Bps

ONE_100G = {"transport": "ib", "nics_per_node": 1, "nic_gbps": 100}


def _uplink_Bps(topo, leaf: str) -> float:
    out = topo.graph.out_edges(leaf, data="bandwidth_Bps")
    return sum(b for _, v, b in out if topo.graph.nodes[v]["kind"] == "spine")


def _count(topo, kind: str) -> int:
    return sum(1 for _, k in topo.graph.nodes(data="kind") if k == kind)


@pytest.mark.parametrize("spines", [None, 2])
def test_two_to_one_oversubscription_halves_leaf_uplink_bandwidth(make, spines):
    """Leaf of 2 servers x 1 NIC x 100G = 25 GB/s down: uplinks 25 GB/s at 1:1, 12.5 GB/s at 2:1."""
    fabric = {"kind": "leaf_spine", "nodes_per_leaf": 2, "spines": spines}
    full = make(nodes=4, net=ONE_100G, fabric=fabric)
    half = make(nodes=4, net=ONE_100G, fabric={**fabric, "oversubscription": 2.0})
    assert _uplink_Bps(full, "leaf0") == 25e9
    assert _uplink_Bps(half, "leaf0") == 12.5e9


def test_leaf_spine_bisection_by_hand(make):
    """4 servers, 2 per leaf, 1 x 100G each: halves sit on different leaves, so the cut is a leaf's
    uplinks: 25 GB/s at 1:1, 12.5 GB/s at 2:1."""
    fabric = {"kind": "leaf_spine", "nodes_per_leaf": 2}
    assert bisection_bandwidth_Bps(make(nodes=4, net=ONE_100G, fabric=fabric)) == 25e9
    over = make(nodes=4, net=ONE_100G, fabric={**fabric, "oversubscription": 2.0})
    assert bisection_bandwidth_Bps(over) == 12.5e9


def test_rail_optimized_bisection_is_half_the_servers_nics(make):
    """Non-blocking rails: 2 x DGX H100 -> 8 x 50 GB/s = 400 GB/s; 4 servers -> 800 GB/s."""
    assert bisection_bandwidth_Bps(make(nodes=2)) == 400e9
    assert bisection_bandwidth_Bps(make(nodes=4)) == 800e9


def test_single_server_bisection_uses_its_nvlinks(make):
    """One DGX H100: 4 GPUs x 450 GB/s into the NVSwitch; one PCIe L40S server: the SMP/PCIe cut."""
    assert bisection_bandwidth_Bps(make(nodes=1)) == 1800e9
    pcie = make(gpu="L40S", nodes=1, intra="pcie4", net=None)
    # GPUs 4-7 sit under cpu1's two PCIe Gen4 x16 uplinks (2 x 31.5 GB/s), less than the 67.2 GB/s SMP link.
    assert bisection_bandwidth_Bps(pcie) == pytest.approx(2 * 31.5e9, rel=0.001)


def test_nvl72_bisection_is_half_the_domain_nvlink(make):
    """One NVL72 rack without a network: 36 GPUs x 900 GB/s cross the cut."""
    assert bisection_bandwidth_Bps(make(gpu="GB200", gpus=4, nodes=18, intra="nvlink5-nvl72", net=None)) == 36 * 900e9


def test_rail_optimized_leaves_per_scalable_unit(make):
    """40 servers, 8 NICs, 32 servers per unit: 2 units x 8 rails = 16 leaves; default 32 spines at 1:1."""
    topo = make(nodes=40)
    assert (_count(topo, "leaf"), _count(topo, "spine")) == (16, 32)
    assert topo.graph.has_edge("s33/nic2", "leaf10") and topo.graph.has_edge("s0/nic2", "leaf2")


def test_single_leaf_needs_no_spines(make):
    """leaf_spine with every server under one leaf, and single_switch: no spine at all."""
    assert _count(make(nodes=4, net=ONE_100G, fabric={"kind": "leaf_spine"}), "spine") == 0
    topo = make(nodes=3, fabric={"kind": "single_switch"})
    assert (_count(topo, "leaf"), _count(topo, "spine"), topo.graph.in_degree("leaf0")) == (1, 0, 24)


def test_link_kinds_and_latencies_per_transport(make):
    """NIC-leaf links take the transport's kind; an InfiniBand hop is faster than an Ethernet one."""
    ib = make(nodes=2)
    roce = make(nodes=2, net={"transport": "roce", "nics_per_node": 8, "nic_gbps": 400})
    tcp = make(nodes=2, net={"transport": "tcpxo", "nics_per_node": 8, "nic_gbps": 200})
    assert ib.link("s0/nic0", "leaf0")["kind"] == "ib"
    assert roce.link("s0/nic0", "leaf0")["kind"] == "roce" and tcp.link("s0/nic0", "leaf0")["kind"] == "tcp"
    assert ib.link("leaf0", "spine0")["latency_s"] < roce.link("leaf0", "spine0")["latency_s"]
