"""Routes: never through a GPU or a foreign NIC, NVLink before PCIe, host staging when P2P or
GPUDirect RDMA is off, a GPU's own NIC between servers, determinism."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.core.errors import TopologyError
from topologies.build import build
from topologies.presets import load_preset


def _nodes(route):
    return [route[0][0]] + [v for _, v in route]


def _interior_kinds(topo, route):
    return [topo.graph.nodes[n]["kind"] for n in _nodes(route)[1:-1]]


_TOPOLOGIES = {
    **{
        name: build(load_preset(name, nodes=3))
        for name in ("dgx-h100", "dgx-1-v100", "pcie-l40s", "aws-p5", "abci-v", "h100-tcp-100g")
    },
    "dgx-a100 without GPUDirect": build(load_preset("dgx-a100", nodes=3, inter_node={"gpudirect_rdma": False})),
    "pcie-l40s without P2P": build(load_preset("pcie-l40s", nodes=3, intra_node="pcie4-no-p2p")),
    "gb200-nvl72 two domains": build(load_preset("gb200-nvl72", nodes=20)),
}


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(_TOPOLOGIES)), data=st.data())
def test_routes_never_transit_a_gpu_or_nic(name, data):
    """For any two traffic ends (GPU, NIC, CPU memory), the route is made of existing links chained end
    to end, passes through no GPU, and through a NIC only where it leaves or enters a server."""
    topo = _TOPOLOGIES[name]
    devices = sorted(n for n, kind in topo.graph.nodes(data="kind") if kind in ("gpu", "nic", "cpu"))
    src, dst = data.draw(st.sampled_from(devices)), data.draw(st.sampled_from(devices))
    route = topo.path(src, dst)
    if src == dst:
        assert route == []
        return
    assert route[0][0] == src and route[-1][1] == dst
    assert all(topo.graph.has_edge(u, v) for u, v in route)
    assert all(a[1] == b[0] for a, b in zip(route, route[1:], strict=False))
    nodes = _nodes(route)
    assert "gpu" not in _interior_kinds(topo, route)
    servers = {topo.graph.nodes[src]["server"], topo.graph.nodes[dst]["server"]}
    for i, node in enumerate(nodes[1:-1], start=1):
        if topo.graph.nodes[node]["kind"] == "nic":  # only where the route leaves or enters a server
            assert topo.graph.nodes[node]["server"] in servers
            assert "leaf" in (topo.graph.nodes[nodes[i - 1]]["kind"], topo.graph.nodes[nodes[i + 1]]["kind"])


def test_nvswitch_route_inside_a_server(make):
    """GPU to GPU in a DGX H100 goes over the NVSwitch, not the shared PCIe switch."""
    assert make(nodes=1).path("s0/gpu0", "s0/gpu1") == [("s0/gpu0", "s0/nvswitch"), ("s0/nvswitch", "s0/gpu1")]


def test_hybrid_cube_mesh_unlinked_pair_goes_over_pcie_and_smp():
    """DGX-1: GPU0 and GPU5 share no NVLink, so the route crosses both sockets' PCIe and the SMP link."""
    topo = _TOPOLOGIES["dgx-1-v100"]
    assert topo.path("s0/gpu0", "s0/gpu3") == [("s0/gpu0", "s0/gpu3")]
    assert _nodes(topo.path("s0/gpu0", "s0/gpu5")) == [
        "s0/gpu0", "s0/pcie0", "s0/cpu0", "s0/cpu1", "s0/pcie2", "s0/gpu5"]


def test_inter_node_route_uses_the_gpu_rail(make):
    """Rail-optimized: GPU3 to GPU3 of another server goes NIC3 -> rail leaf 3 -> NIC3, no spine."""
    assert _nodes(make(nodes=2).path("s0/gpu3", "s1/gpu3")) == [
        "s0/gpu3", "s0/pcie1", "s0/nic3", "leaf3", "s1/nic3", "s1/pcie1", "s1/gpu3"]


def test_cross_rail_route_crosses_one_spine(make):
    """GPU0 to GPU5 of another server leaves on rail 0 and enters on rail 5 through one spine."""
    topo = make(nodes=2)
    kinds = _interior_kinds(topo, topo.path("s0/gpu0", "s1/gpu5"))
    assert kinds == ["pcie_switch", "nic", "leaf", "spine", "leaf", "nic", "pcie_switch"]


def test_gpudirect_off_stages_nic_traffic_through_the_cpu(make):
    """GPUDirect RDMA off: GPU -> NIC goes up to the CPU (host memory) and back down to the NIC."""
    net = {"transport": "ib", "nics_per_node": 8, "nic_gbps": 400, "gpudirect_rdma": False}
    topo = make(nodes=2, net=net)
    assert _nodes(topo.path("s0/gpu0", "s0/nic0")) == ["s0/gpu0", "s0/pcie0", "s0/cpu0", "s0/pcie0", "s0/nic0"]
    route = _nodes(topo.path("s0/gpu0", "s1/gpu0"))
    assert route.count("s0/cpu0") == 1 and route.count("s1/cpu0") == 1
    direct = make(nodes=2).path("s0/gpu0", "s0/nic0")
    assert _nodes(direct) == ["s0/gpu0", "s0/pcie0", "s0/nic0"]


def test_no_p2p_stages_gpu_to_gpu_through_the_cpu(make):
    """PCIe without peer-to-peer: two GPUs under one PCIe switch still meet in host memory."""
    topo = make(gpu="RTX-2080-Ti", gpus=2, nodes=1, intra="pcie3-no-p2p")
    assert _nodes(topo.path("s0/gpu0", "s0/gpu1")) == ["s0/gpu0", "s0/pcie0", "s0/cpu0", "s0/pcie0", "s0/gpu1"]
    p2p = make(gpu="RTX-2080-Ti", gpus=2, nodes=1, intra="pcie3")
    assert _nodes(p2p.path("s0/gpu0", "s0/gpu1")) == ["s0/gpu0", "s0/pcie0", "s0/gpu1"]


def test_pcie5_without_p2p_stages_through_the_cpu(make):
    """pcie5-no-p2p (RTX 5090-class GeForce hosts): a Gen5 host whose GPUs meet in host memory."""
    topo = make(gpu="RTX-6000D", gpus=2, nodes=1, intra="pcie5-no-p2p")
    assert _nodes(topo.path("s0/gpu0", "s0/gpu1")) == ["s0/gpu0", "s0/pcie0", "s0/cpu0", "s0/pcie0", "s0/gpu1"]
    assert topo.platform.host_pcie_gen == 5 and not topo.platform.p2p


def test_nvl72_trays_talk_over_the_domain_switch(make):
    """GPUs of different trays in one NVL72 domain meet at the domain NVSwitch; other domains via the NICs."""
    net = {"transport": "ib", "nics_per_node": 4, "nic_gbps": 400}
    topo = make(gpu="GB200", gpus=4, nodes=36, intra="nvlink5-nvl72", net=net)
    assert _nodes(topo.path("s0/gpu1", "s17/gpu2")) == ["s0/gpu1", "nvl0/nvswitch", "s17/gpu2"]
    assert "s0/nic1" in _nodes(topo.path("s0/gpu1", "s18/gpu1"))


def test_routes_are_deterministic_and_spread_over_spines(make):
    """Rebuilt topologies give the same routes; cross-rail routes use more than one spine (D-mod-k)."""
    first, second = make(nodes=8), make(nodes=8)
    pairs = [(f"s{a}/gpu0", f"s{b}/gpu{b % 8}") for a in range(8) for b in range(8) if a != b]
    assert [first.path(*p) for p in pairs] == [second.path(*p) for p in pairs]
    spines = {n for p in pairs for n in _nodes(first.path(*p)) if first.graph.nodes[n]["kind"] == "spine"}
    assert len(spines) > 1


def test_unknown_device_and_unnetworked_servers_raise(make):
    """A missing device, or a route between servers that have no NICs, is a TopologyError."""
    topo = make(nodes=1)
    with pytest.raises(TopologyError, match="no device"):
        topo.path("s0/gpu0", "s9/gpu0")
    nvl = make(gpu="GB200", gpus=4, nodes=18, intra="nvlink5-nvl72", net=None)
    assert len(nvl.path("s0/gpu0", "s1/gpu0")) == 2
    with pytest.raises(TopologyError, match="no network"):
        nvl.path("s0/cpu0", "s1/cpu0")
