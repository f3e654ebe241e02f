"""ECMP collisions: few large flows hashed onto a leaf's uplinks, priced by the busiest uplink's load."""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.collectives.algorithms import direct_shape
from simulator.collectives.comm import CommView, comm_view
from simulator.collectives.cost import resource_demands
from simulator.collectives.ecmp import EXACT_MAX_FLOWS, expected_max_load, max_load_cdf
from simulator.collectives.params import prior_params
from simulator.collectives.predict import collective_table, predict_collective
from topologies.build import build
from topologies.presets import load_preset

GIB = 1 << 30
OPS = (("all_reduce", "ring"), ("all_reduce", "tree"), ("all_gather", "ring"), ("reduce_scatter", "ring"),
       ("alltoall", "auto"), ("sendrecv", "auto"))


def roce(nodes: int, **fabric: object) -> CommView:
    """HGX H100 servers on 8 x 400G RoCE (the preset, with the fabric given)."""
    return comm_view(build(load_preset("h100-roce-400g", nodes=nodes, fabric=fabric)))


def times(v: CommView, env: dict[str, str] | None = None) -> list[float]:
    return [predict_collective(v, op, GIB, algo=algo, env=env).time_s for op, algo in OPS]


def test_max_load_by_hand():
    """2 flows on 2 uplinks: both on one (p 1/2) or one each: E[max] = 1.5. 3 on 3: all apart 6/27, all on one
    3/27, else 2: E = (6 + 2 x 18 + 3 x 3) / 27 = 51/27. One uplink takes every flow; one flow loads one link;
    a floor of 2 flows (the NIC's own limit) lifts the lucky outcome: E[max(M, 2)] = 2 on 2 flows."""
    assert expected_max_load(2, 2) == pytest.approx(1.5)
    assert expected_max_load(3, 3) == pytest.approx(51 / 27)
    assert expected_max_load(5, 1) == 5.0
    assert expected_max_load(1, 64) == pytest.approx(1.0)
    assert expected_max_load(2, 2, floor=2.0) == pytest.approx(2.0)
    assert expected_max_load(2, 2, floor=1.25) == pytest.approx(0.5 * 1.25 + 0.5 * 2)


def test_max_load_distribution_sums_to_one_and_the_large_case_is_close():
    """The load distribution ends with certainty, and past EXACT_MAX_FLOWS the Poisson form stays within
    0.1% of the exact value at 64 uplinks (9.370 flows for 256 on 64, exact)."""
    assert max_load_cdf(40, 8)[-1][1] == pytest.approx(1.0, abs=1e-9)
    assert expected_max_load(EXACT_MAX_FLOWS, 64) == pytest.approx(9.3703, abs=1e-4)
    assert expected_max_load(EXACT_MAX_FLOWS + 1, 64) == pytest.approx(9.3703, rel=5e-3)


def _pair(ecmp: bool) -> CommView:
    """Two nodes under two leaves, one 50 GB/s NIC each, each leaf with 2 uplinks of 25 GB/s (non-blocking)."""
    return CommView(n_ranks=2, n_nodes=2, ranks_per_node=1, arch="hopper", intra_kind="nvlink", intra_Bps=450e9,
                    net_Bps=50e9, nics_per_node=1, transport="roce", nvls=False, sharp=False, gpudirect_rdma=True,
                    spine_Bps=50e9, nodes_per_leaf_group=1, ecmp=ecmp, uplinks_per_leaf=2, uplink_Bps=25e9)


def test_two_flows_on_two_uplinks_by_hand():
    """A sendrecv across leaves runs 2 flows (NCCL's 2 P2P channels a peer), 25 GB/s each from a 50 GB/s NIC.
    Hashed onto 2 uplinks of 25 GB/s they share one with p 1/2 (12.5 GB/s each: twice as long), else each has
    its own: the expected time through the spines is 1.5x the NIC's. Spread adaptively, the NIC's time."""
    shape = direct_shape("sendrecv", _pair(True))
    params = prior_params(_pair(True))
    hashed = resource_demands("sendrecv", shape, "simple", _pair(True), params)
    spread = resource_demands("sendrecv", shape, "simple", _pair(False), params)
    assert hashed["spine"] / hashed["net"] == pytest.approx(1.5)
    assert spread["spine"] == pytest.approx(spread["net"])
    four_qps = replace(_pair(True), flows_per_connection=4)  # 8 flows of 6.25 GB/s: E[max(M, 4)] / 4
    quartered = resource_demands("sendrecv", shape, "simple", four_qps, params)
    assert quartered["spine"] / quartered["net"] == pytest.approx(expected_max_load(8, 2, 4.0) / 4.0)


def test_two_flows_on_two_uplinks_through_a_built_fabric():
    """The same pair built as a fabric: leaf_spine, one server a leaf, one 400G NIC, 2 spines (links of
    25 GB/s). A 1 GiB sendrecv's spines take 1.5x its NIC's time, where adaptive routing takes the NIC's."""
    fabric = {"kind": "leaf_spine", "nodes_per_leaf": 1, "spines": 2}
    spec = {"inter_node": {"transport": "roce", "nics_per_node": 1, "nic_gbps": 400}}
    hashed, spread = (comm_view(build(load_preset("h100-roce-400g", nodes=2, fabric={**fabric, "routing": r},
                                                  **spec))) for r in ("ecmp", "adaptive"))
    assert (hashed.uplinks_per_leaf, hashed.uplink_Bps) == (2, pytest.approx(25e9))
    slow, fast = (dict(predict_collective(v, "sendrecv", GIB, proto="simple").demand_s_per_byte)
                  for v in (hashed, spread))
    assert slow["spine"] / slow["net"] == pytest.approx(1.5)
    assert fast["spine"] == pytest.approx(fast["net"])


@pytest.mark.parametrize("nodes", [2, 4])
def test_one_leaf_is_not_hashed(nodes: int):
    """Metamorphic: servers under one leaf (leaf_spine, 4 a leaf) or one switch cross no uplink, so ECMP and
    adaptive routing price every collective the same (routing means nothing to a single switch)."""
    ecmp = roce(nodes, kind="leaf_spine", routing="ecmp")
    assert times(ecmp) == times(roce(nodes, kind="leaf_spine", routing="adaptive"))
    assert times(ecmp) == times(roce(nodes, kind="single_switch", routing="ecmp"))


@pytest.mark.parametrize("nodes", [2, 16, 32])
def test_rail_local_traffic_is_not_hashed(nodes: int):
    """Metamorphic: within one rail-optimised scalable unit (32 servers) every NIC's traffic stays on its rail
    leaf: ECMP changes nothing."""
    assert times(roce(nodes, routing="ecmp")) == times(roce(nodes, routing="adaptive"))


def test_rings_across_leaves_slow_under_ecmp_and_more_qps_restore_them():
    """64 servers under 16 leaves (32 uplinks of 50 GB/s each): a ring all_reduce's 16 channels hashed onto a
    leaf's uplinks collide (E[max] 2.4 flows where a link takes 2 at their NIC rate): slower than adaptive;
    4 QPs a connection spread the load back to within 0.1% of the NICs' pace (Meta, SIGCOMM 2024: up to 40%
    faster all_reduce from more QPs)."""
    ecmp, adaptive = roce(64, kind="leaf_spine", routing="ecmp"), roce(64, kind="leaf_spine", routing="adaptive")
    ring = [predict_collective(v, "all_reduce", GIB, algo="ring").time_s for v in (ecmp, adaptive)]
    assert ring[0] > 1.05 * ring[1]
    split = predict_collective(ecmp, "all_reduce", GIB, algo="ring", env={"NCCL_IB_QPS_PER_CONNECTION": "4"})
    assert split.time_s == pytest.approx(ring[1], rel=1e-3)


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 63), st.integers(1, 63))
def test_more_uplinks_of_the_same_rate_never_slow(a: int, b: int):
    """More spines, each link at the same 25 GB/s (oversubscription 64 / spines over 32 x 50 GB/s of ports):
    no collective gets slower under ECMP."""
    few, many = sorted((a, b + 1 if b >= a else b))
    views = [roce(16, kind="leaf_spine", spines=s, oversubscription=64 / s, routing="ecmp") for s in (few, many)]
    assert views[0].uplink_Bps == pytest.approx(views[1].uplink_Bps)
    for slow, fast in zip(times(views[0]), times(views[1]), strict=True):
        assert fast <= slow * (1 + 1e-12)


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 16), st.integers(1, 16))
def test_more_qps_per_connection_never_slow(a: int, b: int):
    """Splitting each connection over more QPs (NCCL_IB_QPS_PER_CONNECTION) never slows a collective."""
    v = roce(32, kind="leaf_spine", oversubscription=2.0, routing="ecmp")
    few, many = sorted((a, b))
    before = times(v, {"NCCL_IB_QPS_PER_CONNECTION": str(few)})
    after = times(v, {"NCCL_IB_QPS_PER_CONNECTION": str(many)})
    for slow, fast in zip(before, after, strict=True):
        assert fast <= slow * (1 + 1e-12)


def test_flow_engine_equals_closed_form_under_ecmp():
    """Alone on idle links the flow engine reproduces the closed form with the collisions' spine demand."""
    v = roce(64, kind="leaf_spine", oversubscription=2.0, routing="ecmp")
    for op in ("all_reduce", "alltoall"):
        closed = collective_table(v, op, [GIB])[0].time_us
        engine = collective_table(v, op, [GIB], use_engine=True)[0].time_us
        assert engine == pytest.approx(closed, rel=1e-9)


def test_routing_defaults_follow_the_transport():
    """InfiniBand and EFA route adaptively by default, RoCE and TCP hash flows (ECMP); the spec may say
    otherwise (statically routed InfiniBand, Spectrum-X adaptive RoCE)."""
    assert not comm_view(build(load_preset("dgx-h100", nodes=2))).ecmp
    assert not comm_view(build(load_preset("aws-p5", nodes=2))).ecmp
    assert comm_view(build(load_preset("h100-tcp-100g", nodes=2))).ecmp
    assert comm_view(build(load_preset("pcie-l40s", nodes=2))).ecmp
    assert not comm_view(build(load_preset("h100-roce-400g", nodes=2))).ecmp  # Spectrum-X: adaptive
    assert comm_view(build(load_preset("dgx-h100", nodes=2, fabric={"routing": "ecmp"}))).ecmp


@pytest.mark.parametrize("env", ["NCCL_IB_QPS_PER_CONNECTION=0", "NCCL_IB_QPS_PER_CONNECTION=129",
                                 "NCCL_IB_QPS_PER_CONNECTION=two"])
def test_bad_qps_per_connection_is_refused_in_one_line(env: str):
    """A QP count outside NCCL's 1..128 exits 2 with one line naming the variable."""
    out = subprocess.run([sys.executable, "-m", "simulator.cli.app", "collective", "--topology", "h100-roce-400g",
                          "--nodes", "2", "-b", "1M", "-e", "1M", "--env", env], capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "NCCL_IB_QPS_PER_CONNECTION" in lines[0]


def test_socket_flows_are_threads_times_sockets():
    """On the socket transport a connection is NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD TCP flows
    (capped at 64): more of them spread a 100 GbE fabric's hashed load, never slow it."""
    v = comm_view(build(load_preset("h100-tcp-100g", nodes=64, fabric={"kind": "leaf_spine", "nodes_per_leaf": 8})))
    one = predict_collective(v, "all_reduce", GIB, algo="ring").time_s
    many = predict_collective(v, "all_reduce", GIB, algo="ring",
                              env={"NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "4"}).time_s
    assert many <= one and math.isfinite(many)
