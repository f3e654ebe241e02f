"""HPE Slingshot-11 (transport `slingshot`) and the 4-GPU nodes on it (presets cscs-alps-gh200, nersc-perlmutter,
alcf-polaris; intra_node nvlink3-full-mesh-4): their figures as the sources state them, and predictions that
move as the hardware does."""

from __future__ import annotations

import pytest

import simulator as cs
from simulator.collectives.comm import comm_view
from simulator.collectives.transports import TRANSPORTS
from topologies.build import build
from topologies.presets import load_preset
from topologies.spec import InterNodeSpec

GIB = 1 << 30


def all_reduce_us(topology: str | dict, nodes: int, size: int = GIB, **kw) -> float:
    return cs.collective(topology, nodes=nodes, op="all_reduce", sizes=[size], **kw).rows[0].time_us


def test_slingshot_defaults_to_a_200g_nic_adaptively_routed():
    """Cassini NICs are 200 Gb/s; Rosetta routes each packet adaptively."""
    net = InterNodeSpec.model_validate({"transport": "slingshot", "nics_per_node": 4})
    assert (net.nic_gbps, net.nic_gbps_presumed, net.gpudirect_rdma) == (200.0, True, True)
    assert load_preset("cscs-alps-gh200").routing == "adaptive"


@pytest.mark.parametrize(("preset", "gpu", "nics", "pair_GBps"), [
    ("cscs-alps-gh200", "GH200-96GB", 4, 150.0),   # 6 NVLink4 links of 25 GB/s a pair (CSCS node schematic)
    ("nersc-perlmutter", "A100-SXM4-40GB", 4, 100.0),  # 4 NVLink3 links of 25 GB/s a pair
    ("alcf-polaris", "A100-SXM4-40GB", 2, 100.0),
])
def test_presets_hold_the_published_node(preset: str, gpu: str, nics: int, pair_GBps: float):
    spec = load_preset(preset).model_copy(update={"nodes": 2})
    graph = build(spec).graph
    assert (spec.gpu, spec.gpus_per_node, spec.inter_node.nics_per_node, spec.inter_node.transport) == (
        gpu, 4, nics, "slingshot")
    pairs = {(u, v): d["bandwidth_Bps"] for u, v, d in graph.edges(data=True)
             if d["kind"] == "nvlink" and u.startswith("s0/") and v.startswith("s0/")}
    assert len(pairs) == 12 and set(pairs.values()) == {pair_GBps * 1e9}
    nic_links = [d["bandwidth_Bps"] for _, _, d in graph.edges(data=True) if d["kind"] == "slingshot"]
    assert nic_links and min(nic_links) == 25e9  # 200 Gb/s


def test_slingshot_prices_as_infiniband_of_the_same_line_rate():
    """The same efficiency as InfiniBand and no per-message floor of its own: a large all_reduce over Slingshot
    takes what one over InfiniBand NICs of the same speed takes, within the switches' latency."""
    assert (TRANSPORTS["slingshot"].efficiency, TRANSPORTS["slingshot"].extra_hop_latency_us) == (
        TRANSPORTS["ib"].efficiency, 0.0)
    alps = load_preset("cscs-alps-gh200").model_dump()
    ib = {**alps, "inter_node": {**alps["inter_node"], "transport": "ib"}}
    assert all_reduce_us(alps, 8) == pytest.approx(all_reduce_us(ib, 8), rel=0.01)


def test_more_nics_are_never_slower():
    """Polaris's two NICs a node against Perlmutter's four, on the same A100 board."""
    for size in (1 << 20, 64 << 20, GIB):
        assert all_reduce_us("nersc-perlmutter", 4, size) <= all_reduce_us("alcf-polaris", 4, size)
    assert all_reduce_us("alcf-polaris", 4) > 1.5 * all_reduce_us("nersc-perlmutter", 4)


def test_each_gpu_has_its_own_nic_on_alps():
    """One NIC a GPU: the network rate a GPU sees is one Cassini NIC's (0.96 of 25 GB/s)."""
    view = comm_view(build(load_preset("cscs-alps-gh200").model_copy(update={"nodes": 2})))
    assert view.transport == "slingshot"
    assert view.nics_per_node == 4


@pytest.mark.parametrize(("preset", "nics"), [("cscs-alps-gh200", 4), ("alcf-polaris", 2)])
def test_a_degraded_nic_prices_the_same_on_any_server_and_slows_the_job(preset: str, nics: int):
    """Metamorphic check of the one-server shortcut on the 4-GPU nodes: a NIC at half rate on server 0, 2 or 3
    (any of its NICs) gives the same all_gather, slower than the healthy cluster."""
    def all_gather_us(faults: list[dict]) -> float:
        return cs.collective(load_preset(preset, nodes=4, link_faults=faults), op="all_gather",
                             sizes=[GIB]).rows[0].time_us

    healthy = all_gather_us([])
    times = [all_gather_us([{"device": f"s{server}/nic{nic}", "factor": 0.5}])
             for server, nic in ((0, 0), (2, nics - 1), (3, 1))]
    assert max(times) == pytest.approx(min(times), rel=0.01)
    assert min(times) > 1.2 * healthy
