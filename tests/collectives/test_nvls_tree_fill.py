"""NVLS's and NVLS-tree's pipeline fill: their channels x heads concurrent operations each stream NCCL's NVLS
chunk through a chain (NVLS-tree: NVLS reduction, the tree's network hops, the multicast; NVLS all_reduce in one
NVLink domain: scatter, reduce and multicast, gather), so the first step of all of them, concurrentOps x chunk
bytes, crosses the stages before the last one before the chain is full (enqueue.cc, device/all_reduce.h)."""

from __future__ import annotations

import pytest

from simulator.collectives.comm import comm_view
from simulator.collectives.cost import nvls_chunk_bytes
from simulator.collectives.predict import predict_collective
from topologies.build import build
from topologies.presets import load_preset

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


@pytest.mark.parametrize(("size", "nodes", "chunk"), [
    (GIB, 2, 128 * KIB),      # NCCL_NVLS_CHUNKSIZE
    (GIB, 4, 64 * KIB),       # at most 64 KiB from 4 nodes (NCCL_NVLSTREE_MAX_CHUNKSIZE's default)
    (16 * MIB, 2, 64 * KIB),  # under 4 x 128 ops x 128 KiB = 64 MiB
    (4 * MIB, 2, 32 * KIB),   # then under 1 x 128 ops x 64 KiB = 8 MiB
])
def test_nccl_nvls_tree_chunk(size: int, nodes: int, chunk: int):
    """enqueue.cc's NVLS_TREE branch (2.19-2.29) with 16 channels x 8 heads = 128 concurrent operations."""
    assert nvls_chunk_bytes(size, 128, nodes, tree=True) == chunk


def test_two_dgx_h100_fill_three_steps_of_all_operations():
    """2 DGX H100: 16 NVLS channels x 8 heads (a NIC each) = 128 operations of 128 KiB, 16 MiB a step; the
    chain (NVLS reduction, up, down, multicast) is 4 deep, so the fill is 3 steps at the bottleneck's rate:
    ~180 us at 1 GiB, which the three published 2-node H100 logs show as a ~200 us offset over their
    bandwidth from 64 MiB up (docs/collectives.md)."""
    view = comm_view(build(load_preset("dgx-h100", nodes=2)))
    est = predict_collective(view, "all_reduce", GIB, algo="nvls")
    assert est.algo == "nvls_tree"
    seconds_per_byte = dict(est.demand_s_per_byte)[est.bottleneck]
    assert est.fill_s == pytest.approx(3 * 16 * MIB * seconds_per_byte, rel=1e-9)
    assert 150e-6 < est.fill_s < 250e-6


def test_fill_never_exceeds_the_message():
    """A message smaller than one step of all operations fills with the message itself."""
    view = comm_view(build(load_preset("dgx-h100", nodes=2)))
    est = predict_collective(view, "all_reduce", MIB, algo="nvls")
    seconds_per_byte = dict(est.demand_s_per_byte)[est.bottleneck]
    assert est.fill_s <= 3 * MIB * seconds_per_byte * (1 + 1e-9)


@pytest.mark.parametrize(("size", "chunk"), [
    (2 * GIB, 128 * KIB),  # NCCL_NVLS_CHUNKSIZE from 64 x 128 ops x 128 KiB = 1 GiB
    (512 * MIB, 64 * KIB),  # under 1 GiB, and not under 8 x 128 x 64 KiB = 64 MiB
    (32 * MIB, 32 * KIB),  # under 64 MiB, and not under 2 x 128 x 32 KiB = 8 MiB
    (4 * MIB, 16 * KIB),
])
def test_nccl_nvls_chunk(size: int, chunk: int):
    """enqueue.cc's NCCL_ALGO_NVLS branch (2.19-2.30) with 16 channels x 8 heads = 128 concurrent operations."""
    assert nvls_chunk_bytes(size, 128, 1, tree=False) == chunk


@pytest.mark.parametrize(("size", "step"), [
    (16 * MIB, 4 * MIB),  # 128 operations of 32 KiB
    (2 * GIB, 16 * MIB),  # of 128 KiB
    (MIB, MIB),  # under one step: the whole operation crosses scatter and reduce before gather starts
])
def test_one_dgx_h100_nvls_all_reduce_fills_two_steps(size: int, step: int):
    """One DGX H100: 16 NVLS channels x 8 heads; scatter -> reduce and multicast -> gather is 3 deep, so the fill
    is 2 steps of all operations at the bottleneck's rate: 8 MiB x 3.62 ps = 30 us at 16 MiB, where the published
    H200 node measures 134 us against 94 us priced without it (docs/collectives.md)."""
    view = comm_view(build(load_preset("dgx-h100", nodes=1)))
    est = predict_collective(view, "all_reduce", size, algo="nvls")
    assert est.algo == "nvls"
    seconds_per_byte = dict(est.demand_s_per_byte)[est.bottleneck]
    assert est.fill_s == pytest.approx(2 * step * seconds_per_byte, rel=1e-9)


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
def test_nvls_gather_and_scatter_fill_one_step(op: str):
    """NVLS all_gather (multicast, then gather) and reduce_scatter (scatter, then the reduction) are two warp
    groups deep: one step of all 128 operations, 64 KiB each at 64 MiB (under 64 x 128 x 128 KiB, not under
    8 x 128 x 64 KiB = 64 MiB), 8 MiB."""
    view = comm_view(build(load_preset("dgx-h100", nodes=1)))
    est = predict_collective(view, op, 64 * MIB, algo="nvls")
    assert est.algo == "nvls"
    seconds_per_byte = dict(est.demand_s_per_byte)[est.bottleneck]
    assert est.fill_s == pytest.approx(8 * MIB * seconds_per_byte, rel=1e-9)


@pytest.mark.parametrize(("release", "channels"), [((2, 26), 32), ((2, 27), 24)])
def test_blackwell_one_domain_nvls_channels_by_release(release: tuple[int, int], channels: int):
    """One B200 node: NCCL 2.25-2.26 run NVLS on 32 channels (NVLS_NCHANNELS_SM100), 2.27+ on 24 in one NVLink
    domain (NVLS_NCHANNELS_SM100_NVL; transport/nvls.cc). At 16 MiB both cut the chunk to 32 KiB, so the fill is
    two steps of channels x 8 heads x 32 KiB: 8 MiB on 32 channels, 6 MiB on 24."""
    view = comm_view(build(load_preset("dgx-b200", nodes=1)))
    est = predict_collective(view, "all_reduce", 16 * MIB, algo="nvls", nccl_release=release)
    seconds_per_byte = dict(est.demand_s_per_byte)[est.bottleneck]
    assert est.fill_s == pytest.approx(2 * channels * 8 * 32 * KIB * seconds_per_byte, rel=1e-9)
