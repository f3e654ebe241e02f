"""Lowering a training step without pipeline parallelism onto one GPU's streams: the step plan.

Every GPU of the job does the same work, so one representative GPU's plan is the step
(collectives wait for all ranks, which are identical); see simulator.training.tasks for the
vocabulary. With tensor parallelism each layer's pass is followed (or, overlapped, accompanied) by
its TP collectives, and the data-parallel collectives run over the DP group. What the strategies
do (DESIGN.md section 7; PyTorch DDP and FSDP, DeepSpeed ZeRO):
- DDP: gradients of finished layers fill buckets (first 1 MiB, then 25 MiB) in backward order;
  a full bucket is all-reduced at once, overlapping the rest of backward; only on the last
  micro-step (no_sync before). Without overlap_grad_reduce every bucket waits for the whole
  backward (Megatron-LM before 2023). The optimizer waits for every bucket.
- Every micro-step's backward ends with the strategy's gradient-accumulation pass over the
  gradients this GPU holds (compute.grad_accumulation; none by default).
- ZeRO-1/2: gradients reduce-scattered in buckets during backward (every micro-step for ZeRO-2,
  the last for ZeRO-1; all-reduced with zero_grad_all_reduce), each rank updates its shard, then
  parameters are all-gathered in buckets (with overlap_param_gather, layer by layer ahead of the
  first micro-step's forward instead).
- ZeRO-3 / FSDP FULL_SHARD: each block's parameters are all-gathered before its forward and again
  before its backward, with the next block's gather in flight (limit_all_gathers: a gather starts once
  the block that many before it is resharded, after its pass and that pass's TP collectives; DeepSpeed
  counts its prefetch in elements, prefetch_bucket_elements over a block's: shards.gathers_ahead), then the
  block's gradients reduce-scattered. SHARD_GRAD_OP keeps gathered parameters from forward to
  backward. HYBRID_SHARD shards within a group (a node) and all-reduces the shards across groups
  on a stream of their own (FSDP's _all_reduce_stream; FSDP2's all_reduce_stream), after each
  reduce-scatter.
- ZeRO++ (Wang et al. 2023): qwZ gathers int8 weights (half the bytes) and dequantizes them on the
  compute stream before the pass; hpZ gathers backward's weights (bf16) from a secondary shard inside
  the node; qgZ quantizes the gradients on the reduction stream and reduce-scatters them as int4 (the
  kernels' bytes: simulator.training.compute).
- Expert parallelism: a mixture of experts' routed experts are gathered and reduced over the expert
  data-parallel group ("edp", the ranks holding the same experts) in buckets of their own
  (Megatron-Core's expert gradient buffers), the rest of the model over the data-parallel group.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simulator.core.errors import ConfigError
from simulator.training.compute import QGZ_QUANTIZE_BYTES, QWZ_DEQUANTIZE_BYTES, ComputeModel, LayerTimes
from simulator.training.recompute import (
    layer_checkpointing,
    modules_of,
    reruns_attention,
    reruns_forward_collectives,
)
from simulator.training.shards import (
    blocks_params_on_gpu,
    expert_replicas,
    expert_shard_group,
    gathers_ahead,
    layer_params_on_gpu,
    lora_adapters_on_gpu,
    owned_params,
    trainable_blocks_params_on_gpu,
    trainable_layer_params_on_gpu,
    trainable_root_params,
)
from simulator.training.tasks import (
    PARAM_BYTES,
    CollectiveCall,
    Rings,
    StepPlan,
    Task,
    across_replicas,
    add_pass,
    bucket_reduction_op,
    expert_budgets,
    module_rerun_calls,
    overlap_budgets,
    pass_collectives,
    reduction_call,
)
from workloads.model import TransformerModel
from workloads.spec import Checkpointing, TrainingSpec

MAX_GATHER_BUCKETS = 10_000  # ZeRO's post-optimizer all-gathers a step may simulate (one task each)


def _buckets(sizes: list[float], first: float, cap: float) -> list[list[int]]:
    """Group consecutive gradients (in the given order) into buckets: the first up to `first`
    bytes, the rest up to `cap`; a bucket closes when adding the next gradient would overflow."""
    buckets: list[list[int]] = [[]]
    filled, limit = 0.0, first
    for index, size in enumerate(sizes):
        if buckets[-1] and filled + size > limit:
            buckets.append([])
            filled, limit = 0.0, cap
        buckets[-1].append(index)
        filled += size
    return buckets


@dataclass(frozen=True)
class _Block:
    """What one layer of one kind of block (simulator.training.tasks vocabulary) costs and holds on this GPU."""

    times: LayerTimes
    forward: tuple[list[CollectiveCall], Rings]
    backward: tuple[list[CollectiveCall], Rings]
    recompute_calls: list[CollectiveCall]
    budgets: dict[str, tuple[tuple[float, ...], ...] | None]  # per pass kind: forward, recompute, backward
    param_bytes: dict[str, int]  # per part: "dense", "experts"
    updated_bytes: dict[str, int]  # of the parameters, those the optimizer updates (LoRA: the adapters)
    grad_bytes: dict[str, int]
    tensors: list[tuple[float, str]]  # gradient tensors as backward produces them (mlp_down first), with their part
    checkpointing: Checkpointing  # how this layer recomputes (simulator.training.recompute)


def _block(block: TransformerModel, training: TrainingSpec, compute: ComputeModel, seq_len: int,
           checkpointing: Checkpointing) -> _Block:
    """One layer of `block` on this GPU, recomputing as `checkpointing` says: its times, collectives, overlap
    budgets, parameter and gradient bytes."""
    s, par, b = training.strategy, training.parallel, training.micro_batch
    tp, cp = par.tp, par.cp
    times = compute.layer(block, b, seq_len, checkpointing, tp, par.sequence_parallel,
                          training.flash_attention, cp, par.ep, par.etp)
    dense, experts = layer_params_on_gpu(block, tp, par.ep, par.etp)
    gemm_s = compute.gemms_s(block, b, seq_len, tp, cp, par.ep, par.etp)
    attention_s = compute.attention_forward_s(block, b, seq_len, tp, cp)
    load = compute.routed_load
    forward = pass_collectives(block, b, seq_len, par, attention_s, ("forward",), routed_load=load)
    backward = pass_collectives(block, b, seq_len, par, attention_s, ("backward",), routed_load=load)
    # selective recomputation re-runs the attention core only: no TP collectives, but its context-parallel ones;
    # torchtitan's op policy keeps the reduce-scatters' outputs and re-runs the rest (sequence parallelism: the
    # two all-gathers; without it, the attention's all-reduce: the recomputation stops before the MLP's); a JAX
    # policy re-runs the forward's collectives where it re-runs a matmul, else selective's or none
    if reruns_forward_collectives(checkpointing):
        recompute = forward[0]
    elif checkpointing == "op":
        recompute = [replace(call, count=call.count // 2) if call.op == "all_reduce" else call
                     for call in forward[0] if call.group == "tp" and call.op in ("all_gather", "all_reduce")]
    elif reruns_attention(checkpointing, modules_of(training)):
        recompute = pass_collectives(block, b, seq_len, par, attention_s, ("forward",), tp_passes=0,
                                     routed_load=load)[0]
    else:
        recompute = []
    if checkpointing == "selective":  # Megatron-Core's recompute modules that re-run collectives (moe, mlp)
        recompute += module_rerun_calls(block, b, seq_len, par, modules_of(training), load)
    tp_overlap, expert_s = par.tp_comm_overlap, expert_budgets(times, par) if block.spec.moe else None
    overlap = tp_overlap or expert_s is not None
    budgets = {"forward": overlap_budgets(forward[0], gemm_s, ("forward",), tp=tp_overlap, expert_s=expert_s)
               if overlap else None,
               "recompute": overlap_budgets(recompute, gemm_s, ("forward",), tp=tp_overlap, expert_s=expert_s)
               if overlap else None,
               "backward": overlap_budgets(backward[0], gemm_s, ("backward",), par.tp_comm_overlap_backward,
                                           tp_overlap, expert_s, par.tp_async_grad_reduce)
               if overlap or par.tp_async_grad_reduce or par.sp_backward_regather else None}

    # a layer's gradient tensors as backward produces them (mlp_down first), each with its part: a routed
    # expert GEMM's weights are its E experts' matrices, E / ep of them on this GPU
    def part_of(name: str) -> str:
        return "experts" if experts and block.gemm_experts(name) > 1 else "dense"

    trained, trained_experts = trainable_layer_params_on_gpu(block, training, tp, par.ep)
    if training.lora_rank is None:
        matrices = [(block.gemm_experts(name) * k * n / tp / (par.ep if block.gemm_experts(name) > 1 else 1),
                     part_of(name)) for name, _, n, k in reversed(block.layer_gemms(1))]
        matrices.append((dense + experts - sum(size for size, _ in matrices), "dense"))  # norms
    else:  # the adapters' gradients, the frozen weights and norms having none
        matrices = [(training.lora_rank * (n + k), "dense")
                    for _, _, n, k in reversed(lora_adapters_on_gpu(block, training, tp))]
    tensors = [(size * s.grad_reduce_bytes, part) for size, part in matrices]
    return _Block(times, forward, backward, recompute, budgets,
                  {"dense": int(dense * PARAM_BYTES), "experts": int(experts * PARAM_BYTES)},
                  {"dense": int(trained * PARAM_BYTES), "experts": int(trained_experts * PARAM_BYTES)},
                  {"dense": int(trained * s.grad_reduce_bytes), "experts": int(trained_experts * s.grad_reduce_bytes)},
                  tensors, checkpointing)


def plan_step(model: TransformerModel, training: TrainingSpec, compute: ComputeModel, seq_len: int,
              micro_steps: int, dp: int, local_params: float, shard_group: int = 1) -> StepPlan:
    """The task list of one optimizer step on one GPU (see module docstring); a mixture's dense first
    blocks (model.blocks) are layers of their own kind."""
    s = training.strategy
    par = training.parallel
    tp, cp, b = par.tp, par.cp, training.micro_batch
    kind = "fsdp" if s.kind in ("zero3", "hsdp") else s.kind
    sharding = "HYBRID_SHARD" if s.kind == "hsdp" else ("FULL_SHARD" if s.kind == "zero3" else s.fsdp_sharding)
    if kind == "fsdp" and sharding == "NO_SHARD":
        kind = "ddp"
    head_f, head_b = compute.head(model, b, seq_len, tp, cp)
    mtp_f, mtp_b = compute.mtp_heads(model, b, seq_len, tp, cp)  # the MTP modules' output layer and loss
    L = model.block_layers
    # layer i's kind of block, as it recomputes (a kind's layers with and without recomputation priced once each)
    checkpointing = layer_checkpointing(training, L)
    bundles: dict[tuple[TransformerModel, Checkpointing], _Block] = {}
    layers: list[_Block] = []
    for block in (block for block, n in model.blocks for _ in range(n)):
        key = (block, checkpointing[len(layers)])
        if key not in bundles:
            bundles[key] = _block(block, training, compute, seq_len, key[1])
        layers.append(bundles[key])
    # the blocks' parameters on this GPU: the routed experts apart when expert parallelism gives them a group
    _, experts = blocks_params_on_gpu(model, tp, par.ep, expert_tp=par.etp)
    root_params = model.root_params / tp
    root_param_bytes = int(root_params * PARAM_BYTES)
    trained_root = trainable_root_params(model, training, tp)  # none with LoRA
    trained, trained_experts = trainable_blocks_params_on_gpu(model, training, tp, par.ep)
    root_grad_bytes = int(trained_root * s.grad_reduce_bytes)
    tasks: list[Task] = []
    reductions: list[str] = []
    gathers_after_opt: list[Task] = []
    # HSDP, and ZeRO-1 in optimizer groups, gather and reduce-scatter within the shard group (the experts within
    # its ranks that hold them, groups.py); an all-reduce of whole gradients spans every data-parallel rank
    grad_group = "shard" if (sharding == "HYBRID_SHARD" and kind == "fsdp") or (kind == "zero1" and s.hybrid) \
        else "dp"
    group_of = {"dense": grad_group, "experts": "eshard" if grad_group == "shard" else "edp"}
    whole_group_of = {"dense": "dp", "experts": "edp"}
    group_size = {"dp": dp, "edp": expert_replicas(dp, par.tp, par.ep, par.expert_tp), "shard": shard_group,
                  "eshard": expert_shard_group(shard_group, par.ep)}
    suffix = {"dense": "", "experts": ".x"}  # task names of the experts' collectives
    parts = ("dense", "experts") if experts else ("dense",)

    def layer_parts(i: int) -> tuple[str, ...]:
        return ("dense", "experts") if layers[i].param_bytes["experts"] else ("dense",)

    def gather(name: str, i: int, deps: tuple[str, ...]) -> tuple[str, ...]:
        """All-gather layer i's parameters (each part over its group); the names to wait for. With
        gather_per_module, one all-gather per weight matrix (DeepSpeed ZeRO-3 fetches submodule by submodule;
        the norms, under stage3_param_persistence_threshold, stay resident). ZeRO++ qwZ gathers int8 weights
        and dequantizes them on the compute stream before the pass."""
        backward = ".ag_bwd" in name
        waits: list[str] = []
        for part in layer_parts(i):
            matrices = sum(1 for _, owner in layers[i].tensors if owner == part) - (part == "dense")
            calls = max(1, matrices) if s.gather_per_module else 1
            secondary = backward and s.zeropp_hierarchical_partition  # hpZ: bf16 weights from inside the node
            held = layers[i].param_bytes if kind == "fsdp" else layers[i].updated_bytes  # ZeRO-1/2: what changed
            quantized = s.zeropp_quantized_weights and not secondary
            size = held[part] // (2 if quantized else 1)
            group = "shard" if secondary else group_of[part]
            gathered = name + suffix[part]
            tasks.append(Task(gathered, "ag", "all_gather", collective=CollectiveCall(
                "all_gather", size // calls, group, calls), deps=deps))
            if quantized:
                tasks.append(Task(f"{gathered}.dequantize", "compute", "backward" if backward else "forward",
                                  compute.memory_pass_s(held[part] / PARAM_BYTES, QWZ_DEQUANTIZE_BYTES),
                                  deps=(gathered,)))
                gathered = f"{gathered}.dequantize"
            waits.append(gathered)
        return tuple(waits)

    reshard = s.reshard_after_forward if s.reshard_after_forward is not None else sharding != "SHARD_GRAD_OP"
    # Megatron --overlap-param-gather: the parameters the last step's optimizer updated are gathered
    # layer by layer as the first micro-step's forward reaches them
    early_gather = kind in ("zero1", "zero2") and s.overlap_param_gather and dp > 1

    def sharded_reduction(name: str, size: int, after: str, group: str = grad_group) -> None:
        """FSDP: reduce-scatter a unit's gradients; HSDP then all-reduces the shard across groups. ZeRO++ qgZ
        sends them as int4 (half a byte an element)."""
        deps = (after,)
        if s.zeropp_quantized_gradients:  # the int4 quantization ahead of the exchange, on the reduction stream
            tasks.append(Task(f"{name}.quantize", "rs", "reduce_scatter", compute.memory_pass_s(
                size / s.grad_reduce_bytes, QGZ_QUANTIZE_BYTES), deps=deps))
            deps = (f"{name}.quantize",)
            size = int(size * 0.5 / s.grad_reduce_bytes)
        tasks.append(Task(name, "rs", "reduce_scatter", collective=CollectiveCall("reduce_scatter", size, group),
                          deps=deps))
        reductions.append(name)
        if sharding == "HYBRID_SHARD":
            tasks.append(across_replicas(tasks[-1], group_size[group]))
            reductions.append(tasks[-1].name)

    # an untied output layer's gradients are ready first (backward starts at it), the embedding's last
    output_grad_bytes = int(model.output_params / tp * s.grad_reduce_bytes) if trained_root else 0

    def bucket_reductions(m: int) -> list[str]:
        """DDP / ZeRO-1/2: micro-step m's gradients reduced in buckets. Gradients become ready tensor by tensor,
        last layer first (a layer's matrices, then the rest of its parameters); buckets take whole tensors,
        each part's its own, and go to the stream in the order they fill (a mixture's expert buckets do not
        wait behind the dense bucket that holds the embedding). Without overlap_grad_reduce every bucket waits
        for the whole backward. ZeRO-1 in optimizer groups reduce-scatters a bucket within its group and
        all-reduces each rank's slice across the groups (Megatron-Core's distributed optimizer instances); an
        all-reduce of the whole bucket spans every data-parallel rank."""
        op = bucket_reduction_op(kind, s)
        first, cap = ((s.first_bucket_bytes, s.bucket_bytes) if kind == "ddp"
                      else (s.zero_bucket_elements * s.grad_reduce_bytes,) * 2)
        ordered: list[tuple[int, int, list[Task]]] = []  # (layer whose backward fills it, part, tasks), readiest first
        for p_index, part in enumerate(parts):
            grads = [(i, size) for i in reversed(range(L)) for size, owner in layers[i].tensors if owner == part]
            if part == "dense" and output_grad_bytes:
                grads.insert(0, (L, output_grad_bytes))  # filled by the head's backward
            buckets = _buckets([size for _, size in grads], first, cap)
            for b, members in enumerate(buckets):
                filled_by = grads[members[-1]][0]
                size = int(sum(grads[j][1] for j in members))
                if b == len(buckets) - 1 and part == "dense":
                    size += root_grad_bytes - output_grad_bytes  # the embedding's gradients are ready last
                    filled_by = -1
                produced = (f"m{m}.head_bwd" if filled_by == L else f"m{m}.bwd{max(filled_by, 0)}") \
                    if s.overlap_grad_reduce else f"m{m}.accumulate" if s.grad_accumulation_bytes else f"m{m}.bwd0"
                group = whole_group_of[part] if op == "all_reduce" else group_of[part]
                call = reduction_call(op, size, group, group_size[group], s.reduce_per_rank and not s.hybrid)
                made = [Task(f"m{m}.{op}{b}{suffix[part]}", "rs", op, collective=call, deps=(produced,))]
                if group_size[group] < group_size[whole_group_of[part]]:
                    made.append(across_replicas(made[0], group_size[group]))
                ordered.append((filled_by, p_index, made))
        ordered.sort(key=lambda entry: (-entry[0], entry[1]))
        made_tasks = [task for _, _, made in ordered for task in made]
        tasks.extend(made_tasks)
        return [task.name for task in made_tasks]

    blocking: tuple[str, ...] = ()
    ahead = gathers_ahead(model, training)  # a block's gather starts once the block `ahead` earlier has passed
    for m in range(micro_steps):
        last = m == micro_steps - 1
        previous = f"m{m - 1}.head_bwd" if m else None
        # forward; FSDP's root unit (embeddings, output layer, final norm) is gathered first and
        # kept until its gradients are reduced after the whole backward
        emb_deps: tuple[str, ...] = ((previous,) if previous else ()) + blocking
        if kind == "fsdp" or (early_gather and m == 0):
            root_gathered = root_param_bytes // (2 if s.zeropp_quantized_weights else 1)
            tasks.append(Task(f"m{m}.ag_root", "ag", "all_gather",
                              collective=CollectiveCall("all_gather", root_gathered, grad_group)))
            emb_deps = (*emb_deps, f"m{m}.ag_root")
        tasks.append(Task(f"m{m}.emb_fwd", "compute", "forward", head_f * 0.05, deps=emb_deps))
        ready: tuple[str, ...] = ()  # what the next pass waits for: the last pass and its TP collectives
        # FSDP's rate limiter lets a gather start once an earlier block is resharded, after its pass and the
        # TP collectives that pass issued on the compute stream: a gate is a pass's `ready`, not its compute alone
        passed: dict[int, tuple[str, ...]] = {}
        for i in range(L):
            deps: tuple[str, ...] = ()
            if kind == "fsdp" or (early_gather and m == 0):
                gate = passed[i - ahead] if i >= ahead and not early_gather else ()
                deps = gather(f"m{m}.ag_fwd{i}", i, gate)
            layer = layers[i]
            ready = add_pass(tasks, f"m{m}.fwd{i}", "forward", layer.times.forward_s, ready + deps, layer.forward[0],
                             layer.budgets["forward"], rings=layer.forward[1])
            passed[i] = ready
        tasks.append(Task(f"m{m}.head_fwd", "compute", "forward", head_f * 0.95 + mtp_f, deps=ready))
        tasks.append(Task(f"m{m}.head_bwd", "compute", "backward", head_b + mtp_b))
        ready = ()
        # backward, last layer first; without backward prefetch a block's gather waits for the
        # previous block's backward to finish
        back_ahead = ahead if s.backward_prefetch else 1
        passed = {}
        for i in reversed(range(L)):
            deps = ()
            if kind == "fsdp" and reshard:
                deps = gather(f"m{m}.ag_bwd{i}", i, passed[i + back_ahead] if i + back_ahead < L else ())
            layer = layers[i]
            if layer.times.recompute_s:
                ready = add_pass(tasks, f"m{m}.rec{i}", "recompute", layer.times.recompute_s, ready + deps,
                                 layer.recompute_calls, layer.budgets["recompute"],
                                 rings=layer.forward[1] if reruns_attention(layer.checkpointing, modules_of(training))
                                 else ())
                deps = ()
            ready = add_pass(tasks, f"m{m}.bwd{i}", "backward", layer.times.backward_s, ready + deps,
                             layer.backward[0], layer.budgets["backward"], rings=layer.backward[1])
            passed[i] = ready
            if kind == "fsdp":
                for part in layer_parts(i):
                    sharded_reduction(f"m{m}.rs{i}{suffix[part]}", layer.grad_bytes[part], f"m{m}.bwd{i}",
                                      group_of[part])
        if kind == "fsdp" and root_grad_bytes:
            sharded_reduction(f"m{m}.rs_root", root_grad_bytes, f"m{m}.bwd0")
        if s.grad_accumulation_bytes:
            held = owned_params(training, trained_root + trained, trained_experts, dp, shard_group, state=1)
            tasks.append(Task(f"m{m}.accumulate", "compute", "backward",
                              compute.grad_accumulation(held, s.grad_accumulation_bytes), deps=ready))
            ready = (f"m{m}.accumulate",)
        if kind in ("ddp", "zero1", "zero2") and (last or kind == "zero2"):
            made = bucket_reductions(m)
            reductions += made
            # without overlap the reductions run on the compute stream (DeepSpeed's average_tensor on the
            # current stream, stage 2 in every micro-step): the next micro-step starts after them
            blocking = () if s.overlap_grad_reduce else tuple(made)
    tasks.append(Task("optimizer", "compute", "optimizer", compute.optimizer(local_params, training.optimizer),
                      deps=(*reductions, *ready)))
    if kind in ("zero1", "zero2") and not early_gather:
        cap = s.zero_bucket_elements * PARAM_BYTES
        totals = {part: (trained_root + trained if part == "dense" else trained_experts) * PARAM_BYTES
                  for part in parts}
        gathers = sum(max(1, -int(-total // cap)) for total in totals.values())
        if gathers > MAX_GATHER_BUCKETS:  # each is simulated: a tiny bucket would take hours, not a better answer
            least = -int(-sum(totals.values()) // ((MAX_GATHER_BUCKETS - len(parts)) * PARAM_BYTES))
            raise ConfigError(f"training.strategy.zero_bucket_elements {s.zero_bucket_elements:,}: the parameters "
                              f"would be all-gathered in {gathers:,} buckets, and clustersim simulates each (at most "
                              f"{MAX_GATHER_BUCKETS:,}); use at least {least:,} elements")
        for part in parts:
            total = totals[part]
            for b in range(max(1, -int(-total // cap))):
                size = int(min(cap, total - b * cap))
                gathers_after_opt.append(Task(f"param_ag{b}{suffix[part]}", "ag", "all_gather",
                                              collective=CollectiveCall("all_gather", size, group_of[part]),
                                              deps=("optimizer",)))
        tasks += gathers_after_opt
        tasks.append(Task("step_end", "compute", "optimizer", 0.0, deps=tuple(t.name for t in gathers_after_opt)))
    return StepPlan(tuple(tasks), micro_steps)
