"""PCIe servers whose cards are joined in pairs by NVLink bridges (intra_node pcie4/pcie5-nvlink-bridges): a
bridge carries the pair's traffic at the card's NVLink rate, and nothing else; a ring or tree over more than one
pair crosses PCIe between pairs and runs at that pace (as on the same server without bridges)."""

from __future__ import annotations

import pytest

import simulator as cs
from simulator.collectives.comm import comm_view
from simulator.core.errors import ConfigError
from topologies.build import build
from topologies.hardware import gpu_spec
from topologies.spec import validate_topology_spec

GIB = 1 << 30


def server(gpu: str, gpus: int, intra_node: str) -> dict:
    return {"gpu": gpu, "gpus_per_node": gpus, "nodes": 1, "intra_node": intra_node}


def all_reduce_us(spec: dict, size: int = GIB) -> float:
    return cs.collective(spec, op="all_reduce", sizes=[size]).rows[0].time_us


@pytest.mark.parametrize(("gpu", "host"), [("A100-PCIe-80GB", "pcie4"), ("H100-NVL-94GB", "pcie5"),
                                           ("RTX-A6000", "pcie4")])
def test_a_bridged_pair_talks_over_its_bridge(gpu: str, host: str):
    """Two bridged cards: NVLink at the bridge's rate (the card's NVLinks, one direction), far faster than PCIe."""
    spec = validate_topology_spec(server(gpu, 2, f"{host}-nvlink-bridges"), "test")
    view = comm_view(build(spec))
    bridge_Bps = gpu_spec(gpu).nvlink_GBps_per_direction * 1e9
    assert (view.intra_kind, view.intra_Bps, view.bridge_Bps) == ("nvlink", bridge_Bps, bridge_Bps)
    assert all_reduce_us(server(gpu, 2, f"{host}-nvlink-bridges")) < 0.6 * all_reduce_us(server(gpu, 2, host))


@pytest.mark.parametrize("gpus", [3, 4, 8])
def test_more_than_one_pair_runs_at_pcie_pace(gpus: int):
    """Over 3, 4 or 8 cards every collective crosses PCIe between pairs: the same prediction as without bridges."""
    for size in (1 << 16, 1 << 24, GIB):
        assert all_reduce_us(server("A100-PCIe-80GB", gpus, "pcie4-nvlink-bridges"), size) == pytest.approx(
            all_reduce_us(server("A100-PCIe-80GB", gpus, "pcie4"), size), rel=1e-12)


def test_graph_joins_even_and_odd_cards_only():
    topology = build(validate_topology_spec(server("A100-PCIe-80GB", 4, "pcie4-nvlink-bridges"), "test"))
    nvlinks = {(u, v) for u, v, kind in topology.graph.edges(data="kind") if kind == "nvlink"}
    gpu = topology.gpu_id
    assert nvlinks == {(gpu(0, 0), gpu(0, 1)), (gpu(0, 1), gpu(0, 0)), (gpu(0, 2), gpu(0, 3)), (gpu(0, 3), gpu(0, 2))}


def test_a_tensor_parallel_pair_uses_the_bridge_and_the_rest_does_not():
    """TP 2 on four bridged cards: each TP group is a bridged pair, so its all-reduces are faster than on the same
    server without bridges; data parallelism over all four cards runs over PCIe either way (the same step)."""
    def step_s(intra_node: str, tp: int) -> float:
        topology = {"gpu": "A100-PCIe-80GB", "gpus_per_node": 4, "nodes": 1, "intra_node": intra_node}
        return cs.predict(cs.Scenario(topology=topology, model="llama2-7b", tp=tp, global_batch=8, seq_len=2048,
                                      strategy="ddp")).step_time_s

    assert step_s("pcie4-nvlink-bridges", 2) < step_s("pcie4", 2)
    assert step_s("pcie4-nvlink-bridges", 1) == pytest.approx(step_s("pcie4", 1), rel=1e-12)


@pytest.mark.parametrize(("gpu", "intra_node", "message"), [
    ("H100-SXM5-80GB", "pcie5-nvlink-bridges", "is a module, not a card"),
    ("L40S", "pcie4-nvlink-bridges", "has no NVLink for a bridge"),
    ("A100-PCIe-80GB", "nvswitch-nvlink3", "pcie4-nvlink-bridges"),
])
def test_cards_and_platforms_that_do_not_fit_are_refused_naming_the_fix(gpu: str, intra_node: str, message: str):
    with pytest.raises(ConfigError, match=message):
        validate_topology_spec(server(gpu, 2, intra_node), "test")


@pytest.mark.parametrize("gpus", [2, 4])
def test_a_degraded_card_counts_the_same_on_any_server(gpus: int):
    """The view is priced on one server of each fault class: a card at half rate on server 0 or on server 2 gives the
    same prediction; its bridge runs at half rate, which slows a collective wherever the server's GPUs, not the one
    200 Gb/s NIC, set the pace (four cards at PCIe pace; two bridged cards alone)."""
    spec = {"gpu": "A100-PCIe-80GB", "gpus_per_node": gpus, "nodes": 3, "intra_node": "pcie4-nvlink-bridges",
            "inter_node": {"transport": "ib", "nics_per_node": 1, "nic_gbps": 200}}
    sizes = [1 << 20, GIB]

    def times(faults: list[dict]) -> list[float]:
        return [r.time_us for r in cs.collective(spec, op="all_reduce", sizes=sizes, link_faults=faults).rows]

    first, third = times([{"device": "s0/gpu1", "factor": 0.5}]), times([{"device": "s2/gpu1", "factor": 0.5}])
    assert first == pytest.approx(third, rel=1e-12)
    if gpus == 4:
        assert first[-1] > times([])[-1]
    pair = server("A100-PCIe-80GB", 2, "pcie4-nvlink-bridges")
    degraded = cs.collective(pair, op="all_reduce", sizes=[GIB], link_faults=[{"device": "s0/gpu1", "factor": 0.5}])
    assert degraded.rows[0].time_us > all_reduce_us(pair)
    view = comm_view(build(validate_topology_spec({**spec, "link_faults": [{"device": "s2/gpu1", "factor": 0.5}]},
                                                  "test")))
    assert view.bridge_Bps == pytest.approx(0.5 * gpu_spec("A100-PCIe-80GB").nvlink_GBps_per_direction * 1e9)
