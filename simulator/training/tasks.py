"""The vocabulary of a step plan (tasks on streams, collective calls) and the tensor-parallel
communication a layer's pass adds.

A plan is a list of tasks, each on a stream of one pipeline stage's representative GPU (`compute`;
`tp` for tensor-parallel collectives and the expert all-to-alls; `cp` for the context-parallel ring; `ag` for parameter
gathers; `rs` for gradient reductions; `send` for pipeline transfers), with the tasks it waits for.
Streams run their tasks in order; a task starts when its stream is free and its dependencies are
done. A collective the planner marks
`alone` can share its links with nothing else of its stage, whenever it runs, so it is priced in
closed form instead of on the flow engine (which would give the same).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simulator.collectives.comm import CommView
from simulator.collectives.cost import CollectiveEstimate
from simulator.collectives.nccl_setup import NcclSetup
from simulator.collectives.params import ModelParams
from simulator.training.compute import LayerTimes
from workloads.model import ACTIVATION_BYTES, TransformerModel
from workloads.spec import ParallelSpec, StrategySpec

PARAM_BYTES = 2  # bf16/fp16 parameters as gathered


@dataclass(frozen=True)
class CollectiveCall:
    op: str
    size_bytes: int
    group: str  # "dp", "shard" (HSDP group), "replica" (across groups), "tp", "cp" (ring neighbours), "cp:all"
    # (the whole context-parallel group), "ep" (expert parallel), "edp" (expert data parallel), "pp" (to the next
    # stage)
    count: int = 1  # back-to-back calls of this size (the TP collectives of a pipeline chunk, per-rank reduces)
    # "regather": sequence parallelism's backward all-gather of a saved input (tp_calls); "attention": the TP
    # collectives of a block's attention half alone (its experts whole on each GPU); "regather:attention" both
    role: str = ""
    top_k: int = 0  # op "deepep": the experts a token goes to (simulator.collectives.deepep)


def bucket_reduction_op(kind: str, strategy: StrategySpec) -> str:
    """The collective that reduces a DDP / ZeRO-1/2 gradient bucket: an all-reduce for DDP, for ZeRO-1 holding
    whole gradients (zero_grad_all_reduce) and for ZeRO-1/2 all-reducing each bucket (bucket_all_reduce, unless
    reduce_per_rank, which wins); a reduce-scatter otherwise (reduction_call splits it per rank)."""
    if kind == "ddp" or (kind == "zero1" and strategy.zero_grad_all_reduce):
        return "all_reduce"
    if kind in ("zero1", "zero2") and strategy.bucket_all_reduce and not strategy.reduce_per_rank:
        return "all_reduce"
    return "reduce_scatter"


def reduction_call(op: str, size_bytes: int, group: str, ranks: int, per_rank: bool) -> CollectiveCall:
    """A gradient reduction of `size_bytes` over a group of `ranks`: one `op`, or, where `per_rank` (DeepSpeed's
    ZeRO-1/2, stage_1_and_2.py average_tensor) and the op is a reduce-scatter, one reduce per rank of its slice:
    the same bytes in as many launches as ranks."""
    if per_rank and op == "reduce_scatter" and ranks > 1:
        return CollectiveCall("reduce", max(1, size_bytes // ranks), group, ranks)
    return CollectiveCall(op, size_bytes, group)


def across_replicas(reduced: Task, shards: int) -> Task:
    """HSDP: after the reduce-scatter `reduced` within a shard group of `shards` ranks, each rank all-reduces
    its shard across the groups (the "replica" communicator), on a stream of its own ("ar") so the next
    unit's reduce-scatter does not queue behind it (PyTorch FSDP HYBRID_SHARD's _all_reduce_stream)."""
    assert reduced.collective is not None
    return Task(f"{reduced.name}.across", "ar", "all_reduce", deps=(reduced.name,), stage=reduced.stage,
                collective=CollectiveCall("all_reduce", reduced.collective.size_bytes // shards, "replica"))


@dataclass(frozen=True)
class Task:
    name: str
    stream: str
    label: str  # forward, backward, recompute, optimizer, all_gather, reduce_scatter, all_reduce, tp_comm,
    # cp_comm, ep_comm, p2p
    duration_s: float = 0.0
    collective: CollectiveCall | None = None
    deps: tuple[str, ...] = ()
    stage: int = 0
    alone: bool = False  # the planner's guarantee: no other transfer of its stage runs beside it
    # a compute pass with collectives overlapped: each such task's name and, for one layer, the seconds
    # of compute its calls hide behind, in order (TP: the GEMMs they are decomposed with; the CP ring:
    # the attention of one block; see add_pass)
    overlaps: tuple[tuple[str, tuple[float, ...]], ...] = ()


@dataclass(frozen=True)
class StepPlan:
    tasks: tuple[Task, ...]
    micro_steps: int


def tp_calls(model: TransformerModel, micro_batch: int, seq_len: int, tp: int, sequence_parallel: bool,
             layer_passes: int, regather_passes: int = 0, whole_experts: bool = False) -> list[CollectiveCall]:
    """The tensor-parallel collectives of `layer_passes` passes of one layer (a forward, a backward
    and a recomputed forward each count one) on one micro-batch. Megatron (Shoeybi et al. 2019,
    figure 3): each pass of a block all-reduces the b s h activation (or its gradient) twice, after
    the attention and after the MLP (the g and f operators). With sequence parallelism (Korthikanti
    et al. 2022, section 4.2.2) each all-reduce becomes an all-gather before the column-parallel
    GEMM and a reduce-scatter after the row-parallel one, the same bytes on the wire; where the
    column-parallel layers keep only their input's shard (ParallelSpec.sp_backward_regather), each of
    `regather_passes` backward passes all-gathers those two inputs again (role "regather"). A mixture of
    experts without shared experts whose experts are whole on each GPU (`whole_experts`: ParallelSpec.expert_tp 1)
    has no MLP half to gather for or reduce: its tokens stay sharded over the TP ranks, each dispatching its own
    (Megatron-Core's alltoall token dispatcher gathers over the experts' TP group only), so only the attention
    half's collectives remain (role "attention")."""
    if tp == 1 or layer_passes == 0:
        return []
    size = ACTIVATION_BYTES * micro_batch * seq_len * model.spec.hidden
    halves = 1 if whole_experts and model.spec.moe and not model.spec.shared_experts else 2
    role = "attention" if halves == 1 else ""
    count = halves * layer_passes
    if sequence_parallel:
        calls = [CollectiveCall("all_gather", size, "tp", count, role),
                 CollectiveCall("reduce_scatter", size, "tp", count, role)]
        if regather_passes:
            calls.append(CollectiveCall("all_gather", size, "tp", halves * regather_passes,
                                        "regather:attention" if role else "regather"))
        return calls
    return [CollectiveCall("all_reduce", size, "tp", count, role)]


def cp_call(model: TransformerModel, micro_batch: int, seq_len: int, tp: int, cp: int, kind: str,
            layers: int = 1) -> CollectiveCall | None:
    """The context-parallel ring of one pass (`kind` forward or backward) of `layers` layers on one
    micro-batch: Megatron-Core's point-to-point ring attention (Transformer Engine's
    AttnFuncWithCPAndKVP2P, Liu et al. 2023's ring attention with the sequence cut into 2 cp chunks,
    rank r holding chunks r and 2cp-1-r so the causal work is even). Each of the cp steps attends the
    local queries to one key/value block while the next block travels: cp - 1 exchanges a layer,
    each of the local K and V (b (s / cp) (k_dim + v_dim) / tp elements, 2 kv_dim but for MLA); backward
    passes the key/value block and its gradient, twice that. None without context parallelism."""
    if cp == 1:
        return None
    block = ACTIVATION_BYTES * micro_batch * (seq_len // cp) * (model.k_dim + model.v_dim) // tp
    return CollectiveCall("sendrecv", block * (2 if kind == "backward" else 1), "cp", (cp - 1) * layers)


def ulysses_calls(model: TransformerModel, micro_batch: int, seq_len: int, tp: int, cp: int,
                  passes: int) -> list[CollectiveCall]:
    """The all-to-alls of `passes` passes of one layer under all-to-all context parallelism
    (DeepSpeed-Ulysses, Jacobs et al. 2023; Megatron-Core --cp-comm-type a2a): before attention q, k
    and v go from a split of the sequence to a split of the heads, after it the output goes back; a
    backward pass moves the output gradient in and the q, k, v gradients out, the same bytes. Each
    rank's buffers: b (s / cp) (q_dim + k_dim + v_dim) / tp and b (s / cp) out_dim / tp elements (q_dim = out_dim
    = h and k_dim = v_dim = kv_dim unless the model sets head_dim apart or uses MLA). The attention waits for
    them: they run after the pass's compute, like unoverlapped TP collectives."""
    if cp == 1 or passes == 0:
        return []
    tokens = micro_batch * (seq_len // cp)
    qkv = ACTIVATION_BYTES * tokens * (model.q_dim + model.k_dim + model.v_dim) // tp
    out = ACTIVATION_BYTES * tokens * model.out_dim // tp
    return [CollectiveCall("alltoall", qkv, "cp:all", passes), CollectiveCall("alltoall", out, "cp:all", passes)]


def ep_calls(model: TransformerModel, micro_batch: int, seq_len: int, tp: int, ep: int,
             passes: int, routed_load: float = 1.0, dispatcher: str = "alltoall") -> list[CollectiveCall]:
    """The expert-parallel all-to-alls of `passes` passes of one MoE block (GShard, Lepikhin et al.
    2021; Megatron-Core's alltoall token dispatcher): before the experts each token's hidden state goes
    to the ranks of the k experts the router chose (dispatch), after them the outputs come back
    (combine); backward moves the gradients the same way. Each rank sends k b s h / tp elements per
    all-to-all (its seq_len tokens, those of its TP share with sequence parallelism), (ep - 1) / ep of
    them to other ranks, on the block's critical path. The busiest rank receives and returns
    `routed_load` times that (simulator.training.routing; 1 when balanced, the load-balancing loss's
    aim), and every rank's all-to-all lasts as long as its. None without expert parallelism. With DeepEP's
    kernels (`dispatcher` "deepep", ParallelSpec.ep_dispatcher) the same bytes go as op "deepep", which
    simulator.collectives.deepep prices (`top_k`: the copies of a token those bytes count)."""
    if ep == 1 or passes == 0 or not model.spec.moe:
        return []
    k = model.spec.experts_per_token
    size = round(ACTIVATION_BYTES * micro_batch * seq_len * k * model.spec.hidden * routed_load / tp)
    if dispatcher == "deepep":
        return [CollectiveCall("deepep", size, "ep", 2 * passes, top_k=k)]
    return [CollectiveCall("alltoall", size, "ep", 2 * passes)]


def call_estimate(nccl: NcclSetup, view: CommView, call: CollectiveCall,
                  params: ModelParams | None = None) -> CollectiveEstimate:
    """One of `call`'s collectives alone on its group's communicator `view`: NCCL's (of `call.count` back-to-back),
    or DeepEP's dispatch or combine (op "deepep", NcclSetup.predict_deepep)."""
    if call.op == "deepep":
        return nccl.predict_deepep(view, call.size_bytes, call.top_k, params)
    return nccl.predict(view, call.op, call.size_bytes, params, call.count)


def module_rerun_calls(model: TransformerModel, micro_batch: int, seq_len: int, parallel: ParallelSpec,
                       modules: tuple[str, ...], routed_load: float = 1.0, layers: int = 1) -> list[CollectiveCall]:
    """The collectives selective recomputation of Megatron-Core's recompute `modules` re-runs over `layers` layers
    on one micro-batch (each module is re-run whole, collectives included: normal checkpointing, transformer_config.py
    recompute_modules): moe a mixture block's expert all-to-alls (ep_calls of one pass) and, where the block's MLP
    half has tensor-parallel collectives (experts or shared experts split over the TP ranks), that half's; mlp a
    dense block's MLP half's (its input's all-gather and its output's reduce-scatter under sequence parallelism,
    else its all-reduce). The other modules stay on the GPU (core_attn's context-parallel exchanges go with
    attention, ring_passes)."""
    tp, cp, moe = parallel.tp, parallel.cp, model.spec.moe
    if not (("moe" in modules and moe) or ("mlp" in modules and not moe)):
        return []
    whole = parallel.ep > 1 and parallel.expert_tp == 1
    calls = [replace(call, count=call.count // 2)  # both halves' calls: the MLP half's is one of each pair
             for call in tp_calls(model, micro_batch, seq_len // cp, tp, parallel.sequence_parallel, layers,
                                  whole_experts=whole) if call.role != "attention"]
    if moe:
        calls += ep_calls(model, micro_batch, seq_len // cp, tp, parallel.ep, layers, routed_load,
                          parallel.ep_dispatcher)
    return calls


def ring_passes(model: TransformerModel, micro_batch: int, seq_len: int, tp: int, cp: int, attention_s: float,
                kinds: tuple[str, ...], layers: int = 1) -> tuple[tuple[CollectiveCall, float], ...]:
    """The context-parallel rings of a task running `kinds` passes ("forward" or "backward", a recomputed
    forward counting as forward) of `layers` layers, each with the attention seconds of one ring step
    (`attention_s`: one layer's forward attention on this GPU; a backward step takes twice)."""
    rings = []
    for kind in kinds:
        call = cp_call(model, micro_batch, seq_len, tp, cp, kind, layers)
        if call is not None:
            rings.append((call, attention_s / cp * (2.0 if kind == "backward" else 1.0)))
    return tuple(rings)


Rings = tuple[tuple[CollectiveCall, float], ...]


def pass_collectives(model: TransformerModel, micro_batch: int, seq_len: int, parallel: ParallelSpec,
                     attention_s: float, kinds: tuple[str, ...], layers: int = 1,
                     tp_passes: int | None = None, routed_load: float = 1.0) -> tuple[list[CollectiveCall], Rings]:
    """The collectives of a task running `kinds` passes ("forward", a recomputed forward counting as one,
    or "backward") of `layers` layers: the TP collectives and expert all-to-alls (ep_calls) of `tp_passes`
    of those passes (default all; selective recomputation re-runs attention only), then all-to-all context
    parallelism's calls (ulysses_calls), or the context-parallel rings (ring_passes) with `attention_s`,
    one layer's forward attention on this GPU; `routed_load` sizes the all-to-alls (ep_calls)."""
    tp, cp = parallel.tp, parallel.cp
    passes = len(kinds) if tp_passes is None else tp_passes
    regather = layers * kinds.count("backward") if parallel.sp_backward_regather else 0
    calls = tp_calls(model, micro_batch, seq_len // cp, tp, parallel.sequence_parallel, layers * passes, regather,
                     parallel.ep > 1 and parallel.expert_tp == 1)
    calls += ep_calls(model, micro_batch, seq_len // cp, tp, parallel.ep, layers * passes, routed_load,
                      parallel.ep_dispatcher)
    if parallel.cp_comm == "a2a":
        return calls + ulysses_calls(model, micro_batch, seq_len, tp, cp, layers * len(kinds)), ()
    return calls, ring_passes(model, micro_batch, seq_len, tp, cp, attention_s, kinds, layers)


# The GEMM a tensor-parallel collective is decomposed with when it overlaps compute (Transformer
# Engine's userbuffers under Megatron-Core --tp-comm-overlap; torch's micro-pipelined async TP): in a
# forward pass (a recomputed one too) the all-gather feeds the column-parallel GEMMs (qkv, mlp_up) and
# the reduce-scatter (or all-reduce) drains the row-parallel ones (attn_out, mlp_down); in backward
# the output gradient's all-gather feeds the row-parallel GEMMs' data-gradient GEMM and the
# reduce-scatter drains the column-parallel ones', each beside that GEMM's data- and weight-gradient
# GEMMs (BACKWARD_GEMMS times the forward GEMM). Chunk by chunk, a collective and its GEMM take the
# longer of the two: it hides behind its own GEMM and nothing else (the data dependency is direct).
PAIRED_GEMMS = {
    ("forward", "all_gather"): ("qkv", "mlp_up"),
    ("forward", "reduce_scatter"): ("attn_out", "mlp_down"),
    ("forward", "all_reduce"): ("attn_out", "mlp_down"),
    ("backward", "all_gather"): ("attn_out", "mlp_down"),
    ("backward", "reduce_scatter"): ("qkv", "mlp_up"),
    ("backward", "all_reduce"): ("qkv", "mlp_up"),
}
BACKWARD_GEMMS = 2.0
# sequence parallelism's backward re-gather of a column-parallel layer's input runs beside that layer's
# data-gradient GEMM (launched asynchronously before it, waited for before the weight-gradient GEMM:
# Megatron's LinearWithGradAccumulationAndAsyncCommunication, Transformer Engine's bulk dgrad overlap);
# the input gradient's reduce-scatter then has the weight-gradient GEMM alone
REGATHER_GEMMS = ("qkv", "mlp_up")


def overlap_budgets(calls: list[CollectiveCall], gemm_s: dict[str, float], kinds: tuple[str, ...],
                    backward: bool = True, tp: bool = True, expert_s: dict[str, float] | None = None,
                    async_grad: bool = False) -> tuple[tuple[float, ...], ...]:
    """For each TP call of a pass (tp_calls' list), the seconds of the GEMMs its collectives are
    decomposed with over one layer (`gemm_s`: forward seconds of each of the block's GEMMs;
    `kinds`: the layer's passes in order, "forward" or "backward"). Without `backward` overlap
    (torch's async TP) a backward pass's collectives hide behind nothing: budgets of 0; without `tp`
    overlap none does, except, with `async_grad` (ParallelSpec.tp_async_grad_reduce), a backward's
    reductions of the column-parallel layers' input gradients (the reduce-scatter or all-reduce paired with
    qkv and mlp_up) behind those layers' weight-gradient GEMMs (one GEMM each). The expert all-to-alls hide
    behind `expert_s[kind]` each (ParallelSpec.ep_comm_overlap: half a layer pass of another micro-batch,
    its dispatch and its combine one half each), or nothing; the other all-to-alls are on the block's
    critical path."""
    regather = any(call.role.startswith("regather") for call in calls)

    def budget(kind: str, gemm: str, op: str) -> float:
        if not tp:
            return gemm_s[gemm] if async_grad and kind == "backward" and op != "all_gather" else 0.0
        if kind == "backward":
            shared = regather and op != "all_gather"  # the data-gradient GEMM hides the re-gather
            return gemm_s[gemm] * (BACKWARD_GEMMS - (1.0 if shared else 0.0)) if backward else 0.0
        return gemm_s[gemm]

    def budgets(call: CollectiveCall) -> tuple[float, ...]:
        if call.group == "ep":
            return tuple(expert_s[kind] if expert_s else 0.0 for kind in kinds)
        if call.group.startswith("cp"):  # all-to-alls: on the block's critical path
            return tuple(0.0 for _ in kinds)
        halves = 1 if call.role.endswith("attention") else 2  # the attention half's GEMMs come first
        if call.role.startswith("regather"):
            return tuple(gemm_s.get(g, 0.0) for kind in kinds if kind == "backward" for g in REGATHER_GEMMS[:halves])
        return tuple(budget(kind, g, call.op) for kind in kinds for g in PAIRED_GEMMS[kind, call.op][:halves])

    return tuple(budgets(call) for call in calls)


def expert_budgets(times: LayerTimes, parallel: ParallelSpec) -> dict[str, float] | None:
    """What each expert all-to-all of a layer's pass hides behind with ep_comm_overlap: half of that pass's
    compute (a forward, or recomputed forward, and a backward of the layer) on another micro-batch, paired
    with it (overlap_budgets); None without the overlap."""
    if not parallel.ep_comm_overlap:
        return None
    return {"forward": times.forward_s / 2.0, "backward": times.backward_s / 2.0}


def add_pass(tasks: list[Task], name: str, label: str, duration_s: float, ready: tuple[str, ...],
             calls: list[CollectiveCall], budgets: tuple[tuple[float, ...], ...] | None, stage: int = 0,
             alone: bool = False, rings: tuple[tuple[CollectiveCall, float], ...] = ()) -> tuple[str, ...]:
    """Append a compute task and its tensor-parallel collectives (`alone`: nothing else of the stage can
    transfer beside them); return what the next pass waits for. Without overlap (`budgets` None) the
    collectives follow the compute (the GEMM's output is reduced before the next layer can use it); with
    overlap (Megatron-Core tp-comm-overlap, async TP) they run beside it, each decomposed with its GEMM
    (`budgets`, overlap_budgets), and the pass ends when both are done. All-to-all context parallelism's
    calls (ulysses_calls) and the expert all-to-alls (ep_calls) go with them on the same stream, booked
    as "cp_comm" and "ep_comm" and never hidden. Context-parallel `rings` (cp_call, with the attention
    seconds of one step) always run beside the compute, each exchange behind one step's attention."""
    names = [f"{name}.tp{k}" for k in range(len(calls))]
    ring_names = [f"{name}.cp{k}" for k in range(len(rings))]
    overlaps = tuple(zip(names, budgets, strict=True)) if budgets is not None else ()
    overlaps += tuple((ring_name, (step_s,)) for ring_name, (_, step_s) in zip(ring_names, rings, strict=True))
    tasks.append(Task(name, "compute", label, duration_s, deps=ready, stage=stage, overlaps=overlaps))
    after = ready if budgets is not None else (name,)
    for k, call in enumerate(calls):
        label = "cp_comm" if call.group.startswith("cp") else "ep_comm" if call.group == "ep" else "tp_comm"
        # each call after the first waits for the one before it on the stream (as the stream orders them
        # anyway), so that time queued behind a TP collective is booked to it, not to the next call
        tasks.append(Task(names[k], "tp", label, collective=call, deps=after if k == 0 else (names[k - 1],),
                          stage=stage, alone=alone))
    for k, (call, _) in enumerate(rings):
        tasks.append(Task(ring_names[k], "cp", "cp_comm", collective=call, deps=ready if k == 0 else (), stage=stage))
    return (name, *names[-1:], *ring_names[-1:])
