"""Faults as data: degraded rails, failed NICs and spines, partitions (topology link_faults)."""

from __future__ import annotations

import pytest

from simulator.collectives.comm import comm_view
from simulator.collectives.predict import predict_collective
from simulator.core.errors import ConfigError, TopologyError
from topologies.build import build
from topologies.presets import load_preset

GIB = 1 << 30


def view(nodes: int = 4, **overrides: object):
    return comm_view(build(load_preset("dgx-h100", nodes=nodes, **overrides)))


def ring_time(v) -> float:
    return predict_collective(v, "all_gather", GIB, algo="ring", proto="simple").time_s


def test_degrading_one_rail_paces_the_ring():
    """Rail 3 at half rate on every server: NCCL gives each rail's channels an equal share and waits
    for the slowest, so the node's network rate halves and a network-bound ring takes ~2x."""
    healthy, degraded = view(), view(link_faults=[{"device": "nic3", "factor": 0.5}])
    assert degraded.net_Bps == pytest.approx(healthy.net_Bps / 2)
    assert ring_time(degraded) == pytest.approx(2 * ring_time(healthy), rel=0.1)


def test_a_failed_nic_reroutes_through_another():
    """NIC 3 of server 0 fails: GPU 3 sends through another NIC, which now carries two GPUs' share."""
    healthy, failed = view(), view(link_faults=[{"device": "s0/nic3", "factor": 0.0}])
    assert failed.net_Bps == pytest.approx(healthy.net_Bps / 2)
    assert ring_time(failed) > 1.5 * ring_time(healthy)


def test_failing_one_of_two_spines_halves_cross_leaf_bandwidth():
    """Leaf-spine with 2:1 oversubscription and 2 spines: failing one at least halves what crosses leaves."""
    fabric = {"kind": "leaf_spine", "oversubscription": 2.0, "spines": 2}
    healthy = view(nodes=16, fabric=fabric)
    failed = view(nodes=16, fabric=fabric, link_faults=[{"device": "spine0", "factor": 0.0}])
    assert failed.spine_Bps <= healthy.spine_Bps / 2 * (1 + 1e-9)
    a2a = [predict_collective(v, "alltoall", GIB).time_s for v in (healthy, failed)]
    assert a2a[1] >= 1.5 * a2a[0]


def test_a_partition_is_reported_not_hung():
    """Failing every NIC of a server cuts it off: a TopologyError naming the cut, at once."""
    faults = [{"device": f"s1/nic{k}", "factor": 0.0} for k in range(8)]
    with pytest.raises(TopologyError, match="partitions the cluster"):
        view(link_faults=faults)


def test_an_unknown_device_is_a_config_error():
    """A fault on a device that does not exist names it and what this cluster has instead: a one-NIC
    server on a single leaf lists nic0 and leaf, and no spine (not a fixed list of examples, spine1 among
    them, on clusters without spines)."""
    with pytest.raises(ConfigError, match="nic42"):
        view(link_faults=[{"device": "nic42", "factor": 0.5}])
    with pytest.raises(ConfigError, match=r"roles: .*gpu0-7, leaf, nic0, .*devices, e\.g\. .*s0/nic0") as info:
        build(load_preset("h100-tcp-100g", nodes=2, link_faults=[{"device": "spine0", "factor": 0.5}]))
    assert "spine" not in str(info.value).split("cluster;")[1]
