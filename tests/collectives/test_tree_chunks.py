"""A tree all_reduce's chunks as NCCL sizes them (enqueue.cc): one buffer slot, halved for small operations.

They price the pair NCCL's tuner chose (`--selection nccl`); the model's own choice keeps whole slots.

Hand-computed values follow NCCL's loops: `while (nBytes / (nChannels * chunkSize) < wanted && chunkSize > floor)
chunkSize /= 2`, with NCCL's tree depth ranks per node - 1 + log2(nodes) (connect.cc) for Simple and
nsteps = 1 + log2(nodes) + ppn / 10 for LL128.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives import nccl_constants as C
from simulator.collectives.algorithms import shapes_for
from simulator.collectives.cost import chunk_bytes, estimate, per_channel_Bps, tree_chunk_bytes
from simulator.collectives.nccl_releases import tuner_release
from simulator.collectives.params import prior_params
from simulator.collectives.predict import predict_collective
from tests.collectives.test_collective_model import view

SIMPLE_SLOT = C.BUFFER_BYTES["simple"] / C.NCCL_STEPS  # 512 KiB
LL128_SLOT = C.BUFFER_BYTES["ll128"] / C.NCCL_STEPS  # 552,960 B of payload


def test_simple_chunks_shrink_as_nccl_2_19_does():
    """4 nodes x 8 GPUs, 4 MiB on 6 channels: 699,050 B a channel. Depth 8 - 1 + 2 = 9. 512 KiB gives 1 chunk
    (< 72): 256 KiB, 128 KiB (the first loop's floor); 5 chunks < 36: 64 KiB (the second's); 10 >= 9: stop."""
    v = view(nodes=4, gpus=8)
    assert tree_chunk_bytes(4 << 20, 6, v, "simple", shrink_simple=True) == 65536
    # 2.20+ dropped the loop: one slot whatever the size
    assert tree_chunk_bytes(4 << 20, 6, v, "simple", shrink_simple=False) == SIMPLE_SLOT
    # 1 GiB gives each channel hundreds of slots: nothing to shrink
    assert tree_chunk_bytes(1 << 30, 6, v, "simple", shrink_simple=True) == SIMPLE_SLOT
    # 64 KiB: under 32 KiB of work a channel, every loop runs to its floor
    assert tree_chunk_bytes(64 << 10, 6, v, "simple", shrink_simple=True) == 32768


def test_ll128_chunks_shrink_in_every_release():
    """4 x 8 GPUs: nsteps 1 + 2 + 0.8 = 3.8, so 30.4 and 7.6 chunks wanted. 4 MiB on 6 channels: 552,960 B gives
    1, 276,480 gives 2, 138,240 gives 5 (still above 128 KiB: halve once more), 69,120 gives 10 >= 7.6."""
    v = view(nodes=4, gpus=8)
    assert tree_chunk_bytes(4 << 20, 6, v, "ll128", shrink_simple=False) == LL128_SLOT / 8 == 69120
    assert tree_chunk_bytes(1 << 30, 6, v, "ll128", shrink_simple=False) == LL128_SLOT
    assert tree_chunk_bytes(4 << 20, 6, v, "ll", shrink_simple=True) == C.BUFFER_BYTES["ll"] / C.NCCL_STEPS


def test_releases_say_whether_simple_chunks_shrink():
    """enqueue.cc of v2.19.3 holds the Simple tree loop; v2.20.3's computeCollChunkInfo no longer does."""
    assert tuner_release((2, 8)).tree_simple_chunks_shrink
    assert tuner_release((2, 19)).tree_simple_chunks_shrink
    assert not tuner_release((2, 20)).tree_simple_chunks_shrink
    assert not tuner_release(None).tree_simple_chunks_shrink


def test_a_tree_pays_the_fill_of_its_chunk_not_of_a_slot():
    """A 1 MiB LL128 tree all_reduce on 4 x 8 A100: its fill is (chain depth - 1) of NCCL's shrunk chunks at one
    channel's rate, the chunk well under a quarter of the 540 KiB slot."""
    v = view(nodes=4, gpus=8)
    tree = next(s for s in shapes_for("all_reduce", v) if s.algo == "tree")
    est = estimate("all_reduce", 1 << 20, tree, "ll128", v, prior_params(v), nccl_tree_chunks=False)
    chunk = tree_chunk_bytes(1 << 20, est.channels, v, "ll128", shrink_simple=False)
    assert chunk < LL128_SLOT / 4
    hand_s = (tree.chain_depth - 1) * min(chunk, (1 << 20) / est.channels) / per_channel_Bps(
        "all_reduce", tree, "ll128", v)
    assert est.fill_s == pytest.approx(hand_s, rel=0.05)


@given(nodes=st.sampled_from([1, 2, 4, 8, 16, 64, 512]), gpus=st.sampled_from([1, 2, 4, 8]),
       channels=st.integers(1, 32), proto=st.sampled_from(["ll", "ll128", "simple"]), shrink=st.booleans(),
       size=st.integers(1, 1 << 32))
def test_chunks_are_halvings_of_a_slot_and_never_shrink_with_more_bytes(nodes, gpus, channels, proto, shrink, size):
    """A chunk is the slot halved k times, at least NCCL's last floor (32 KiB) or the slot itself, and a larger
    operation never gets a smaller chunk (metamorphic: doubling the bytes)."""
    v = view(nodes=nodes, gpus=gpus)
    slot = C.BUFFER_BYTES[proto] / C.NCCL_STEPS
    chunk = tree_chunk_bytes(size, channels, v, proto, shrink)
    ratio = slot / chunk
    assert ratio >= 1 and ratio == 2 ** round(math.log2(ratio))
    assert chunk >= min(slot, 32768 / 2)
    assert tree_chunk_bytes(2 * size, channels, v, proto, shrink) >= chunk


@pytest.mark.parametrize("nodes", [2, 4, 8, 32])
def test_smaller_tree_chunks_never_slow_the_fill(nodes):
    """Shrinking trades fill for handshakes: the fill with NCCL 2.19's Simple chunks is never above the fill
    with whole slots (2.20+, and the model's own choice), size for size."""
    v = view(nodes=nodes, gpus=8)
    tree = next(s for s in shapes_for("all_reduce", v) if s.algo == "tree")
    p = prior_params(v)
    for size in (256 << 10, 1 << 20, 4 << 20, 64 << 20, 1 << 30):
        shrunk = estimate("all_reduce", size, tree, "simple", v, p, nccl_tree_chunks=True)
        for whole in (estimate("all_reduce", size, tree, "simple", v, p, nccl_tree_chunks=False),
                      estimate("all_reduce", size, tree, "simple", v, p)):
            assert shrunk.fill_s <= whole.fill_s * (1 + 1e-12)
        chunk = tree_chunk_bytes(size, shrunk.channels, v, "simple", shrink_simple=True)
        assert chunk_bytes(size, tree, shrunk.channels, v, "simple", chunk) <= chunk <= SIMPLE_SLOT


def test_the_model_choice_keeps_whole_slots():
    """Choosing the pair itself (the default), the model prices trees with whole buffer slots: the NCCL chunk
    rule would make it take trees where NCCL runs rings (docs/collectives.md, "NCCL's tree chunks")."""
    v = view(nodes=4, gpus=8)
    tree = next(s for s in shapes_for("all_reduce", v) if s.algo == "tree")
    pinned = predict_collective(v, "all_reduce", 1 << 20, algo="tree", proto="ll128", nccl_release=(2, 19))
    whole = estimate("all_reduce", 1 << 20, tree, "ll128", v, prior_params(v))
    assert pinned.time_s == pytest.approx(whole.time_s, rel=1e-12)
    nccl = predict_collective(v, "all_reduce", 1 << 20, algo="tree", proto="ll128", nccl_release=(2, 19),
                              selection="nccl")
    assert nccl.fill_s < pinned.fill_s


def test_the_log_release_decides_the_simple_chunks():
    """A 4 MiB Simple tree all_reduce on 4 x 8 A100 is priced with 64 KiB chunks under NCCL 2.19 and whole
    512 KiB slots under 2.20: the fills differ by the ratio of the slices each streams (a chunk, at most a
    channel's share)."""
    v = view(nodes=4, gpus=8)
    old = predict_collective(v, "all_reduce", 4 << 20, algo="tree", proto="simple", nccl_release=(2, 19),
                             selection="nccl")
    new = predict_collective(v, "all_reduce", 4 << 20, algo="tree", proto="simple", nccl_release=(2, 20),
                             selection="nccl")
    share = (4 << 20) / old.channels
    chunk = tree_chunk_bytes(4 << 20, old.channels, v, "simple", shrink_simple=True)
    assert chunk < SIMPLE_SLOT
    assert new.fill_s / old.fill_s == pytest.approx(min(SIMPLE_SLOT, share) / min(chunk, share), rel=1e-9)
