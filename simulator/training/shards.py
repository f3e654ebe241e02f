"""Which ranks share which model states: the sharding degrees of each strategy, and the split of a
block's parameters into the dense part (replicated over the data- and context-parallel ranks) and a
mixture of experts' routed experts (split over the expert-parallel ranks, replicated over the expert
data-parallel ones). ZeRO (Rajbhandari et al. 2020, section 3) and FSDP as in simulator.training.memory.
"""

from __future__ import annotations

from collections.abc import Callable

from simulator.core.errors import ConfigError
from workloads.model import TransformerModel, sharded_gemms
from workloads.pipeline_layout import layout_counts
from workloads.spec import ParallelSpec, PipelineSplit, TrainingSpec

Degrees = tuple[int, int, int]  # ranks sharing (parameters, gradients, optimizer states)


def shard_degrees(training: TrainingSpec, dp: int, shard_group: int) -> Degrees:
    """How many ranks share (parameters, gradients, optimizer states)."""
    kind = training.strategy.kind
    sharding = training.strategy.fsdp_sharding
    if kind == "ddp" or (kind == "fsdp" and sharding == "NO_SHARD"):
        return 1, 1, 1
    if kind == "zero1":
        return 1, 1, shard_group if training.strategy.hybrid else dp
    if kind == "zero2" or (kind == "fsdp" and sharding == "SHARD_GRAD_OP"):
        return 1, dp, dp
    if training.strategy.hybrid:
        return shard_group, shard_group, shard_group
    return dp, dp, dp  # zero3, fsdp FULL_SHARD


def layers_per_virtual_stage(layers: int, virtual_stages: int, split: PipelineSplit = "layers") -> list[int]:
    """Layers of each virtual stage: as even as possible, the extra ones to the virtual stages after the
    first, which carries the embedding (DeepSpeed's uniform partition; Megatron requires even division).
    With split "embedding_and_loss" the input embedding and the output layer with its loss each take a
    layer's place, the first virtual stage's first and the last one's last (Megatron-Core's
    --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split), so those two
    may hold no layer at all; the layers + 2 places must then divide evenly, as Megatron-Core requires.
    ConfigError when some virtual stage would get nothing."""
    held = 2 if split == "embedding_and_loss" and virtual_stages > 1 else 0  # places the embedding and loss take
    if layers + held < virtual_stages:
        extra = " + the embedding and the loss" if held else ""
        raise ConfigError(f"model has {layers} layers{extra}, fewer than the {virtual_stages} pipeline stages x chunks")
    if held and (layers + held) % virtual_stages:
        raise ConfigError(f"pipeline_split embedding_and_loss: the {layers} layers + the embedding and the loss "
                          f"({layers + held}) must divide evenly over the {virtual_stages} pipeline stages x chunks, "
                          "as Megatron-Core requires (an uneven split would put the extra layers beside the "
                          "embedding's and the loss's places)")
    base, extra_layers = divmod(layers + held, virtual_stages)
    counts = [base + (1 if 1 <= k <= extra_layers else 0) for k in range(virtual_stages)]
    if held:
        counts[0] -= 1
        counts[-1] -= 1
    return counts


def chunk_layers(layers: int, par: ParallelSpec, mtp_layers: int = 0) -> list[tuple[int, int]]:
    """The (first, past-the-last) block of each of the pp x virtual_stages model chunks (chunk k: pipeline stage
    k % pp, its virtual stage k // pp): as par.pipeline_layout names them, else layers_per_virtual_stage with
    par.pipeline_split; `mtp_layers` multi-token prediction modules (blocks `layers` on) go where the layout's m
    are, else on the last chunk, as Megatron-Core puts them. ConfigError when the layout does not hold the
    model's layers and the job's MTP modules."""
    if par.pipeline_layout is None:
        counts = layers_per_virtual_stage(layers, par.pp * par.virtual_stages, par.pipeline_split)
        counts[-1] += mtp_layers
    else:
        decoder, mtp = layout_counts(par.pipeline_layout, "t"), layout_counts(par.pipeline_layout, "m")
        if sum(decoder) != layers:
            raise ConfigError(f"training.parallel.pipeline_layout {par.pipeline_layout!r} holds {sum(decoder)} "
                              f"transformer layers (t); the model has {layers}")
        if sum(mtp) != mtp_layers:
            raise ConfigError(f"training.parallel.pipeline_layout {par.pipeline_layout!r} holds {sum(mtp)} MTP "
                              f"modules (m); the job's mtp_layers is {mtp_layers}")
        counts = [t + m for t, m in zip(decoder, mtp, strict=True)]
    starts = [sum(counts[:k]) for k in range(len(counts))]
    return [(start, start + n) for start, n in zip(starts, counts, strict=True)]


def layer_params_on_gpu(model: TransformerModel, tp: int, ep: int, expert_tp: int | None = None) -> tuple[float, float]:
    """(dense, expert) parameters of one block on one GPU: with expert parallelism (ep > 1) the routed
    experts, split over expert_tp x ep (expert_tp: ParallelSpec.expert_tp, default tp), apart from the rest
    (attention, norms, router, shared experts) over tp; without it every parameter is dense (the experts share
    the data-parallel group's collectives)."""
    if ep == 1:
        return model.params_per_layer / tp, 0.0
    experts = float(model.expert_params_per_layer)
    return (model.params_per_layer - experts) / tp, experts / ((expert_tp or tp) * ep)


def expert_replicas(dp: int, tp: int, ep: int, expert_tp: int) -> int:
    """Ranks holding the same experts among `dp` data- x context-parallel ranks (the expert data-parallel group):
    dp / ep, or tp x dp / ep when each expert is whole on one GPU (expert_tp 1 under expert parallelism:
    Megatron-Core's expert data-parallel group is the world / (expert_tp x ep x pp))."""
    whole = tp if ep > 1 and expert_tp == 1 else 1
    return max(1, dp * whole // ep)


def blocks_params_on_gpu(model: TransformerModel, tp: int, ep: int, start: int = 0,
                         stop: int | None = None, expert_tp: int | None = None) -> tuple[float, float]:
    """(dense, expert) parameters on one GPU of blocks `start` .. `stop` - 1 (default all), each block as
    layer_params_on_gpu splits it (a mixture's dense first blocks have no expert part)."""
    return _over_blocks(model, start, stop, lambda block: layer_params_on_gpu(block, tp, ep, expert_tp))


def _over_blocks(model: TransformerModel, start: int, stop: int | None,
                 per_layer: Callable[[TransformerModel], tuple[float, float]]) -> tuple[float, float]:
    """(dense, expert) sums of `per_layer` over blocks `start` .. `stop` - 1 (default all)."""
    counts = model.block_counts(start, model.block_layers if stop is None else stop)
    split = [(n, per_layer(block)) for block, n in counts]
    return sum(n * dense for n, (dense, _) in split), sum(n * experts for n, (_, experts) in split)


def trainable_layer_params_on_gpu(model: TransformerModel, training: TrainingSpec, tp: int,
                                  ep: int) -> tuple[float, float]:
    """(dense, expert) parameters of one block on one GPU that train: all of them (layer_params_on_gpu), or with
    LoRA (training.lora_rank r) its adapters only, A [k, r] and B [r, n] beside each k x n weight share the job's
    lora_targets name (lora_adapters_on_gpu): r (k + n) each."""
    if training.lora_rank is None:
        return layer_params_on_gpu(model, tp, ep, training.parallel.expert_tp)
    return float(sum(training.lora_rank * (n + k) for _, _, n, k in lora_adapters_on_gpu(model, training, tp))), 0.0


def lora_adapters_on_gpu(block: TransformerModel, training: TrainingSpec, tp: int) -> list[tuple[str, int, int, int]]:
    """The LoRA adapters of one block on one GPU of a tensor-parallel group of `tp`, as (target, 1, n, k) of the
    weight share each adapts (TransformerModel.lora_adapters over Megatron's split, workloads.model.sharded_gemms)."""
    return block.lora_adapters(sharded_gemms(block.layer_gemms(1), tp), training.lora_targets)


def trainable_blocks_params_on_gpu(model: TransformerModel, training: TrainingSpec, tp: int, ep: int,
                                   start: int = 0, stop: int | None = None) -> tuple[float, float]:
    """trainable_layer_params_on_gpu over blocks `start` .. `stop` - 1 (default all)."""
    return _over_blocks(model, start, stop, lambda block: trainable_layer_params_on_gpu(block, training, tp, ep))


def trainable_root_params(model: TransformerModel, training: TrainingSpec, tp: int) -> float:
    """The embedding, output layer and final norm on one GPU that train: none with LoRA."""
    return 0.0 if training.lora_rank is not None else model.root_params / tp


def owned_params(training: TrainingSpec, dense: float, experts: float, dp: int, shard_group: int,
                 state: int = 2) -> float:
    """Of `dense` and `experts` parameters on a GPU, those whose `state` (0 parameters, 1 gradients, 2
    optimizer states) it keeps: each part over its group's shard (dp data- x context-parallel ranks, HSDP's
    `shard_group`; experts: dp / ep, shard_group / ep)."""
    dense_shards, expert_shards = state_shards(training, dp, shard_group)
    return dense / dense_shards[state] + experts / expert_shards[state]


def expert_shard_group(shard_group: int, ep: int) -> int:
    """Ranks of an HSDP shard group that hold the same experts: every ep-th (expert parallelism runs inside the
    shard group, as torchtitan carves ep out of dp_shard x cp)."""
    return max(1, shard_group // ep)


def state_shards(training: TrainingSpec, dp: int, shard_group: int) -> tuple[Degrees, Degrees]:
    """shard_degrees of the dense part and of the experts (over the ranks holding the same experts,
    expert_replicas, and inside an HSDP shard group expert_shard_group)."""
    par = training.parallel
    experts = shard_degrees(training, expert_replicas(dp, par.tp, par.ep, par.expert_tp),
                            expert_shard_group(shard_group, par.ep))
    return shard_degrees(training, dp, shard_group), experts


def gathered_blocks(model: TransformerModel, training: TrainingSpec) -> int:
    """Blocks whose gathered parameters (and unreduced gradients) a GPU holds at once. FSDP's limit_all_gathers
    counts them: at the default 2, the block computing and the next, whose gather is prefetched (the
    FullyShardedDataParallel docstring: memory "from only two consecutive FSDP instances"); XLA's double-buffered
    layer loop holds the same two. DeepSpeed ZeRO-3's prefetch bucket counts blocks fetched beyond the one
    computing (gathers_ahead)."""
    s = training.strategy
    return s.limit_all_gathers if s.prefetch_bucket_elements is None else gathers_ahead(model, training) + 1


def gathers_ahead(model: TransformerModel, training: TrainingSpec) -> int:
    """Blocks whose parameter gathers may be in flight beyond the one computing: FSDP's limit_all_gathers, or
    DeepSpeed ZeRO-3's prefetch bucket (prefetch_bucket_elements) over the largest block's elements on a GPU
    (split over tensor and expert parallelism, before ZeRO partitions them), at least 1."""
    s, par = training.strategy, training.parallel
    if s.prefetch_bucket_elements is None:
        return s.limit_all_gathers
    block = max(sum(layer_params_on_gpu(block, par.tp, par.ep, par.etp)) for block, _ in model.blocks)
    return max(1, int(s.prefetch_bucket_elements // block))
