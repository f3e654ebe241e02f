"""What a sharded job holds gathered, and how the allocator counts: FSDP's limit_all_gathers blocks, DeepSpeed's
prefetch beyond the block computing, XLA's buffer assignment under the maxtext framework, checked by hand for
Llama 3 70B and against NVIDIA's MaxText run that fits its memory fraction."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.scenario import complete_training
from simulator.training.memory import FRAGMENTATION, RESERVE_BYTES, memory_per_gpu, usable_bytes
from simulator.training.predict import predict_step
from simulator.training.shards import gathered_blocks, gathers_ahead
from topologies.presets import load_preset
from workloads.model import transformer
from workloads.presets import load_model
from workloads.spec import ParallelSpec, StrategySpec, TrainingSpec

GIB = 1024**3
LLAMA3_70B = load_model("llama3-70b")
# one block: q and output 8192 x 8192 each, k and v 8192 x 1024 each, a gated MLP of 3 x 8192 x 28672, two norms
BLOCK_PARAMS = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192


def fsdp_memory(**strategy: object):
    training = TrainingSpec(model="llama3-70b", seq_len=8192, micro_batch=1,
                            strategy=StrategySpec(kind="fsdp", **strategy))
    model = transformer(LLAMA3_70B)
    return memory_per_gpu(model, training, 8192, dp=64, shard_group=64,
                          units_in_flight=gathered_blocks(model, training))


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_fsdp_holds_limit_all_gathers_blocks(limit: int):
    """Each block FSDP's limiter lets stay gathered holds its 16-bit parameters and, in backward, its unreduced
    gradients (2 bytes each at the default reduce dtype): one block more is exactly that much more."""
    training = TrainingSpec(model="llama3-70b", strategy=StrategySpec(kind="fsdp", limit_all_gathers=limit))
    assert gathered_blocks(transformer(LLAMA3_70B), training) == limit
    fewer, more = fsdp_memory(limit_all_gathers=limit), fsdp_memory(limit_all_gathers=limit + 1)
    assert more.parameters_bytes - fewer.parameters_bytes == pytest.approx(BLOCK_PARAMS * 2, rel=1e-9)
    assert more.gradients_bytes - fewer.gradients_bytes == pytest.approx(BLOCK_PARAMS * 2, rel=1e-9)


def test_deepspeed_counts_its_prefetch_beyond_the_block_computing():
    """ZeRO-3's prefetch bucket counts blocks fetched beyond the one computing: 5e7 elements hold no whole 70B
    block (8.6e8), so one block computes and one is fetched."""
    training = TrainingSpec(model="llama3-70b",
                            strategy=StrategySpec(kind="zero3", prefetch_bucket_elements=50_000_000))
    model = transformer(LLAMA3_70B)
    assert gathers_ahead(model, training) == 1 and gathered_blocks(model, training) == 2


def maxtext_70b(**stated: object):
    """NVIDIA's DGX Cloud MaxText Llama 3 70B run (dgxc-benchmarking maxtext/configure.sh at 1b9bb6b): FSDP over
    128 H100s, per-device batch 2, sequence 8,192, remat_policy save_qkv_proj, bf16."""
    topology = load_preset("dgx-h100", nodes=16)
    training = TrainingSpec(model="llama3-70b", framework="maxtext", seq_len=8192, micro_batch=2, global_batch=256,
                            activation_checkpointing="save_qkv_proj", **stated)
    return predict_step(topology, complete_training(training, LLAMA3_70B, topology), LLAMA3_70B)


def test_maxtexts_run_fits_the_memory_fraction_it_ran_with():
    """The run set XLA_PYTHON_CLIENT_MEM_FRACTION=0.94: everything XLA holds fits in 94% of 80 GiB (75.2 GiB),
    the CUDA context and NCCL's buffers beside it; at JAX's old default, a 75% pool (60 GiB), it would not.
    Under PyTorch's caching allocator the same job would hold 5% more than what it keeps live."""
    p = maxtext_70b(memory_fraction=0.94)
    assert p.memory_capacity_bytes == pytest.approx(0.94 * 80 * GIB + RESERVE_BYTES, rel=1e-12)
    assert p.memory.reserve_bytes == pytest.approx(RESERVE_BYTES, rel=1e-12)  # no caching-allocator slack
    assert p.fits_in_memory and p.memory.total_bytes - RESERVE_BYTES <= 0.94 * 80 * GIB
    assert not maxtext_70b(memory_fraction=0.75).fits_in_memory
    caching = maxtext_70b(allocator="caching")
    live = p.memory.total_bytes - RESERVE_BYTES
    assert caching.memory.total_bytes > p.memory.total_bytes + FRAGMENTATION["caching"] * live


@pytest.mark.parametrize(("fraction", "usable_gib"), [(None, 80.0), (0.5, 41.5), (0.99, 80.0)])
def test_a_memory_fraction_leaves_the_context_beside_the_pool(fraction, usable_gib):
    """With a fraction f the job may hold f of the GPU's memory plus the 1.5 GiB of CUDA context and NCCL
    buffers outside the allocator's pool, never more than the GPU has."""
    training = TrainingSpec(model="llama3-70b", memory_fraction=fraction)
    assert usable_bytes(80 * GIB, training) == pytest.approx(usable_gib * GIB, rel=1e-12)


def test_xla_reuses_the_logits_space_for_the_recomputed_block():
    """Under XLA the last stage holds the larger of the loss's tensors (2 x 8,192 x 128,256 logits at 4 bytes:
    MaxText keeps bf16 logits and their bf16 exponentials, plus 4 s b h of norm and projection inputs) and the
    recomputed block's working set (what save_qkv_proj drops of what the block would keep), not both: the
    smaller, here the block's, comes off."""
    xla, caching = maxtext_70b(), maxtext_70b(allocator="caching")
    logits = 2 * 8192 * 128256 * 4 + 4 * 8192 * 2 * 8192
    block = transformer(LLAMA3_70B).blocks[0][0]
    rerun = (block.activation_bytes_per_layer(2, 8192, "selective", 1, False, 1.0, None)
             - block.activation_bytes_per_layer(2, 8192, "save_qkv_proj", 1, False, 1.0, None))
    assert 0 < rerun < logits
    assert caching.memory.activations_bytes - xla.memory.activations_bytes == pytest.approx(rerun, rel=1e-9)


def test_fsdp_with_pipelining_holds_the_stages_parameters_and_accumulated_gradients():
    """Under PP 2, FSDP keeps the first stage's 40 blocks, embedding and final norm gathered in bf16 all step and
    accumulates their unsharded gradients over the micro-batches in the reduce dtype (fp32 here), beside the
    8-way shards: parameters 2 + 2/8 bytes and gradients 4 + 4/8 bytes a parameter (the first stage, holding
    two micro-batches of activations under 1F1B, needs the most)."""
    training = TrainingSpec(model="llama3-70b", seq_len=8192, micro_batch=1, activation_checkpointing="full",
                            strategy=StrategySpec(kind="fsdp", grad_reduce_bytes=4),
                            parallel=ParallelSpec(pp=2))
    m = memory_per_gpu(transformer(LLAMA3_70B), training, 8192, dp=8, shard_group=8, units_in_flight=2,
                       micro_steps=8)
    first_stage = 40 * BLOCK_PARAMS + 128256 * 8192 + 8192
    assert m.parameters_bytes == pytest.approx(first_stage * (2 + 2 / 8), rel=1e-9)
    assert m.gradients_bytes == pytest.approx(first_stage * (4 + 4 / 8), rel=1e-9)


@settings(max_examples=20, deadline=None)
@given(model=st.sampled_from(["llama3-8b", "llama2-13b", "mixtral-8x7b"]),
       recompute=st.sampled_from(["none", "selective", "full", "op", "nothing_saveable"]),
       kind=st.sampled_from(["ddp", "zero1", "fsdp"]), pp=st.sampled_from([1, 2]),
       loss=st.sampled_from(["fused", "eager"]))
def test_xla_never_needs_more_memory_than_the_caching_allocator(model, recompute, kind, pp, loss):
    """Without the caching allocator's slack, and with the larger of the logits and the recomputed block in place
    of both, XLA's accounting of the same job is never above PyTorch's, on any stage."""
    spec = load_model(model)
    if recompute == "op" and spec.moe:
        recompute = "full"  # torchtitan's per-op policy is modelled for dense blocks only
    training = TrainingSpec(model=model, seq_len=4096, micro_batch=1, activation_checkpointing=recompute,
                            cross_entropy=loss, strategy=StrategySpec(kind=kind), parallel=ParallelSpec(pp=pp))
    memory = {allocator: memory_per_gpu(transformer(spec), training.model_copy(update={"allocator": allocator}),
                                        4096, dp=8, shard_group=8, units_in_flight=2, micro_steps=4)
              for allocator in ("caching", "xla")}
    assert memory["xla"].total_bytes <= memory["caching"].total_bytes
