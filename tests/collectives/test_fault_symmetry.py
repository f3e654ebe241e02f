"""Metamorphic tests of the symmetry shortcut: a faulty server is priced on its own links, whichever
server it is, and the healthy ones on theirs (simulator.collectives.comm.server_classes)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.collectives.comm import comm_view, server_classes
from simulator.collectives.predict import predict_collective
from topologies.build import build
from topologies.presets import load_preset

GIB = 1 << 30
NODES = 4


def cluster(nodes: int = NODES, faults: list[tuple[str, float]] = (), **overrides: object):  # type: ignore[assignment]
    return build(load_preset("dgx-h100", nodes=nodes, link_faults=[{"device": d, "factor": f} for d, f in faults],
                             **overrides))


def all_gather_s(topology) -> float:
    return predict_collective(comm_view(topology), "all_gather", GIB).time_s


HEALTHY_S = all_gather_s(cluster())
FACTORS = st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9, 1.0])


def test_a_degraded_nic_counts_on_every_server():
    """1 GiB all_gather on 4 x DGX H100 with one NIC at 0.1: the same time on s0, s2 or s3 (any NIC: the
    servers are rail-optimised), and over 2x the healthy time (its rail paces every channel)."""
    times = [all_gather_s(cluster(faults=[(device, 0.1)])) for device in ("s0/nic3", "s2/nic3", "s3/nic5")]
    assert times[1] == pytest.approx(times[0], rel=0.01) and times[2] == pytest.approx(times[0], rel=0.01)
    assert times[0] > 2 * HEALTHY_S


@settings(max_examples=25, deadline=None)
@given(server=st.integers(0, NODES - 1), nic=st.integers(0, 7), factor=FACTORS)
def test_moving_a_nic_fault_to_an_equivalent_nic_changes_nothing(server: int, nic: int, factor: float):
    """Every NIC of every server is alike: a fault on any of them prices as on s0/nic0."""
    moved = comm_view(cluster(faults=[(f"s{server}/nic{nic}", factor)]))
    assert moved == comm_view(cluster(faults=[("s0/nic0", factor)]))


@settings(max_examples=15, deadline=None)
@given(servers=st.lists(st.integers(0, 7), min_size=1, max_size=3, unique=True), shift=st.integers(1, 7),
       factor=FACTORS.filter(lambda f: f > 0))
def test_relabelling_servers_changes_nothing(servers: list[int], shift: int, factor: float):
    """The same faults on other servers (server s -> (s + shift) mod 8) give the same communicator."""
    faults = [(f"s{s}/nic2", factor) for s in servers]
    relabelled = [(f"s{(s + shift) % 8}/nic2", factor) for s in servers]
    assert comm_view(cluster(8, faults)) == comm_view(cluster(8, relabelled))


@settings(max_examples=25, deadline=None)
@given(device=st.sampled_from(["s1/nic0", "s3/gpu5", "s2/pcie1", "nic4", "gpu2", "s0/nvswitch", "leaf0", "spine1"]),
       factor=FACTORS)
def test_a_fault_never_speeds_a_collective_up(device: str, factor: float):
    """Degrading or failing a device can only slow a collective (or leave it as it was)."""
    if factor == 0.0 and device in ("gpu2", "s3/gpu5", "s0/nvswitch", "s2/pcie1"):
        return  # failing these cuts GPUs off: a partition, tested elsewhere
    assert all_gather_s(cluster(faults=[(device, factor)])) >= HEALTHY_S * (1 - 1e-12)


def test_a_fault_on_a_device_nothing_uses_changes_nothing():
    """One server: its NICs carry nothing, so a degraded NIC leaves its collectives alone; 4 servers under the
    same rail leaves: nothing crosses the spines, so a degraded spine changes nothing."""
    one = all_gather_s(cluster(1))
    assert all_gather_s(cluster(1, [("s0/nic3", 0.1)])) == one
    assert all_gather_s(cluster(faults=[("spine0", 0.1)])) == HEALTHY_S


@pytest.mark.parametrize("factor", [0.25, 0.5])
def test_all_nics_of_one_server_at_f_is_a_cluster_of_f_times_the_nic_speed(factor: float):
    """Every NIC of s2 at factor f: the ring waits for s2, so the collective takes what it takes on a cluster
    whose NICs all run at f x 400 Gb/s."""
    degraded = cluster(faults=[(f"s2/nic{k}", factor) for k in range(8)])
    slower = cluster(inter_node={"nic_gbps": 400 * factor})
    assert all_gather_s(degraded) == pytest.approx(all_gather_s(slower), rel=1e-9)


def test_server_classes_price_each_fault_once():
    """Three servers with NIC 3 at 0.1 and one with GPU 2 at 0.5 on 16 servers: the healthy class (12 servers),
    one class for the three alike, one for the other; the degraded GPU lowers its server's NVLink rate."""
    faults = [("s1/nic3", 0.1), ("s7/nic3", 0.1), ("s9/nic3", 0.1), ("s4/gpu2", 0.5)]
    classes = server_classes(cluster(16, faults))
    assert [(c.count, c.servers, c.faults) for c in classes] == [
        (12, (), ()), (3, (1, 7, 9), (("nic3", 0.1),)), (1, (4,), (("gpu2", 0.5),))]
    healthy, nic, gpu = classes
    assert nic.net_Bps == pytest.approx(healthy.net_Bps * 0.1)
    assert gpu.intra_Bps == pytest.approx(healthy.intra_Bps * 0.5) and nic.intra_Bps == healthy.intra_Bps


@settings(max_examples=12, deadline=None)
@given(server=st.integers(0, NODES - 1), gpu=st.integers(0, 7), factor=FACTORS.filter(lambda f: f > 0))
def test_the_nics_nccls_channels_reach_follow_a_degraded_gpu_wherever_it_is(server: int, gpu: int, factor: float):
    """NCCL's channel search is bounded by the slowest GPU's NVLink (simulator.collectives.nccl_search): a
    degraded GPU link cuts the NICs the channels reach the same on any server and any GPU of it."""
    moved = comm_view(cluster(faults=[(f"s{server}/gpu{gpu}", factor)]))
    assert moved == comm_view(cluster(faults=[("s0/gpu0", factor)]))
    assert predict_collective(moved, "all_reduce", GIB).time_s >= predict_collective(
        comm_view(cluster()), "all_reduce", GIB).time_s * (1 - 1e-9)


def test_a_degraded_gpu_in_either_nvl72_rack_prices_alike():
    """Two GB200 NVL72 racks: the same degraded GPU link in the first or the second rack, the same all_reduce."""
    def rack_pair(device: str) -> float:
        topology = build(load_preset("gb200-nvl72", nodes=36, link_faults=[{"device": device, "factor": 0.5}]))
        return predict_collective(comm_view(topology), "all_reduce", GIB).time_s
    assert rack_pair("s2/gpu1") == pytest.approx(rack_pair("s20/gpu3"), rel=1e-9)
