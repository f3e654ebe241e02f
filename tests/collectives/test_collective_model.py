"""The collective cost model: textbook volumes, hand-computed times, invariants."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.collectives import nccl_constants as C
from simulator.collectives.algorithms import ring_shape, shapes_for, tree_net_volume
from simulator.collectives.busbw import busbw_factor
from simulator.collectives.comm import INTRA_EFFICIENCY, CommView, comm_view
from simulator.collectives.cost import CHUNK_SLOTS, chunk_bytes, estimate, protocol_share, resource_demands
from simulator.collectives.flows import collective_flow, collective_resources, resource_capacities
from simulator.collectives.params import prior_params
from simulator.collectives.predict import collective_table, predict_collective, simulate_alone, size_sweep
from simulator.core.errors import ConfigError
from simulator.network.engine import FlowEngine
from topologies.build import build
from topologies.spec import TopologySpec

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv")


def view(nodes: int = 1, gpus: int = 8, intra_GBps: float = 300.0, net_gbps: float = 200.0,
         nics: int = 8, arch: str = "ampere", nvls: bool = False, transport: str = "ib",
         nvswitch: bool = False) -> CommView:
    return CommView(
        n_ranks=nodes * gpus, n_nodes=nodes, ranks_per_node=gpus, arch=arch, intra_kind="nvlink",
        intra_Bps=intra_GBps * 1e9, net_Bps=nics * net_gbps * 1e9 / 8 if nodes > 1 else 0.0,
        nics_per_node=nics, transport=transport if nodes > 1 else None, nvls=nvls, sharp=False,
        gpudirect_rdma=True, nvswitch=nvswitch,
    )


views = st.builds(
    view,
    nodes=st.sampled_from([1, 2, 4, 16, 128]),
    gpus=st.sampled_from([2, 4, 8]),
    intra_GBps=st.floats(50, 900),
    net_gbps=st.floats(25, 800),
    nics=st.sampled_from([1, 2, 4, 8]),
    arch=st.sampled_from(["volta", "ampere", "hopper", "blackwell"]),
    nvls=st.booleans(),
    transport=st.sampled_from(["ib", "roce", "efa", "tcpxo", "sockets"]),
    nvswitch=st.booleans(),
)
sizes = st.integers(min_value=1, max_value=16 * 1024**3)


def test_ring_all_reduce_moves_2_n_minus_1_over_n():
    """Ring all_reduce: each rank sends 2(n-1)/n x S (Patarasuk & Yuan 2009) over 2(n-1) steps."""
    shape = ring_shape("all_reduce", view(gpus=8))
    assert shape.intra_volume == pytest.approx(2 * 7 / 8)
    assert shape.intra_hops == 14 and shape.net_hops == 0


def test_ring_across_nodes_sends_the_rank_volume_per_node():
    """Each channel's ring crosses each node boundary once: a node sends 2(n-1)/n x S out."""
    shape = ring_shape("all_reduce", view(nodes=4, gpus=8))
    n = 32
    assert shape.net_volume == pytest.approx(2 * (n - 1) / n)
    assert shape.intra_volume == pytest.approx(2 * (n - 1) / n * 7 / 8)
    assert shape.net_hops == 2 * 3 and shape.intra_hops == 2 * 31 - 6


def test_all_gather_and_reduce_scatter_are_half_an_all_reduce():
    """all_gather / reduce_scatter move (n-1)/n x S in n-1 steps."""
    for op in ("all_gather", "reduce_scatter"):
        shape = ring_shape(op, view(gpus=4))
        assert shape.intra_volume == pytest.approx(3 / 4) and shape.intra_hops == 3


def test_double_binary_tree_network_volume():
    """2 nodes: each node sends S; 4 or more: the busiest node sends 2S (interior + leaf)."""
    assert tree_net_volume(2) == 1.0
    assert tree_net_volume(3) == 1.5
    assert tree_net_volume(4) == tree_net_volume(1024) == 2.0


def test_large_ring_all_reduce_by_hand():
    """1 GiB ring/Simple all_reduce on 8 GPUs with 100 GB/s links, computed by hand:
    base + 14 hops + bottleneck bytes + one handshake per chunk."""
    v = view(gpus=8, intra_GBps=100.0)
    size = 1024**3
    est = predict_collective(v, "all_reduce", size, algo="ring", proto="simple")
    rate = 100e9 * INTRA_EFFICIENCY["nvlink"]
    per_channel = C.PER_CHANNEL_GBPS["ampere"][0] * 1e9
    channels = math.ceil(rate / per_channel)  # bus rate 80 GB/s over 24 GB/s channels -> 4
    chunk = 4 * C.BUFFER_BYTES["simple"] / 8  # 2 MiB: a 1 GiB ring step is larger than the cap
    chunks = 1.75 * size / (channels * chunk)
    expected = (8.4 + 14 * 3.4) * 1e-6 + size * 1.75 / rate + chunks * 1.0 * 3.4e-6
    assert est.channels == channels == 4
    assert est.time_s == pytest.approx(expected, rel=1e-12)


def test_tiny_message_costs_the_latency_chain():
    """An 8-byte all_reduce costs about base + steps x hop latency of the fastest protocol (LL)."""
    est = predict_collective(view(gpus=8), "all_reduce", 8)
    assert est.proto == "ll"
    assert est.time_s == pytest.approx((6.6 + 14 * 0.6) * 1e-6, rel=0.1)


def test_pinning_algorithm_and_protocol():
    """--algo/--proto and NCCL_ALGO/NCCL_PROTO restrict the choice; an impossible pin is an error."""
    v = view(nodes=2)
    assert predict_collective(v, "all_reduce", 1 << 20, algo="tree").algo == "tree"
    assert predict_collective(v, "all_reduce", 1 << 30, env={"NCCL_ALGO": "Ring"}).algo == "ring"
    assert predict_collective(v, "all_reduce", 1 << 30, env={"NCCL_PROTO": "LL"}).proto == "ll"
    with pytest.raises(ConfigError, match="no allowed algorithm"):
        predict_collective(view(nodes=1), "all_reduce", 1 << 20, algo="tree")
    with pytest.raises(ConfigError, match="NCCL_ALGO"):
        predict_collective(v, "all_reduce", 1 << 20, env={"NCCL_ALGO": "bogus"})


@settings(max_examples=60, deadline=None)
@given(v=views, size=sizes, op=st.sampled_from(["alltoall", "sendrecv"]))
def test_point_to_point_never_runs_ll128(v, size, op):
    """NCCL runs send/recv (and so alltoall) with LL up to P2P_LL_THRESHOLD bytes a channel, else Simple,
    never LL128 (enqueue.cc addP2pToPlan); pinning LL128 is an error."""
    assert predict_collective(v, op, size).proto in ("ll", "simple")
    with pytest.raises(ConfigError, match="no allowed"):
        predict_collective(v, op, size, env={"NCCL_PROTO": "LL128"})


def test_busbw_columns_follow_nccl_tests():
    """busbw = algbw x the nccl-tests factor of the operation."""
    v = view(nodes=2, gpus=8)
    for op in OPS:
        row = collective_table(v, op, [1 << 26])[0]
        assert row.busbw_GBps == pytest.approx(row.algbw_GBps * busbw_factor(op, 16))
        assert row.algbw_GBps == pytest.approx((1 << 26) / (row.time_us * 1e-6) / 1e9)


def test_size_sweep_like_nccl_tests():
    """-b 8 -e 8G -f 2 gives 31 sizes; bad sweeps are errors."""
    assert len(size_sweep(8, 8 * 1024**3, 2)) == 31
    with pytest.raises(ConfigError):
        size_sweep(-8, 64, 2)
    with pytest.raises(ConfigError):
        size_sweep(64, 8, 2)


@settings(max_examples=60, deadline=None)
@given(v=views, size=sizes, op=st.sampled_from(OPS))
def test_engine_equals_closed_form_when_alone(v, size, op):
    """Alone on idle links, the SimPy flow engine reproduces the closed form."""
    est = predict_collective(v, op, size)
    assert simulate_alone(est, v) == pytest.approx(est.time_s, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(v=views, size=sizes, op=st.sampled_from(OPS), scale=st.floats(1.0, 8.0),
       pin=st.sampled_from([("ring", "simple"), ("ring", "ll"), ("ring", "ll128"), ("tree", "simple")]))
def test_more_bandwidth_is_never_slower(v, size, op, scale, pin):
    """With the algorithm and protocol fixed, more intra-node or network bandwidth never makes a
    collective slower."""
    algo, proto = pin
    try:
        base = predict_collective(v, op, size, algo=algo, proto=proto).time_s
    except ConfigError:
        return  # that pair does not exist on this cluster (tree on one node, LL128 on PCIe)
    for field in ("intra_Bps", "net_Bps"):
        faster = CommView(**{**v.__dict__, field: getattr(v, field) * scale})
        assert predict_collective(faster, op, size, algo=algo, proto=proto).time_s <= base * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(v=views, size=sizes, op=st.sampled_from(OPS), scale=st.floats(1.0, 8.0))
def test_more_bandwidth_is_not_slower_with_nccl_choosing(v, size, op, scale):
    """With NCCL's tuner choosing, more bandwidth can tip its ranking to another algorithm that is
    a little slower (NCCL does this too); it never costs more than a few percent."""
    base = predict_collective(v, op, size).time_s
    for field in ("intra_Bps", "net_Bps"):
        faster = CommView(**{**v.__dict__, field: getattr(v, field) * scale})
        assert predict_collective(faster, op, size).time_s <= base * 1.05


@settings(max_examples=60, deadline=None)
@given(v=views, size=sizes, op=st.sampled_from(OPS))
def test_bigger_messages_never_finish_sooner(v, size, op):
    """Doubling the size never makes a collective faster (each candidate is monotone, channels
    grow smoothly with size, and the choice takes the minimum)."""
    assert predict_collective(v, op, size * 2).time_s >= predict_collective(v, op, size).time_s * (1 - 1e-12)


@settings(max_examples=30, deadline=None)
@given(v=views, size=sizes, op=st.sampled_from(OPS))
def test_deterministic(v, size, op):
    """The same question twice gives the identical answer."""
    assert predict_collective(v, op, size) == predict_collective(v, op, size)


def test_concurrent_collectives_share_links_and_bytes_are_conserved():
    """Two identical bandwidth-bound collectives started together each take about twice as long,
    and the engine delivers exactly the bytes submitted."""
    v = view(gpus=8)
    est = predict_collective(v, "all_reduce", 1 << 30, algo="ring", proto="simple")
    capacity = resource_capacities(v)
    engine = FlowEngine(collective_resources(capacity))
    done = engine.transfer([collective_flow(est, capacity, "a"), collective_flow(est, capacity, "b")])
    engine.run(done)
    end = max(r.end_s for r in engine.records)
    bandwidth_alone = est.size_bytes * dict(est.demand_s_per_byte)["intra"]
    assert end == pytest.approx(est.latency_s + est.fill_s + 2 * bandwidth_alone, rel=0.2)
    assert end > est.time_s * 1.5
    assert engine.bytes_delivered() == pytest.approx(2 * est.size_bytes)


def test_every_operation_has_an_algorithm():
    """Every nccl-tests collective maps to at least one algorithm on any cluster shape."""
    for v in (view(), view(nodes=2), view(nodes=8, gpus=1), view(nvls=True, arch="hopper")):
        for op in OPS:
            assert shapes_for(op, v)
            assert estimate(op, 1 << 20, shapes_for(op, v)[0], "simple", v, prior_params(v)).time_s > 0


@settings(max_examples=40, deadline=None)
@given(size=sizes, op=st.sampled_from(("all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall")))
def test_fewer_wired_nvlinks_are_never_faster(size, op):
    """A board wiring 4 of an A100's 12 NVLinks to the switch: no collective over its 8 GPUs is faster than on
    the full board, and a large all_reduce, bandwidth-bound on NVLink, takes 3x as long."""
    def comm(intra: str) -> CommView:
        return comm_view(build(TopologySpec(gpu="A100-SXM4-80GB", gpus_per_node=8, nodes=1, intra_node=intra)))

    wired, full = comm("nvswitch-nvlink3-4links"), comm("nvswitch-nvlink3")
    assert predict_collective(wired, op, size).time_s >= predict_collective(full, op, size).time_s * (1 - 1e-12)
    big = [predict_collective(v, "all_reduce", 1 << 30, algo="ring", proto="simple").time_s for v in (wired, full)]
    assert big[0] / big[1] == pytest.approx(3.0, rel=0.02)




def test_tree_simple_chunks_are_one_buffer_slot():
    """NCCL moves CHUNK_SLOTS buffer slots a step only in Simple rings (enqueue.cc: chunkSteps is 1 for every
    other pair): a large all_reduce's tree chunks are one Simple slot (512 KiB), its ring's four (2 MiB)."""
    v = view(nodes=4)
    shapes = {shape.algo: shape for shape in shapes_for("all_reduce", v)}
    slot = C.BUFFER_BYTES["simple"] / C.NCCL_STEPS
    for size in (64 << 20, 1 << 30):
        assert chunk_bytes(size, shapes["tree"], 16.0, v, "simple") == slot == 512 * 1024
    assert chunk_bytes(1 << 30, shapes["ring"], 16.0, v, "simple") == CHUNK_SLOTS * slot == 2 << 20


@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_host_staged_gpus_share_their_pcie_switch_uplink_in_pairs(gpus: int):
    """Without peer-to-peer a node's traffic is staged through host memory, each GPU's through its PCIe switch's
    uplink, which it shares with the switch's other GPU (topologies.layout: GPUs in pairs under a switch): a ring
    all_gather's intra-node demand per byte is its intra-node volume x 2 senders over the link's achievable rate,
    two senders whether a node holds 2, 4 or 8 GPUs."""
    v = replace(view(nodes=1, gpus=gpus, intra_GBps=15.75), intra_kind="shm")
    p = prior_params(v)
    shape = ring_shape("all_gather", v)
    demand = resource_demands("all_gather", shape, "simple", v, p)["intra"]
    assert demand == pytest.approx(shape.intra_volume * 2 / (15.75e9 * p.intra_efficiency
                                                             * protocol_share("all_gather", "ring", "simple", v)))
