"""Lowering a pipeline-parallel training step onto the streams of one GPU per stage.

The p stages of one pipeline stand for all pipelines (data-parallel replicas and tensor-parallel
ranks are identical). Stage s holds the layers of virtual stages s, s + p, ... (v model chunks per
stage with the interleaved schedule), the first stage also the embedding, the last the output
layer. Layers divide as evenly as possible; extra layers go to the virtual stages after the first,
which carries the embedding (DeepSpeed's uniform partition; Megatron requires even division). With
`pipeline_split: embedding_and_loss` the embedding and the output layer each take a layer's place
(shards.layers_per_virtual_stage); `pipeline_layout` names each chunk's layers (Megatron-Core's custom
layout, workloads.pipeline_layout). A chunk left with no layer runs only the embedding or the output layer.

Each stage runs its schedule on its compute stream, one task per chunk (a micro-batch's forward or
backward over the chunk's layers, with its tensor-parallel collectives, see tasks.tp_calls), and
sends activations forward and gradients back on its own streams, as flows over the real link
between the two stages' GPUs (1/tp of the activation per TP rank with Megatron's scatter-gather,
all of it without); a stage's chunk waits for its input to arrive and, unless `overlap_p2p`, the
sender's next chunk waits for its send to complete (Megatron-LM's and DeepSpeed's blocking p2p). Schedules:
- gpipe (Huang et al. 2019): all forwards, then all backwards (last micro-batch first).
- 1f1b (PipeDream-Flush, Narayanan et al. 2021): stage s runs p - s - 1 warm-up forwards, then
  alternates one forward and one backward, then drains the remaining backwards.
- interleaved (Narayanan et al. 2021, section 2.2.2): each stage holds v chunks; forwards take
  micro-batches in groups of p, chunk after chunk; warm-up 2 (p - s - 1) + (v - 1) p forwards;
  needs the micro-batch count to be a multiple of p (as Megatron does).
The bubble is not a formula here: it is the time stages wait for their neighbours. For uniform
stages and free communication it comes out as (p - 1) / (m + p - 1) of the step (1f1b, gpipe) and
(p - 1) / (v m + p - 1) interleaved.

Data parallelism over the rest: each stage reduces its own gradients over its DP group, layer by
layer during the last micro-batch's backward (overlap_grad_reduce; the last backward chunk of
every model chunk is then split per layer) or all at once after it; ddp all-reduces, zero1 (the
distributed optimizer) reduce-scatters (all-reduces with zero_grad_all_reduce, as DeepSpeed's bf16
optimizer does), updates its shard, then all-gathers the parameters (after
the optimizer, or at the start of the step before each chunk's first forward with
overlap_param_gather); fsdp gathers each chunk's parameters before its first forward, keeps them
for all micro-batches, and reduce-scatters the gradients of the last; HSDP does so within its shard
group, then all-reduces each rank's shard across the groups. A chunk's backward ends with
the strategy's gradient-accumulation pass over the chunk's parameters (compute.grad_accumulation).
With recompute_layers a chunk's backward recomputes only its layers that recompute (simulator.training.recompute);
the others' backward runs as without recomputation.
With tied embeddings the first stage's input embedding and the last stage's output layer are one
matrix: after both stages' last backward their gradients are all-reduced between the two (Megatron
_allreduce_embedding_grads, DeepSpeed _exec_reduce_tied_grads), at the gradient reduction's
precision, before either steps: DeepSpeed's pipeline schedule does it before the data-parallel
reduction (which then waits for it), Megatron's finalize_model_grads after both stages' reductions
(ParallelSpec.tied_grad_sync). Not modelled: Megatron's vocabulary-parallel embedding all-reduce.
With expert parallelism a chunk's routed experts are gathered and reduced over the expert
data-parallel group ("edp"), beside its other parameters over the data-parallel group.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simulator.core.errors import ConfigError
from simulator.training.compute import ComputeModel
from simulator.training.recompute import (
    layer_recomputes,
    modules_of,
    reruns_attention,
    reruns_forward_collectives,
    runs_recomputing,
)
from simulator.training.shards import (
    blocks_params_on_gpu,
    chunk_layers,
    expert_replicas,
    expert_shard_group,
    owned_params,
    trainable_blocks_params_on_gpu,
    trainable_layer_params_on_gpu,
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
from workloads.model import ACTIVATION_BYTES, TransformerModel
from workloads.spec import TrainingSpec

Work = tuple[str, int, int]  # ("F" or "B", micro-batch, chunk)


def _warm_up(kind: str, p: int, v: int, m: int, stage: int) -> tuple[int, int]:
    """(forwards, warm-up): the forwards `stage` runs in a step (chunks x micro-batches) and how many of
    them come before its first backward (see module docstring)."""
    if kind == "gpipe":
        return m, m
    if kind == "1f1b":
        return m, min(p - stage - 1, m)
    if m % p:
        raise ConfigError(f"interleaved schedule: micro-batches per step ({m}) must be a multiple of pp ({p})")
    return m * v, min(2 * (p - stage - 1) + (v - 1) * p, m * v)


def schedule(kind: str, p: int, v: int, m: int, stage: int) -> list[Work]:
    """The order in which `stage` runs its forwards and backwards (see module docstring)."""
    total, warm = _warm_up(kind, p, v, m, stage)
    if kind == "gpipe":
        return [("F", j, 0) for j in range(m)] + [("B", j, 0) for j in reversed(range(m))]
    if kind == "1f1b":
        forwards = [("F", j, 0) for j in range(m)]
        backwards = [("B", j, 0) for j in range(m)]
    else:
        def micro(k: int) -> int:
            return (k // (p * v)) * p + k % p

        forwards = [("F", micro(k), (k // p) % v) for k in range(total)]
        backwards = [("B", micro(k), v - 1 - (k // p) % v) for k in range(total)]
    order = forwards[:warm]
    for i in range(len(forwards) - warm):
        order += [forwards[warm + i], backwards[i]]
    return order + backwards[len(forwards) - warm:]


def peak_in_flight(kind: str, p: int, v: int, m: int, stage: int) -> int:
    """Most chunks whose activations `stage` holds at once over its schedule: its warm-up forwards,
    plus the one forward each steady-state pair runs before its backward (so as many as the
    schedule's forwards, at most). In closed form: the cost does not grow with the micro-batches."""
    total, warm = _warm_up(kind, p, v, m, stage)
    return min(warm + 1, total)


@dataclass(frozen=True)
class _Chunk:
    """What one model chunk of one stage computes and holds."""

    blocks: tuple[tuple[TransformerModel, int], ...]  # its layers by kind of block, in order (model.block_counts)
    first: bool  # holds the embedding
    last: bool  # holds the output layer
    params: float  # on one GPU (after tensor parallelism)
    experts: float = 0.0  # of which routed experts with a group of their own (expert parallelism)
    outside: float = 0.0  # of which outside its blocks: the embedding or output layer
    trained: float = 0.0  # of `params`, those that train (LoRA: the blocks' adapters, nothing outside them)
    recomputes: tuple[bool, ...] = ()  # of each of its layers in order, whether it recomputes (recompute_layers)
    recomputing: tuple[int, ...] = ()  # of each run of `blocks`, how many layers recompute

    @property
    def layer_blocks(self) -> tuple[TransformerModel, ...]:
        """Each of its layers' kind of block, in order."""
        return tuple(block for block, n in self.blocks for _ in range(n))


def plan_pipeline(model: TransformerModel, training: TrainingSpec, compute: ComputeModel, seq_len: int,
                  micro_steps: int, dp: int, shard_group: int) -> StepPlan:
    """The task list of one optimizer step over all pipeline stages (see module docstring); `dp` data- x
    context-parallel ranks, `shard_group` of them on a node."""
    par, s, b = training.parallel, training.strategy, training.micro_batch
    p, v, tp, cp = par.pp, par.virtual_stages, par.tp, par.cp
    local_seq = seq_len // cp  # a context-parallel rank's tokens of each sequence
    kind = "fsdp" if s.kind in ("fsdp", "zero3", "hsdp") else s.kind
    if kind not in ("ddp", "zero1", "fsdp"):
        raise ConfigError(f"training.strategy.kind {s.kind} with pipeline parallelism: use ddp, zero1 or fsdp")
    times = {block: compute.layer(block, b, seq_len, training.activation_checkpointing, tp, par.sequence_parallel,
                                  training.flash_attention, cp, par.ep, par.etp) for block, _ in model.blocks}
    head_f, head_b = compute.head(model, b, seq_len, tp, cp)
    mtp_f, mtp_b = compute.mtp_heads(model, b, seq_len, tp, cp)  # the MTP modules' output layer and loss
    checkpointing = training.activation_checkpointing
    # a backward task's passes of each layer: the forward's too where recomputation re-runs its collectives
    kinds = ("forward", "backward") if reruns_forward_collectives(checkpointing) else ("backward",)
    # a backward task's passes of each layer for context parallelism: selective recomputation re-runs attention,
    # torchtitan's op policy keeps its output (and its re-run TP all-gathers are not counted here)
    recomputed = ("forward", "backward") if reruns_attention(checkpointing, modules_of(training)) else ("backward",)
    attention_s = compute.attention_forward_s(model, b, seq_len, tp, cp)

    def collectives(kind: str, block: TransformerModel, layers: int) -> tuple[list[CollectiveCall], Rings]:
        """A forward or a backward task's collectives over `layers` layers of `block` (tasks.pass_collectives);
        "plain": a backward over layers that do not recompute (recompute_layers)."""
        if kind == "forward":
            return pass_collectives(block, b, seq_len, par, attention_s, ("forward",), layers,
                                    routed_load=compute.routed_load)
        if kind == "plain":
            return pass_collectives(block, b, seq_len, par, attention_s, ("backward",), layers, 1,
                                    compute.routed_load)
        calls, rings = pass_collectives(block, b, seq_len, par, attention_s, recomputed, layers, len(kinds),
                                        compute.routed_load)
        if checkpointing == "selective":  # Megatron-Core's recompute modules that re-run collectives (moe, mlp)
            calls += module_rerun_calls(block, b, seq_len, par, modules_of(training), compute.routed_load, layers)
        return calls, rings

    # per layer of each kind of block: the GEMMs overlapped TP collectives hide behind
    # (and, with ep_comm_overlap, what a mixture block's all-to-alls hide behind)
    budgets: dict[tuple[str, TransformerModel], tuple[tuple[float, ...], ...] | None] = {}
    for block, _ in model.blocks:
        tp_overlap, async_grad = par.tp_comm_overlap, par.tp_async_grad_reduce
        expert_s = expert_budgets(times[block], par) if block.spec.moe else None
        overlap = tp_overlap or expert_s is not None
        regather = par.sp_backward_regather
        gemm_s = (compute.gemms_s(block, b, seq_len, tp, cp, par.ep, par.etp)
                  if tp_overlap or async_grad or regather else {})
        budgets["forward", block] = overlap_budgets(collectives("forward", block, 1)[0], gemm_s, ("forward",),
                                                    tp=tp_overlap, expert_s=expert_s) if overlap else None
        for task_kind, task_passes in (("backward", kinds), ("plain", ("backward",))):
            budgets[task_kind, block] = overlap_budgets(collectives(task_kind, block, 1)[0], gemm_s, task_passes,
                                                   par.tp_comm_overlap_backward, tp_overlap, expert_s,
                                                   async_grad) if overlap or async_grad or regather else None

    def blocks_pass(direction: str, block: TransformerModel | None, n: int, recomputing: int = 0) -> tuple[
            float, list[CollectiveCall], Rings, tuple[tuple[float, ...], ...] | None]:
        """Seconds, collectives, context-parallel rings and overlap budgets of a pass over `n` layers of
        `block`, `recomputing` of them recomputing in a backward (the others' backward as without
        recomputation); None: a pass over no layers (a chunk holding only the embedding or the output layer)."""
        if block is None:
            return 0.0, [], (), None
        t = times[block]
        if direction == "forward":
            return n * t.forward_s, *collectives("forward", block, n), budgets["forward", block]
        seconds = n * t.backward_s + recomputing * t.recompute_s
        parts = [(part, layers) for part, layers in (("backward", recomputing), ("plain", n - recomputing)) if layers]
        calls: list[CollectiveCall] = []
        rings: Rings = ()
        budget: tuple[tuple[float, ...], ...] | None = () if budgets["backward", block] is not None else None
        for part, layers in parts:
            more, more_rings = collectives(part, block, layers)
            calls, rings = calls + more, rings + more_rings
            if budget is not None:
                budget += budgets[part, block] or ()
        return seconds, calls, rings, budget

    recomputes = layer_recomputes(training, model.block_layers)
    ranges = chunk_layers(model.spec.layers, par, model.mtp_layers)  # (first, past-the-last) layer of each
    embedding = (model.embedding_params + model.final_norm_params) / tp
    output = (model.output_params or model.spec.vocab * model.spec.hidden) / tp  # tied: the last stage's copy
    chunks = {}
    for k, (start, stop) in enumerate(ranges):
        dense, experts = blocks_params_on_gpu(model, tp, par.ep, start, stop, par.etp)
        outside = (embedding if k == 0 else 0.0) + (output if k == p * v - 1 else 0.0)
        trained = (sum(trainable_blocks_params_on_gpu(model, training, tp, par.ep, start, stop))
                   + (outside if training.lora_rank is None else 0.0))
        runs = runs_recomputing(model, training, start, stop)
        chunks[k % p, k // p] = _Chunk(tuple((block, n) for block, n, _ in runs), k == 0, k == p * v - 1,
                                       dense + experts + outside, experts, outside, trained, recomputes[start:stop],
                                       tuple(r for _, _, r in runs))
    send_size = int(ACTIVATION_BYTES * b * local_seq * model.spec.hidden / (tp if par.p2p_scatter_gather else 1))
    grad_op = bucket_reduction_op(kind, s)
    # tied input and output embeddings live on the first and the last stage: their gradients are summed
    tied_bytes = int(output * s.grad_reduce_bytes) if model.spec.tied_embeddings and p > 1 \
        and training.lora_rank is None else 0  # a LoRA job's embeddings are frozen
    first_ready: tuple[str, ...] = ()  # stage 0's last backward
    first_reductions: tuple[str, ...] = ()  # stage 0's data-parallel reductions
    # a blocking send shares its stage's links with no other transfer: the stage's compute, and so its
    # next send and tensor-parallel collectives, waits for it; the gradient reduction comes after the
    # last send unless it overlaps the last micro-batch's backward (then, interleaved, other chunks'
    # earlier work too); early parameter gathers may run beside anything. The sends and TP collectives
    # of the other micro-batches are marked alone.
    gathering = dp > 1 and (kind == "fsdp" or (kind == "zero1" and s.overlap_param_gather))
    reducing = s.overlap_grad_reduce and dp > 1
    # the micro-batch whose backward of a chunk runs last (1f1b, interleaved: the last one; gpipe: the first)
    last_backward = 0 if par.pipeline_schedule == "gpipe" else micro_steps - 1

    def alone(j: int) -> bool:
        if par.overlap_p2p or gathering:
            return False
        return not reducing or (v == 1 and j != last_backward)
    tasks: list[Task] = []

    def by_group(prefix: str, op: str, params: float, experts: float, bytes_per_param: int,
                 deps: tuple[str, ...], stage: int) -> list[str]:
        """`op` over `params` parameters of a stage: over the data-parallel group, the `experts` among
        them (expert parallelism) over the expert data-parallel group; the tasks' names. HSDP, and ZeRO-1 in
        optimizer groups, gather and reduce-scatter within the shard group (the experts within its ranks holding
        them), then all-reduce each rank's shard across the groups on a stream of its own (as without
        pipelining, simulator.training.plan); an all-reduce of whole gradients spans every data-parallel rank.
        DeepSpeed's ZeRO-1 (reduce_per_rank) reduces with one reduce per rank."""
        group, expert_group = ("shard", "eshard") if s.hybrid and op != "all_reduce" else ("dp", "edp")
        parts = [(group, params - experts, prefix, shard_group, dp)] + (
            [(expert_group, experts, prefix + ".x", expert_shard_group(shard_group, par.ep),
              expert_replicas(dp, tp, par.ep, par.expert_tp))] if experts else [])
        names = []
        for part_group, count, task, shards, ranks in parts:
            stream = "ag" if op == "all_gather" else "rs"
            size = int(count * bytes_per_param)
            call = reduction_call(op, size, part_group, ranks, s.reduce_per_rank and not s.hybrid)
            tasks.append(Task(task, stream, op, collective=call, deps=deps, stage=stage))
            names.append(task)
            if s.hybrid and op == "reduce_scatter" and shards < ranks:
                tasks.append(across_replicas(tasks[-1], shards))
                names.append(tasks[-1].name)
        return names

    def name(work: Work, stage: int) -> str:
        return f"{work[0]}{stage}.{work[2]}.{work[1]}"

    def virtual(stage: int, chunk: int) -> int:
        return chunk * p + stage

    def stage_chunk(k: int) -> tuple[int, int]:
        return k % p, k // p

    for stage in range(p):
        reductions: list[str] = []
        gathers: dict[int, tuple[str, ...]] = {}
        if gathering:
            for c in range(v):
                chunk = chunks[stage, c]  # FSDP gathers every parameter, ZeRO-1 what the last step updated
                gathers[c] = tuple(by_group(f"ag{stage}.{c}", "all_gather",
                                            chunk.params if kind == "fsdp" else chunk.trained,
                                            chunk.experts, PARAM_BYTES, (), stage))
        ready: tuple[str, ...] = ()
        for work in schedule(par.pipeline_schedule, p, v, micro_steps, stage):
            direction, j, c = work
            chunk, k = chunks[stage, c], virtual(stage, c)
            deps: tuple[str, ...] = ready
            if direction == "F":
                if k > 0:
                    deps += (f"send{k - 1}.{j}",)
                if j == 0 and c in gathers:
                    deps += gathers[c]
                # a chunk's kinds of block in order (a mixture's dense first blocks: a pass of their own); a
                # chunk holding only the embedding or the output layer (pipeline_split) a pass without blocks
                passes: tuple[tuple[TransformerModel | None, int], ...] = chunk.blocks or ((None, 0),)
                for i, (pass_block, n) in enumerate(passes):
                    seconds, calls, rings, budget = blocks_pass("forward", pass_block, n)
                    duration = seconds + (head_f * 0.05 if chunk.first and i == 0 else 0.0) + (
                        head_f * 0.95 + mtp_f if chunk.last and i == len(passes) - 1 else 0.0)
                    part = "" if i == len(passes) - 1 else ".dense"
                    ready = add_pass(tasks, name(work, stage) + part, "forward", duration, deps, calls, budget, stage,
                                     alone(j), rings)
                    deps = ready
                if k < p * v - 1:
                    peer, _ = stage_chunk(k + 1)
                    tasks.append(Task(f"send{k}.{j}", "send", "p2p", collective=CollectiveCall(
                        "sendrecv", send_size, f"pp:{peer}"), deps=ready, stage=stage, alone=alone(j)))
                    if not par.overlap_p2p:
                        ready = (*ready, f"send{k}.{j}")
                continue
            if k < p * v - 1:
                deps += (f"back{k + 1}.{j}",)
            split = j == last_backward and reducing
            # last layers first (a mixture's dense blocks last), with how many of them recompute
            pieces: list[tuple[str, TransformerModel | None, int, int]] = [
                (f"{name(work, stage)}.l{i}", block, 1, int(recomputes))
                for i, (block, recomputes) in enumerate(zip(reversed(chunk.layer_blocks), reversed(chunk.recomputes),
                                                            strict=True))] if split else [
                (name(work, stage) + ("" if i == 0 else ".dense"), block, n, r)
                for i, ((block, n), r) in enumerate(reversed(tuple(zip(chunk.blocks, chunk.recomputing,
                                                                       strict=True))))]
            pieces = pieces or [(name(work, stage), None, 0, 0)]  # the embedding or the output layer alone
            accumulate = compute.grad_accumulation(chunk.trained, s.grad_accumulation_bytes)
            for piece, piece_block, n, recomputing in pieces:
                seconds, calls, rings, budget = blocks_pass("backward", piece_block, n, recomputing)
                duration = seconds + (head_b + mtp_b if chunk.last and piece == pieces[0][0] else 0.0) + (
                    accumulate if piece == pieces[-1][0] else 0.0)
                ready = add_pass(tasks, piece, "backward", duration, deps, calls, budget, stage, alone(j), rings)
                deps = ready
                if split:
                    # the layer's gradients; the last piece also carries the embedding or output layer's
                    dense_layer, expert_layer = (0.0, 0.0) if piece_block is None else trainable_layer_params_on_gpu(
                        piece_block, training, tp, par.ep)
                    outside = chunk.outside if training.lora_rank is None else 0.0
                    grads = dense_layer + expert_layer + (outside if piece == pieces[-1][0] else 0.0)
                    reductions += by_group(f"red.{piece}", grad_op, grads, expert_layer, s.grad_reduce_bytes,
                                           (piece,), stage)
            if k > 0:
                peer, _ = stage_chunk(k - 1)
                tasks.append(Task(f"back{k}.{j}", "send_back", "p2p", collective=CollectiveCall(
                    "sendrecv", send_size, f"pp:{peer}"), deps=ready, stage=stage, alone=alone(j)))
                if not par.overlap_p2p:
                    ready = (*ready, f"back{k}.{j}")
        stage_params = sum(chunks[stage, c].trained for c in range(v))  # what is reduced, updated, gathered
        stage_experts = sum(chunks[stage, c].experts for c in range(v))
        first_ready = ready if stage == 0 else first_ready
        tied: tuple[str, ...] = ("tied",) if tied_bytes and stage in (0, p - 1) else ()
        tied_first = par.tied_grad_sync == "before_dp"
        # both stages' last backward (after_dp: and their reductions), then one 2-rank all-reduce per pair
        tied_task = Task("tied", "rs", "all_reduce", collective=CollectiveCall("all_reduce", tied_bytes, "pp:0"),
                         deps=(*ready, *first_ready), stage=stage)
        if tied and stage == p - 1 and tied_first:
            tasks.append(tied_task)
        if dp > 1 and not s.overlap_grad_reduce:
            reductions += by_group(f"red{stage}", grad_op, stage_params, stage_experts, s.grad_reduce_bytes,
                                   (*ready, *(tied if tied_first else ())), stage)
        first_reductions = tuple(reductions) if stage == 0 else first_reductions
        if tied and stage == p - 1 and not tied_first:
            tasks.append(replace(tied_task, deps=(*tied_task.deps, *first_reductions, *reductions)))
        owned = owned_params(training, stage_params - stage_experts, stage_experts, dp, shard_group)
        tasks.append(Task(f"optimizer{stage}", "compute", "optimizer", compute.optimizer(owned, training.optimizer),
                          deps=(*ready, *reductions, *tied), stage=stage))
        if kind == "zero1" and not s.overlap_param_gather and dp > 1:
            gathered = by_group(f"param_ag{stage}", "all_gather", stage_params, stage_experts, PARAM_BYTES,
                                (f"optimizer{stage}",), stage)
            tasks.append(Task(f"step_end{stage}", "compute", "optimizer", 0.0, deps=tuple(gathered), stage=stage))
    return StepPlan(tuple(tasks), micro_steps)
