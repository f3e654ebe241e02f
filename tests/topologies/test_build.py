"""Built graphs: device and link counts, node/edge attributes, symmetry groups, per-platform layouts."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topologies.build import build
from topologies.layout import nics_of_gpu
from topologies.model import DEVICE_KINDS, LINK_KINDS
from topologies.presets import load_preset
from topologies.spec import TopologySpec


def _count(graph: nx.DiGraph, kind: str) -> int:
    return sum(1 for _, _, k in graph.edges(data="kind") if k == kind)


def test_dgx_h100_two_nodes_counts(make):
    """2 x DGX H100: 16 GPUs, 16 NICs, 2 NVSwitches, 32 directed NVLinks (one per GPU per direction)."""
    topo = make(nodes=2)
    kinds = [k for _, k in topo.graph.nodes(data="kind")]
    assert (kinds.count("gpu"), kinds.count("nic"), kinds.count("nvswitch")) == (16, 16, 2)
    assert _count(topo.graph, "nvlink") == 32
    assert topo.intra_bandwidth_Bps == 450e9 and topo.nic_bandwidth_Bps == 50e9


def test_every_node_and_edge_carries_the_model_attributes(make):
    """Nodes have kind/server/local/role; edges have kind/bandwidth_Bps/latency_s/group, in the vocabularies."""
    graph = make(nodes=2).graph
    for _, attrs in graph.nodes(data=True):
        assert attrs["kind"] in DEVICE_KINDS and {"server", "local", "role"} <= attrs.keys()
    for u, v, attrs in graph.edges(data=True):
        assert attrs["kind"] in LINK_KINDS and attrs["bandwidth_Bps"] > 0 and 0 < attrs["latency_s"] < 2e-6
        assert attrs["group"] == f"{attrs['kind']}:{graph.nodes[u]['role']}->{graph.nodes[v]['role']}"


def test_one_edge_per_direction_with_equal_figures(make):
    """Every link exists in both directions with the same kind, bandwidth and latency."""
    for topo in (make(nodes=3), make(gpu="V100-SXM2-16GB", intra="nvlink2-hybrid-cube-mesh", nodes=2,
                                     net={"transport": "roce", "nics_per_node": 4, "nic_gbps": 100})):
        for u, v, attrs in topo.graph.edges(data=True):
            back = topo.graph.edges[v, u]
            assert (back["kind"], back["bandwidth_Bps"], back["latency_s"]) == (
                attrs["kind"], attrs["bandwidth_Bps"], attrs["latency_s"])


def test_links_of_the_same_role_share_a_group_across_servers(make):
    """gpu3->nvswitch is one group holding one link per server; leaf->spine links share one group."""
    topo = make(nodes=3)
    assert topo.group_size("nvlink:gpu3->nvswitch") == 3
    assert topo.group_size("ib:nic5->leaf") == 3
    leaves = sum(1 for _, k in topo.graph.nodes(data="kind") if k == "leaf")
    spines = sum(1 for _, k in topo.graph.nodes(data="kind") if k == "spine")
    assert topo.group_size("ib:leaf->spine") == leaves * spines


def test_graph_is_frozen(make):
    """The built graph refuses modification."""
    with pytest.raises(nx.NetworkXError):
        make(nodes=1).graph.add_node("x")


def test_hybrid_cube_mesh_link_bandwidths():
    """DGX-1: GPU0-GPU3 has 2 NVLinks (50 GB/s), GPU0-GPU1 one (25 GB/s), GPU0-GPU5 none; 24 links in all."""
    topo = build(load_preset("dgx-1-v100"))
    graph = topo.graph
    assert graph.edges["s0/gpu0", "s0/gpu3"]["bandwidth_Bps"] == 50e9
    assert graph.edges["s0/gpu0", "s0/gpu1"]["bandwidth_Bps"] == 25e9
    assert not graph.has_edge("s0/gpu0", "s0/gpu5")
    nvlink_Bps = [b for u, v, b in graph.edges(data="bandwidth_Bps") if graph.edges[u, v]["kind"] == "nvlink"]
    assert sum(nvlink_Bps) == 2 * 24 * 25e9
    assert topo.intra_bandwidth_Bps == 150e9


def test_full_mesh_of_four_pairs_carry_two_links(make):
    """ABCI-V: each of the 6 GPU pairs joined by 2 NVLinks (50 GB/s per direction); 150 GB/s per GPU."""
    topo = make(gpu="V100-SXM2-16GB", gpus=4, nodes=1, intra="nvlink2-full-mesh-4")
    graph = topo.graph
    nvlink_Bps = [b for u, v, b in graph.edges(data="bandwidth_Bps") if graph.edges[u, v]["kind"] == "nvlink"]
    assert len(nvlink_Bps) == 12 and set(nvlink_Bps) == {50e9}
    assert topo.intra_bandwidth_Bps == 150e9


def test_switch_wiring_fewer_links_carries_their_share(make):
    """An A100 board wiring 4 of the module's 12 NVLink3 links to the switch: each GPU reaches it at 4 x 25 GB/s
    per direction, a third of the HGX A100 board's 300; the A100 module fits both, the A800 (8 links) neither."""
    wired = make(gpu="A100-SXM4-80GB", nodes=1, intra="nvswitch-nvlink3-4links", net=None)
    full = make(gpu="A100-SXM4-80GB", nodes=1, intra="nvswitch-nvlink3", net=None)
    assert wired.graph.edges["s0/gpu0", "s0/nvswitch"]["bandwidth_Bps"] == 100e9
    assert (wired.intra_bandwidth_Bps, full.intra_bandwidth_Bps) == (100e9, 300e9)
    with pytest.raises(ValueError, match="nvswitch-nvlink3-4links"):
        make(gpu="A800-SXM4-80GB", nodes=1, intra="nvswitch-nvlink3-4links", net=None)


def test_pcie_server_has_no_nvlink_and_reports_pcie_bandwidth(make):
    """L40S on PCIe Gen4: no NVLink edges; per-GPU intra bandwidth is the x16 Gen4 link (~31.5 GB/s)."""
    topo = make(gpu="L40S", nodes=1, intra="pcie4")
    assert _count(topo.graph, "nvlink") == 0
    assert topo.intra_bandwidth_Bps == pytest.approx(31.5e9, rel=0.001)
    assert topo.p2p and not topo.nvls


def test_nvl72_gpus_share_one_domain_switch(make):
    """GB200 NVL72, 18 trays: one domain NVSwitch linked to all 72 GPUs at 900 GB/s; no tray NVSwitch."""
    topo = make(gpu="GB200", gpus=4, nodes=18, intra="nvlink5-nvl72", net=None)
    switches = [n for n, k in topo.graph.nodes(data="kind") if k == "nvswitch"]
    assert switches == ["nvl0/nvswitch"]
    assert topo.graph.in_degree("nvl0/nvswitch") == 72
    assert topo.gpus_per_nvlink_domain == 72 and topo.intra_bandwidth_Bps == 900e9 and topo.nvls


def test_nics_follow_gpu_affinity_on_their_pcie_switch(make):
    """Each NIC hangs under the PCIe switch of the GPU that uses it (AWS p5: 4 NICs per GPU)."""
    topo = make(nodes=1, net={"transport": "efa", "nics_per_node": 32, "nic_gbps": 100})
    assert topo.nics_of_gpu(0, 1) == [f"s0/nic{k}" for k in (4, 5, 6, 7)]
    for gpu in range(8):
        switch = next(v for v in topo.graph.succ[f"s0/gpu{gpu}"] if topo.graph.nodes[v]["kind"] == "pcie_switch")
        for nic in topo.nics_of_gpu(0, gpu):
            assert topo.graph.has_edge(nic, switch)


@pytest.mark.parametrize(("gpus", "nics"), [(8, 8), (8, 4), (8, 32), (4, 2), (8, 3), (2, 2)])
def test_every_nic_is_used_by_some_gpu(gpus, nics):
    """The GPU->NIC affinity covers every NIC; with at least one NIC per GPU, no NIC is shared."""
    used = [k for g in range(gpus) for k in nics_of_gpu(g, gpus, nics)]
    assert set(used) == set(range(nics))
    assert len(used) == (nics if nics >= gpus else gpus)


def test_build_is_deterministic(make):
    """Two builds of the same spec give identical node and edge lists with identical attributes."""
    a, b = make(nodes=3).graph, make(nodes=3).graph
    assert list(a.nodes(data=True)) == list(b.nodes(data=True))
    assert list(a.edges(data=True)) == list(b.edges(data=True))


_PLATFORMS = [
    ("H100-SXM5-80GB", "nvswitch-nvlink4", 8),
    ("V100-SXM2-16GB", "nvlink2-hybrid-cube-mesh", 8),
    ("V100-SXM2-16GB", "nvlink2-full-mesh-4", 4),
    ("L40S", "pcie4", 10),
    ("RTX-2080-Ti", "pcie3-no-p2p", 4),
    ("GB200", "nvlink5-nvl72", 4),
]


@settings(max_examples=60, deadline=None)
@given(
    platform=st.sampled_from(_PLATFORMS),
    data=st.data(),
    nodes=st.integers(1, 5),
    nics=st.integers(1, 12),
    fabric=st.sampled_from(["single_switch", "leaf_spine", "rail_optimized"]),
    per_leaf=st.integers(1, 3),
)
def test_random_clusters_are_symmetric_and_connected(platform, data, nodes, nics, fabric, per_leaf):
    """Any valid small cluster: every link has its reverse with equal figures, group sizes add up to
    the link count, and GPU 0 of server 0 has a route to every GPU."""
    gpu, intra, max_gpus = platform
    gpus = data.draw(st.sampled_from([4] if intra == "nvlink5-nvl72" else list(range(1, max_gpus + 1))))
    layout = {} if fabric == "single_switch" else {"nodes_per_leaf": per_leaf}
    net = {"transport": "roce", "nics_per_node": nics, "nic_gbps": 100}
    domain = (8 if nodes % 2 == 0 else 4) if intra == "nvlink5-nvl72" else None  # domains the GPUs fill
    spec = TopologySpec(gpu=gpu, gpus_per_node=gpus, nodes=nodes, intra_node=intra, inter_node=net,
                        fabric={"kind": fabric, **layout}, nvlink_domain_gpus=domain)
    topo = build(spec)
    for u, v, bw in topo.graph.edges(data="bandwidth_Bps"):
        assert topo.graph.edges[v, u]["bandwidth_Bps"] == bw
    groups = {g for _, _, g in topo.graph.edges(data="group")}
    assert sum(topo.group_size(g) for g in groups) == topo.graph.number_of_edges()
    for server in range(nodes):
        for local in range(gpus):
            if (server, local) != (0, 0):
                assert topo.path(topo.gpu_id(0, 0), topo.gpu_id(server, local))[-1][1] == topo.gpu_id(server, local)
