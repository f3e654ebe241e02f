"""Which layers recompute their forward pass in backward.

`activation_checkpointing` says how a layer recomputes (selective, op, full, a JAX policy); `recompute_layers`
limits full recomputation to that many of the model's layers, the others keeping every activation as without
checkpointing. Frameworks that checkpoint some layers only:
- torchtitan: mode selective with `selective_ac_option` an integer k wraps every k-th block in a checkpoint
  (torchtitan/parallelisms/parallelize_llama.py `_apply_ac_to_transformer_block`; "2" was the option's default);
- fms-fsdp: `selective_checkpointing` k, every k-th LLaMABlock (fms_fsdp/policies/ac_handler.py);
- Megatron-LM: `--recompute-granularity full --recompute-method block --recompute-num-layers N`, the first N
  layers of each model chunk (megatron/core/transformer/transformer_block.py `_checkpointed_forward`).
The recomputing layers are spread evenly over the model (every k-th when their count divides the layers'), where
torchtitan and fms-fsdp put them; Megatron's first-N order runs the same work in another order. With pipeline
parallelism each model chunk recomputes the layers of the spread that fall in it.
"""

from __future__ import annotations

from workloads.model import TransformerModel
from workloads.remat import is_remat_policy, recomputed_gemms, recomputes_attention
from workloads.spec import MEGATRON_RECOMPUTE_DEFAULT, Checkpointing, TrainingSpec


def recomputing(layers: int, count: int | None) -> tuple[bool, ...]:
    """For each of `layers` layers, whether it recomputes: all of them for count None, else `count` of them (at
    most all) evenly spaced, the last of every run of layers / count."""
    if count is None:
        return (True,) * layers
    count = min(count, layers)
    return tuple((i + 1) * count // layers > i * count // layers for i in range(layers))


def modules_of(training: TrainingSpec) -> tuple[str, ...]:
    """The submodules selective recomputation re-runs: the job's recompute_modules, else Megatron-Core's default."""
    return training.recompute_modules or MEGATRON_RECOMPUTE_DEFAULT


def reruns_attention(checkpointing: str, modules: tuple[str, ...] = MEGATRON_RECOMPUTE_DEFAULT) -> bool:
    """Whether a layer recomputing so re-runs its attention kernel (and a context-parallel ring's exchanges):
    full does, selective where its `modules` name core_attn (Megatron-Core's default); torchtitan's op keeps
    attention's output; a JAX policy does unless it keeps it."""
    if is_remat_policy(checkpointing):
        return recomputes_attention(checkpointing)
    return checkpointing == "full" or (checkpointing == "selective" and "core_attn" in modules)


def reruns_forward_collectives(checkpointing: str) -> bool:
    """Whether a layer recomputing so re-runs its forward's tensor-parallel collectives: full does, and a JAX
    policy that re-runs a matmul is taken to (the collectives around the matmuls it re-runs; XLA's own
    placement of them is not modelled)."""
    return checkpointing == "full" or (is_remat_policy(checkpointing) and bool(recomputed_gemms(checkpointing)))


def layer_checkpointing(training: TrainingSpec, layers: int) -> tuple[Checkpointing, ...]:
    """Each layer's activation checkpointing: the job's where the layer recomputes, none elsewhere."""
    checkpointing: Checkpointing = training.activation_checkpointing
    none: Checkpointing = "none"
    if checkpointing == "none":
        return (none,) * layers
    return tuple(checkpointing if on else none for on in recomputing(layers, training.recompute_layers))


def layer_recomputes(training: TrainingSpec, layers: int) -> tuple[bool, ...]:
    """For each layer, whether it recomputes anything in backward."""
    return tuple(c != "none" for c in layer_checkpointing(training, layers))


def runs_recomputing(model: TransformerModel, training: TrainingSpec, start: int = 0,
                     stop: int | None = None) -> list[tuple[TransformerModel, int, int]]:
    """(block, its layers, how many of them recompute) for each run of one kind of block among layers `start` ..
    `stop` - 1 (a pipeline chunk's; default the whole model), in layer order (model.block_counts)."""
    flags = layer_recomputes(training, model.block_layers)
    stop = model.block_layers if stop is None else stop
    out = []
    for block, n in model.block_counts(start, stop):
        out.append((block, n, sum(flags[start:start + n])))
        start += n
    return out

