"""NVLS-tree's pipeline fill: its channels x heads concurrent operations each stream NCCL's NVLS-tree chunk
through the chain (NVLS reduction, the tree's network hops, the multicast), so the first step of all of
them, concurrentOps x chunk bytes, crosses chain_depth - 1 stages before the chain is full (enqueue.cc)."""

from __future__ import annotations

import pytest

from simulator.collectives.comm import comm_view
from simulator.collectives.cost import nvls_tree_chunk_bytes
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
    assert nvls_tree_chunk_bytes(size, 128, nodes) == chunk


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
