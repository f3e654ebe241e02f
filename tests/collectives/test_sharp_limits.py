"""SHARP (CollNet) limits: on HDR (Quantum) switches at most two streaming aggregation flows a switch, one per HCA
rail of a node; from NDR (Quantum-2) on, one per port."""

from __future__ import annotations

import pytest

from simulator.collectives.algorithms import shapes_for
from simulator.collectives.comm import CommView, comm_view
from simulator.collectives.predict import predict_collective
from simulator.core.errors import ConfigError
from topologies.build import build
from topologies.presets import load_preset

GIB = 1 << 30
SHARP_IB = {"transport": "ib", "nics_per_node": 8, "nic_gbps": 200, "sharp": True}  # HDR: Quantum switches


def dgx(nodes: int, fabric: dict[str, object], **inter_node: object) -> CommView:
    return comm_view(build(load_preset("dgx-h100", nodes=nodes, fabric=fabric, inter_node={**SHARP_IB, **inter_node})))


def algos(v: CommView) -> list[str]:
    return [shape.algo for shape in shapes_for("all_reduce", v)]


def test_rails_a_leaf_holds_by_hand():
    """A rail-optimised leaf holds one rail (NIC i) of each server; a leaf_spine leaf or a single switch all 8
    NICs of its servers; a GB200 NVL72 rack (18 trays of 4 NICs, one node to NCCL) puts 18 of its NICs on
    each of its 4 rail leaves."""
    assert dgx(8, {"kind": "rail_optimized"}).rails_per_leaf == 1
    assert dgx(8, {"kind": "leaf_spine"}).rails_per_leaf == 8
    assert dgx(2, {"kind": "single_switch"}).rails_per_leaf == 8
    assert comm_view(build(load_preset("gb200-nvl72", nodes=36))).rails_per_leaf == 18


def test_collnet_on_rails_and_off_beyond_two_rails_a_switch():
    """SHARP on an HDR rail-optimised fabric: CollNet is offered. The same servers on leaf_spine put 8 rails on
    a leaf, beyond the Quantum switch's 2 streaming aggregation flows: NCCL's CollNet setup fails and it runs
    its other algorithms, priced exactly as with NCCL_COLLNET_ENABLE=0. At NDR (400 Gb/s, Quantum-2, one
    tree per port) the leaf_spine fabric keeps CollNet."""
    rails, leaves = dgx(8, {"kind": "rail_optimized"}), dgx(8, {"kind": "leaf_spine"})
    assert "collnet" in algos(rails)
    assert "collnet" not in algos(leaves)
    for size in (1 << 20, GIB):
        assert (predict_collective(leaves, "all_reduce", size).time_s
                == predict_collective(leaves, "all_reduce", size, env={"NCCL_COLLNET_ENABLE": "0"}).time_s)
    assert "collnet" in algos(dgx(8, {"kind": "leaf_spine"}, nic_gbps=400))


@pytest.mark.parametrize(("nics", "offered"), [(1, True), (2, True), (4, False)])
def test_two_rails_a_switch_is_the_limit(nics: int, offered: bool):
    """HDR leaf_spine servers of 1 or 2 NICs stay within the 2 flows a switch; 4 NICs do not."""
    v = dgx(8, {"kind": "leaf_spine"}, nics_per_node=nics)
    assert v.rails_per_leaf == nics
    assert ("collnet" in algos(v)) is offered


def test_pinning_collnet_beyond_the_limit_is_refused():
    """Asking for CollNet where the switches cannot hold its flows is a one-line error naming what is left."""
    with pytest.raises(ConfigError, match="algorithms available: none") as info:
        predict_collective(dgx(8, {"kind": "leaf_spine"}), "all_reduce", GIB, algo="collnet")
    assert "\n" not in str(info.value)
