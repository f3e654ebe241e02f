"""What the fabric does to collectives: spine oversubscription and GPUDirect RDMA off."""

from __future__ import annotations

import pytest

from simulator.collectives.comm import comm_view
from simulator.collectives.predict import predict_collective
from topologies.build import build
from topologies.presets import load_preset

GIB = 1 << 30


def view(**overrides: object):
    return comm_view(build(load_preset("dgx-h100", nodes=64, **overrides)))


def test_leaf_uplink_share_by_hand():
    """leaf_spine, 4 servers per leaf (32 ports / 8 NICs), 2:1: 16 uplinks x 50 GB/s per leaf, so a
    server's share is 800/4 = 200 GB/s; 4:1 gives 100 GB/s."""
    assert view(fabric={"kind": "leaf_spine", "oversubscription": 2.0}).spine_Bps == pytest.approx(200e9)
    assert view(fabric={"kind": "leaf_spine", "oversubscription": 4.0}).spine_Bps == pytest.approx(100e9)
    assert view(fabric={"kind": "leaf_spine", "oversubscription": 4.0}).nodes_per_leaf_group == 4


def test_oversubscription_slows_alltoall_but_hardly_a_ring():
    """4:1 spines: alltoall (most traffic crosses leaves) slows at least 2x; a pinned ring all_gather
    (only leaf-group boundaries cross) by under 5%."""
    full = view(fabric={"kind": "leaf_spine", "oversubscription": 1.0})
    thin = view(fabric={"kind": "leaf_spine", "oversubscription": 4.0})
    a2a = [predict_collective(v, "alltoall", GIB).time_s for v in (full, thin)]
    ring = [predict_collective(v, "all_gather", GIB, algo="ring").time_s for v in (full, thin)]
    assert a2a[1] >= 2.0 * a2a[0]
    assert ring[1] <= 1.05 * ring[0]


def test_gpudirect_off_lowers_network_bandwidth():
    """Without GPUDirect RDMA, NIC traffic is staged through the CPU: the node pushes less into the
    network, and bandwidth-bound collectives get slower."""
    on, off = view(), view(inter_node={"gpudirect_rdma": False})
    assert off.net_Bps < on.net_Bps
    assert predict_collective(off, "all_reduce", GIB).time_s > predict_collective(on, "all_reduce", GIB).time_s
