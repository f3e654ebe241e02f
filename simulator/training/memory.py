"""Memory per GPU: model states by strategy, activations, communication buffers, reserve.

Model states follow the ZeRO paper (Rajbhandari et al. 2020, section 3): mixed-precision Adam keeps 2 bytes of
bf16/fp16 parameters, 2 of gradients and 12 of optimizer state (fp32 master weights, momentum, variance) per
parameter; where the framework keeps fp32 parameters and casts them for compute (StrategySpec.fp32_params:
PyTorch AMP, FSDP's flat parameters) 4 + 4 + 8; gradients take the dtype they are reduced in (Megatron's bf16
jobs: an fp32 main_grad buffer, 2 + 4 + 12 = 18); ZeRO-1 shards the optimizer states over the N data-parallel
ranks, ZeRO-2 also the gradients, ZeRO-3 / FSDP FULL_SHARD also the parameters; SHARD_GRAD_OP is ZeRO-2-like;
HYBRID_SHARD shards within its shard group. A ZeRO-1 that all-reduces whole gradients in another precision
(zero_grad_all_reduce; DeepSpeed's bf16 optimizer accumulates and reduces an fp32 copy) holds that buffer
whole too, beside the 16-bit gradients. SGD keeps 4 bytes of master weights (8 with momentum; we count
momentum). fp32 training keeps 4 + 4 + 8. Sharded strategies also hold the gathered parameters of the units in
flight (the current one plus the prefetched ones) and their gradients before reduce-scatter; with pipeline
parallelism FSDP holds the stage's whole parameters and their gradients, accumulated over the micro-batches.
Activations: Korthikanti et al. 2022 per layer (workloads.model, with the tensor-parallel degree and sequence
parallelism), times the layers a stage holds, times the micro-batches it has in flight: the peak of forwards done minus
backwards done in its pipeline schedule (1F1B: p - s on stage s, so the first stage holds p micro-batches of L
/ p layers; GPipe: all m), plus the embedding's on the first stage and the logits on the last (with an eager
cross entropy, EAGER_LOSS_BYTES more a logit at the start of backward); with a fused
(flash) attention kernel no s x s scores are stored, as with selective recomputation. Full recomputation keeps
each block's input only (torchtitan's op policy: every other matmul's output and attention's), and the block
being recomputed holds the rest of its activations again (one block at a time: the largest block's, on top). The
loss's tensors are gone by then (freed by the output layer's backward, which runs before the last block's): XLA's
buffer assignment reuses their space, so its last stage holds the larger of the two; PyTorch's peak reserved memory
holds both (the caching allocator keeps the freed logits' block; torchtitan's published peaks of context-parallel
and 2D runs, 2-8% under with the larger alone, agree).
With LoRA (training.lora_rank) only the adapters have gradients and optimizer states; the frozen weights keep
their parameter bytes (no fp32 master copy). Model states per GPU are its stage's parameters over the
tensor-parallel degree (the first stage also holds the
embedding, the last the output layer), then sharded over the data-parallel group as above (with context
parallelism, the data- and context-parallel ranks together; a context-parallel rank's activations are those of its
seq_len / cp tokens, the ring's two key/value blocks in flight being small beside them). A mixture of experts'
routed experts split over tp x ep and their states shard over the replicas / ep ranks that hold the same experts
(the expert data-parallel group); the figure is for the busiest expert-parallel rank, whose routed activations
grow with its routed load (simulator.training.routing). The figure is the stage that needs the most. Buffers:
DDP's gradient buckets (a copy of every gradient with grad_bucket_copy, PyTorch's default; else bucket_cap_mb x
2); DeepSpeed ZeRO's flat gradient bucket with contiguous_gradients (reduce_bucket_size elements of the model's
dtype, 1 GB at the default 5e8; ZeRO-1/2 allocate it for each backward and a second one with overlap_comm, ZeRO-3
one at start-up: stage_1_and_2.py backward, stage3.py). Reserve: the CUDA context and allocator fragmentation
(RESERVE_BYTES + FRAGMENTATION of the rest, none under XLA's buffer assignment).
"""

from __future__ import annotations

from simulator.training.pipeline import peak_in_flight
from simulator.training.prediction import MemoryBreakdown
from simulator.training.recompute import modules_of, runs_recomputing
from simulator.training.routing import routed_load
from simulator.training.shards import (
    blocks_params_on_gpu,
    chunk_layers,
    gathered_blocks,
    layer_params_on_gpu,
    state_shards,
    trainable_blocks_params_on_gpu,
    trainable_layer_params_on_gpu,
)
from simulator.training.tasks import PARAM_BYTES
from workloads.model import TransformerModel
from workloads.remat import is_remat_policy
from workloads.spec import MEGATRON_RECOMPUTE_DEFAULT, Checkpointing, TrainingSpec

GIB = 1024**3
RESERVE_BYTES = 1.5 * GIB  # CUDA context (~0.5-1 GiB) + NCCL buffers (~0.5 GiB at 8-16 channels)
# slack over the live tensors by allocator (TrainingSpec.allocator): PyTorch's caching allocator keeps freed blocks
# for reuse, some unusable for the next request; XLA's buffer assignment packs a step's temporaries into one
# block at compile time (its heap simulator), so nothing is left between them
FRAGMENTATION = {"caching": 0.05, "xla": 0.0}
FP32_GRAD_COPY_BYTES = 4.0  # the optimizer's fp32 copy of a 16-bit gradient (StrategySpec.fp32_grad_copy)
# PyTorch's eager cross entropy on fp32 logits (TrainingSpec.cross_entropy "eager"): at the start of backward,
# beside the fp32 log-softmax output it saved (the 4 bytes a logit of output_activation_bytes), the gradient of
# that output (nll_loss's backward) and the input gradient (log_softmax's backward), fp32 each
EAGER_LOSS_BYTES = 8.0

STATE_BYTES = {  # (parameters, gradients, optimizer) per parameter
    ("mixed", "adam"): (2.0, 2.0, 12.0),
    ("mixed", "adamw"): (2.0, 2.0, 12.0),
    ("mixed", "sgd"): (2.0, 2.0, 8.0),
    ("fp32", "adam"): (4.0, 4.0, 8.0),
    ("fp32", "adamw"): (4.0, 4.0, 8.0),
    ("fp32", "sgd"): (4.0, 4.0, 4.0),
}


def usable_bytes(capacity_bytes: float, training: TrainingSpec) -> float:
    """What a job may hold on a GPU of `capacity_bytes`: all of it, or with training.memory_fraction the
    allocator's pool (that share) and, beside it, the CUDA context and NCCL's buffers (RESERVE_BYTES)."""
    if training.memory_fraction is None:
        return capacity_bytes
    return min(capacity_bytes, training.memory_fraction * capacity_bytes + RESERVE_BYTES)


def in_flight_micro_batches(training: TrainingSpec, micro_steps: int, stage: int) -> int:
    """Most chunks whose activations `stage` holds at once: forwards done minus backwards done,
    at its peak, over its schedule (see the module docstring)."""
    par = training.parallel
    if par.pp == 1:
        return 1
    return peak_in_flight(par.pipeline_schedule, par.pp, par.virtual_stages, micro_steps, stage)


def memory_per_gpu(model: TransformerModel, training: TrainingSpec, seq_len: int, dp: int,
                   shard_group: int, units_in_flight: int | None = None, micro_steps: int = 1) -> MemoryBreakdown:
    """Bytes per GPU of the stage that needs the most (see module docstring); `units_in_flight` gathered blocks of a
    sharded strategy, by default what the strategy holds (shards.gathered_blocks)."""
    par = training.parallel
    units_in_flight = gathered_blocks(model, training) if units_in_flight is None else units_in_flight
    p, v = par.pp, par.virtual_stages
    ranges = chunk_layers(model.spec.layers, par, model.mtp_layers)
    # a pipeline needs at least p micro-batches in flight to fill; size the schedule for that
    steps = micro_steps if par.pipeline_schedule == "gpipe" else max(micro_steps, p)
    steps += -steps % p if par.pipeline_schedule == "interleaved" else 0
    stages = [_stage_memory(model, training, seq_len, dp, shard_group, units_in_flight, stage,
                            [ranges[c * p + stage] for c in range(v)],
                            in_flight_micro_batches(training, steps, stage))
              for stage in range(p)]
    return max(stages, key=lambda m: m.total_bytes)


def _stage_memory(model: TransformerModel, training: TrainingSpec, seq_len: int, dp: int, shard_group: int,
                  units_in_flight: int, stage: int, chunks: list[tuple[int, int]], in_flight: int) -> MemoryBreakdown:
    """One stage's memory; `chunks` are the (first, past-the-last) layers of each of its model chunks."""
    par = training.parallel
    p, tp = par.pp, par.tp
    s = training.strategy
    regime = "fp32" if training.precision == "fp32" or s.fp32_params else "mixed"
    p_bytes, g_bytes, o_bytes = STATE_BYTES[(regime, training.optimizer)]
    if s.zero_grad_all_reduce and s.grad_reduce_bytes != g_bytes:
        g_bytes += s.grad_reduce_bytes  # the whole reduction buffer beside the 16-bit gradients
    else:  # gradients accumulate in the dtype they are reduced in (Megatron's fp32 main_grad buffer)
        g_bytes = max(g_bytes, s.grad_reduce_bytes)
    layer = max(sum(layer_params_on_gpu(block, tp, par.ep, par.etp)) for block, _ in model.blocks)  # the largest unit
    first, last = stage == 0, stage == p - 1
    output = model.output_params if model.output_params or p == 1 else model.spec.vocab * model.spec.hidden
    held = [blocks_params_on_gpu(model, tp, par.ep, start, stop, par.etp) for start, stop in chunks]
    n = (sum(dense + experts for dense, experts in held)
         + ((model.embedding_params + model.final_norm_params) / tp if first else 0.0) + (output / tp if last else 0.0))
    n_experts = sum(experts for _, experts in held)
    shards = state_shards(training, dp, shard_group)
    # what trains (LoRA: the adapters, beside the frozen weights) has gradients and optimizer states
    if training.lora_rank is not None:
        adapters = sum(trainable_blocks_params_on_gpu(model, training, tp, par.ep, start, stop)[0]
                       for start, stop in chunks)
        counts = ((n + adapters, 0.0), (adapters, 0.0))
    else:
        counts = ((n, n_experts), (n, n_experts))

    def per_gpu(bytes_per_param: float, kind: int) -> float:
        """Bytes of one state (kind 0 parameters, 1 gradients, 2 optimizer) over each part's shard."""
        count, experts = counts[min(kind, 1)]
        return bytes_per_param * ((count - experts) / shards[0][kind] + experts / shards[1][kind])

    p_shard = shards[0][0]
    gathered, unreduced = 0.0, 0.0  # gathered 16-bit parameters; their gradients before the reduce-scatter
    if p_shard > 1 and p > 1:  # with pipelining FSDP keeps the stage's gathered parameters all step, and its
        # unreduced gradients accumulate over the micro-batches in the reduction's dtype until the last one's
        # reduce-scatter (torch.distributed.pipelining stage.py backward_maybe_with_nosync: no gradient sync, no
        # reshard after backward, for every micro-batch; FSDP2 accumulates in its reduce dtype)
        gathered, unreduced = n * PARAM_BYTES, counts[1][0] * s.grad_reduce_bytes
    elif p_shard > 1:  # those of the units being computed
        trained_layer = max(sum(trainable_layer_params_on_gpu(block, training, tp, par.ep))
                            for block, _ in model.blocks)
        gathered, unreduced = (units_in_flight * layer * PARAM_BYTES,
                               units_in_flight * trained_layer * s.grad_reduce_bytes)
    # a fused attention kernel keeps no scores: without recomputation a layer keeps what selective recompute does
    plain: Checkpointing = "selective" if training.flash_attention else "none"
    stored = training.activation_checkpointing if training.activation_checkpointing != "none" else plain
    b, local_seq = training.micro_batch, seq_len // par.cp  # a context-parallel rank holds seq_len / cp tokens
    load = routed_load(training.routing, par.ep)
    packed = training.packed_sample_len
    sp = par.sequence_parallel

    # selective's modules drop their outputs; a fused attention kernel keeps no scores whichever they are
    modules = (*modules_of(training), *(("core_attn",) if training.flash_attention else ()))

    def kept(block: TransformerModel, checkpointing: Checkpointing, dropped: tuple[str, ...]) -> float:
        return block.activation_bytes_per_layer(b, local_seq, checkpointing, tp, sp, load, packed, dropped)
    # one chunk's activations, averaged over the stage's chunks (interleaved: a stage holds several); a layer
    # that recomputes keeps what its checkpointing keeps, the others (recompute_layers) everything
    runs = [run for start, stop in chunks for run in runs_recomputing(model, training, start, stop)]
    chunk = sum(r * kept(block, stored, modules) + (n - r) * kept(block, plain, MEGATRON_RECOMPUTE_DEFAULT)
                for block, n, r in runs) / len(chunks)
    recomputing = [block for block, _, r in runs_recomputing(model, training) if r] \
        if stored in ("full", "op") or is_remat_policy(stored) else []
    # the loss's tensors (the last stage's logits, its eager cross entropy's gradients) live from the end of the
    # forward until the output layer's backward; the block being recomputed holds all its activations again
    # (on top of what it keeps, the rest of what it would keep without recomputation) only after that
    loss = (1 + model.mtp_layers) * (  # the MTP modules' logits and loss beside the model's own
        model.output_activation_bytes(b, local_seq, tp)
        + (EAGER_LOSS_BYTES * b * local_seq * model.spec.vocab / tp if training.cross_entropy == "eager" else 0.0)
    ) if last else 0.0
    rerun = max((kept(block, plain, MEGATRON_RECOMPUTE_DEFAULT) - kept(block, stored, modules)
                 for block in recomputing), default=0.0)
    activations = (in_flight * chunk + (in_flight * model.embedding_activation_bytes(b, local_seq) if first else 0.0)
                   + (max(loss, rerun) if training.allocator == "xla" else loss + rerun))
    buffers = 0.0
    if s.kind == "ddp":  # the buckets: a copy of every gradient, or two buckets being reduced
        buffers = per_gpu(s.grad_reduce_bytes, 1) if s.grad_bucket_copy else 2.0 * s.bucket_bytes
    elif s.contiguous_gradients and s.kind in ("zero1", "zero2", "zero3"):  # DeepSpeed's flat bucket buffers
        double = s.kind != "zero3" and s.overlap_grad_reduce
        buffers = s.zero_bucket_elements * (4 if training.precision == "fp32" else PARAM_BYTES) * (2 if double else 1)
    # the optimizer step's peak: activations are freed, the fp32 copy of the shard's gradients is made
    copy = per_gpu(FP32_GRAD_COPY_BYTES, 2) if s.fp32_grad_copy and regime == "mixed" else 0.0
    if copy > activations + gathered + unreduced:
        activations, gathered, unreduced = 0.0, 0.0, 0.0
        o_bytes += FP32_GRAD_COPY_BYTES
    if s.zeropp_hierarchical_partition:  # hpZ's secondary bf16 shard over the node's data-parallel GPUs
        gathered += n * PARAM_BYTES / max(1, shard_group)
    live = (per_gpu(p_bytes, 0) + per_gpu(g_bytes, 1) + per_gpu(o_bytes, 2) + gathered + unreduced + activations
            + buffers)
    return MemoryBreakdown(
        parameters_bytes=per_gpu(p_bytes, 0) + gathered,
        gradients_bytes=per_gpu(g_bytes, 1) + unreduced,
        optimizer_bytes=per_gpu(o_bytes, 2),
        activations_bytes=activations,
        buffers_bytes=buffers,
        reserve_bytes=RESERVE_BYTES + FRAGMENTATION[training.allocator] * live,
    )
