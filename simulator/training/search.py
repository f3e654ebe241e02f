"""Layout search (`clustersim plan`): which way to split one training job over one cluster is fastest.

A layout is a tensor-parallel degree t, a pipeline depth p, a context-parallel degree c (data-parallel
degree d = GPUs / (t p c)), for a mixture of experts an expert-parallel degree e (ranks of the d c that
split the experts), a micro-batch b, a data-parallel strategy, an activation recomputation
mode, sequence parallelism and the pipeline schedule. The search runs in four phases:

1. Enumerate (`enumerate_layouts`): t divides the GPUs per node (a TP group stays on NVLink, as
   Megatron-LM places it) and the attention and key/value heads; p divides the layers and t p divides
   the GPUs (or, counting the embedding and the output layer as a layer each, divides the layers + 2:
   Megatron-Core's account-for-embedding/loss split, `pipeline_split: embedding_and_loss`, which lets
   Llama 3 405B's 126 layers run on 16 stages); c (1 unless asked for: `--cp`) with t p c dividing the
   GPUs, the sequence splitting into 2c chunks and a fused attention kernel (all-to-all CP: t c dividing
   the heads); e (for a mixture of experts every divisor of the experts by default, or the `--ep` sizes
   given; 1 for a dense model) dividing d c, with sequence parallelism when t > 1; b (powers of two by
   default) makes the global batch a multiple of b d; ddp and zero1 (Megatron's distributed optimizer)
   always, sharded strategies (fsdp, zero2, zero3, hsdp) only without pipeline parallelism (hsdp also only
   where t c leaves a node several data-parallel ranks, its shard group one node's, which e divides), and only
   one strategy when d = 1 (nothing to shard); sequence parallelism with t > 1;
   with `interleaved`, also 2 virtual stages per rank where the layers (or the layers + 2, with that
   split) divide over 2p and the micro-batch count over p (Megatron's conditions). With a fused (flash)
   attention kernel, selective recomputation is left out when `none` is tried: flash attention already
   keeps no s x s scores (what selective recomputation saves), so selective would only recompute more.
2. Filter by memory: `memory_per_gpu` (arithmetic, microseconds a layout); those over the GPU's
   memory are dropped.
3. Estimate (`estimate_step_s`): a closed-form step time that chooses what to simulate: compute of
   the critical stage (ComputeModel) over m micro-batches plus the 1F1B pipeline bubble of
   (p - 1) / v micro-batch times, a fraction (p - 1) / (m + p - 1) with v = 1 (Narayanan et al.
   2021, section 2.2); the TP collectives and expert all-to-alls of each layer pass (tasks.pass_collectives),
   what each exchange of
   the context-parallel ring takes beyond one step's attention (tasks.cp_call), the pipeline sends and
   the DP collectives, each alone on its group's communicator under the job's placement
   (simulator.training.groups) by the collective model's closed form (predict_collective), the DP
   reduction hidden behind one micro-batch's backward when
   overlapped; the optimizer step. Layouts estimated over `slack` x the best are dropped (on
   GPT-3-class jobs the simulation lands within -5%..+15% of the estimate). Of the rest, `keep` are
   simulated: the best of each TP x PP shape (shapes in order of their best estimate), then the
   second best of each, and so on, so that a shape the estimate misjudges is still simulated.
4. Predict: `predict_step` (the SimPy timeline) for each kept layout, in a process pool when they
   would take more than POOL_AFTER_S (deep pipelines take tens of seconds each); those it finds
   out of memory are dropped, the rest ranked by predicted tokens/s (ties: less memory first).
The estimate only chooses what to simulate; every number reported comes from `predict_step`.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from simulator.collectives.comm import CommView, comm_view
from simulator.collectives.nccl_setup import DEFAULT_NCCL, NcclSetup
from simulator.core.errors import ClusterSimError, ConfigError, config_error_from
from simulator.training.compute import ComputeModel
from simulator.training.groups import communicators
from simulator.training.memory import memory_per_gpu, usable_bytes
from simulator.training.predict import job_layout, predict_step
from simulator.training.prediction import StepPrediction
from simulator.training.recompute import reruns_forward_collectives
from simulator.training.routing import routed_load
from simulator.training.shards import (
    blocks_params_on_gpu,
    owned_params,
    trainable_blocks_params_on_gpu,
    trainable_root_params,
)
from simulator.training.tasks import PARAM_BYTES, CollectiveCall, bucket_reduction_op, call_estimate, pass_collectives
from topologies.build import build_representative
from topologies.spec import TopologySpec
from workloads.frameworks import FRAMEWORKS
from workloads.model import ACTIVATION_BYTES, TransformerModel, transformer
from workloads.spec import Checkpointing, ModelSpec, PipelineSplit, StrategyKind, TrainingSpec

GIB = 1024**3
SHARDED = ("zero2", "zero3", "fsdp", "hsdp")  # shard gradients or parameters: not with pipeline parallelism
DEFAULT_KEEP = 24
DEFAULT_SLACK = 1.3  # the estimate is within about -5%..+15% of the simulation on GPT-3-class jobs
POOL_AFTER_S = 5.0


@dataclass(frozen=True)
class SearchSpace:
    """The values each dimension may take; None: every valid value (see the module docstring)."""

    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    micro_batches: tuple[int, ...] = (1, 2, 4, 8)
    strategies: tuple[StrategyKind, ...] = ("ddp", "zero1", "fsdp")
    recompute: tuple[Checkpointing, ...] = ("none", "selective", "full")
    sequence_parallel: tuple[bool, ...] = (True,)  # the values tried when tp > 1
    interleaved: bool = False
    cp: tuple[int, ...] = (1,)  # context-parallel degrees tried (long sequences)
    ep: tuple[int, ...] | None = None  # expert-parallel degrees tried; None: every valid one (1 for a dense model)


@dataclass(frozen=True)
class CandidateLayout:
    """One way to run the job: parallel degrees, micro-batching, strategy, recomputation."""

    tp: int
    pp: int
    dp: int
    micro_batch: int
    micro_steps: int  # micro-batches per data-parallel rank per optimizer step
    strategy: StrategyKind
    recompute: Checkpointing
    sequence_parallel: bool = False
    virtual_stages: int = 1
    cp: int = 1
    ep: int = 1
    pipeline_split: PipelineSplit = "layers"  # embedding_and_loss where only layers + 2 divide over the stages

    @property
    def replicas(self) -> int:
        """Ranks that reduce gradients together: data- x context-parallel."""
        return self.dp * self.cp

    @property
    def schedule(self) -> str:
        return "interleaved" if self.virtual_stages > 1 else "1f1b"

    def training(self, base: TrainingSpec) -> TrainingSpec:
        """`base` (model, batch, precision, strategy knobs, placement) run with this layout; full recomputation
        keeps the base's recompute_layers and selective its recompute_modules, the other choices drop them."""
        data: dict[str, Any] = base.model_dump()
        data.update(micro_batch=self.micro_batch, grad_accum=None, activation_checkpointing=self.recompute,
                    recompute_layers=data["recompute_layers"] if self.recompute == "full" else None,
                    recompute_modules=data["recompute_modules"] if self.recompute == "selective" else None)
        zero1_variant = data["strategy"]["zero_grad_all_reduce"] and self.strategy == "zero1"
        # the base's shard group is its strategy's (HSDP's, or ZeRO-1's optimizer group): other kinds run without
        group = data["strategy"]["shard_group_gpus"] if self.strategy == base.strategy.kind else None
        data["strategy"] = {**data["strategy"], "kind": self.strategy, "zero_grad_all_reduce": zero1_variant,
                            "shard_group_gpus": group}
        data["parallel"] = {**data["parallel"], "tp": self.tp, "pp": self.pp, "cp": self.cp, "ep": self.ep,
                            "sequence_parallel": self.sequence_parallel, "pipeline_schedule": self.schedule,
                            "virtual_stages": self.virtual_stages, "pipeline_split": self.pipeline_split,
                            "pipeline_layout": None}  # the planner splits the layers itself
        if self.tp == 1:  # the base's TP overlap has nothing to overlap without tensor parallelism
            data["parallel"].update(tp_comm_overlap=False, tp_comm_overlap_backward=True, tp_async_grad_reduce=False)
        if self.ep == 1:  # nor its all-to-all overlap without expert parallelism
            data["parallel"].update(ep_comm_overlap=False)
        if data["parallel"]["etp"] != 1 or self.ep == 1 or self.tp == 1:  # whole experts kept where they apply
            data["parallel"].update(etp=None)
        return TrainingSpec.model_validate(data)


@dataclass(frozen=True)
class RankedLayout:
    """A layout with its estimated and its predicted step."""

    layout: CandidateLayout
    estimated_step_s: float
    prediction: StepPrediction


@dataclass(frozen=True)
class SearchResult:
    """Layouts that fit, best first, and how many each phase kept."""

    ranked: tuple[RankedLayout, ...]
    enumerated: int
    fit_in_memory: int  # by the memory model
    promising: int  # of those, estimated within the slack of the best
    predicted: int  # of those, simulated (at most keep)
    failed: tuple[tuple[CandidateLayout, str], ...] = ()  # kept layouts predict_step refused, with its reason
    ruled_out: int = 0  # enumerated layouts the scenario's own settings cannot run with (HYBRID_SHARD with TP)


Candidate = tuple[float, float, CandidateLayout, TrainingSpec]  # estimated step s, memory bytes, layout, its job


def _divisors(n: int) -> list[int]:
    """1 .. n, those dividing n."""
    return [k for k in range(1, n + 1) if n % k == 0]


def _checked(values: tuple[int, ...] | None, valid: list[int], flag: str, why: str) -> list[int]:
    """The valid values, or the user's (each of which must be valid)."""
    if values is None:
        return valid
    bad = [v for v in values if v not in valid]
    if bad:
        raise ConfigError(f"{flag} {','.join(map(str, bad))}: {why} (valid: {','.join(map(str, valid))})")
    return sorted(set(values))


def _strategies(space: SearchSpace, tp: int, pp: int, cp: int, ep: int, replicas: int,
                gpus_per_node: int) -> list[StrategyKind]:
    # HSDP's default shard group, a node's data-parallel ranks, shards something and holds whole expert groups
    hybrid = tp * cp < gpus_per_node and (gpus_per_node // (tp * cp)) % ep == 0
    kinds = [k for k in space.strategies if (pp == 1 or k not in SHARDED) and (hybrid or k != "hsdp")]
    if replicas == 1 and kinds:  # one rank: every strategy is DDP without communication
        return ["ddp"] if "ddp" in kinds else kinds[:1]
    return kinds


def enumerate_layouts(model: ModelSpec, gpus_per_node: int, n_gpus: int, global_batch: int,
                      space: SearchSpace, seq_len: int | None = None,
                      flash_attention: bool = True, cp_comm: str = "p2p") -> list[CandidateLayout]:
    """Every layout of `space` valid for this model, cluster, global batch and sequence (module docstring,
    phase 1), in order of tp, pp, cp, micro-batch, strategy, recompute, sequence parallelism, schedule.
    ConfigError naming the option when a user-given degree is invalid or no layout divides the batch."""
    kv = model.kv_heads or model.heads
    tps = _checked(space.tp, [t for t in _divisors(gpus_per_node) if model.heads % t == 0 and kv % t == 0
                              and n_gpus % t == 0],
                   "--tp", f"must divide the GPUs per node ({gpus_per_node}), the GPUs ({n_gpus}), the heads "
                   f"({model.heads}) and the key/value heads ({kv})")
    def split(p: int) -> PipelineSplit | None:
        """How p stages divide the layers: evenly, or counting the embedding and the loss (module docstring)."""
        if model.layers % p == 0:
            return "layers"
        return "embedding_and_loss" if (model.layers + 2) % p == 0 else None

    pps = _checked(space.pp, [p for p in range(1, model.layers + 3) if split(p) and n_gpus % p == 0], "--pp",
                   f"must divide the GPUs ({n_gpus}) and the layers ({model.layers}) or, with the embedding and the "
                   f"loss counted as layers, the layers + 2 ({model.layers + 2})")
    seq = seq_len or model.training_context
    cps = [1] if space.cp == (1,) else _checked(
        space.cp, [c for c in _divisors(n_gpus) if seq % (2 * c) == 0 and (c == 1 or flash_attention)],
        "--cp", f"must divide the GPUs ({n_gpus}) and split the {seq}-token sequence into 2 x cp chunks, with a "
        "fused attention kernel")
    def heads_split(t: int, c: int) -> bool:  # all-to-all CP splits attention by heads over tp x cp
        return cp_comm != "a2a" or (model.heads % (t * c) == 0 and kv % (t * c) == 0)

    shapes = [(t, p, c) for t in tps for p in pps for c in cps if n_gpus % (t * p * c) == 0 and heads_split(t, c)]
    if not shapes:
        raise ConfigError(f"--tp/--pp/--cp: no tp x pp x cp among {tps} x {pps} x {cps} divides the {n_gpus} GPUs")
    eps = _checked(space.ep, _divisors(model.experts), "--ep",
                   f"must divide the model's experts ({model.experts}; a dense model has 1)")
    layouts = []
    for (t, p, c), e in [(shape, e) for shape in shapes for e in eps]:
        d = n_gpus // (t * p * c)
        if (d * c) % e:
            continue
        for b in sorted(set(space.micro_batches)):
            if global_batch % (b * d):
                continue
            m = global_batch // (b * d)
            # (chunks per stage, split): one chunk, and two interleaved where the layers, or the layers + 2 with
            # the embedding and the loss counted, divide over 2 p (the plain split first)
            chunks: list[tuple[int, PipelineSplit]] = [(1, split(p) or "layers")]
            if space.interleaved and p > 1 and m % p == 0:
                splits: tuple[tuple[PipelineSplit, int], ...] = (("layers", model.layers),
                                                                   ("embedding_and_loss", model.layers + 2))
                chunks += [(2, how) for how, slots in splits if slots % (2 * p) == 0][:1]
            for kind in _strategies(space, t, p, c, e, d * c, gpus_per_node):
                for recompute in space.recompute:
                    for sp in (sorted(set(space.sequence_parallel)) if t > 1 else [False]):
                        if sp or e == 1 or t == 1:  # expert with tensor parallelism needs SP (Megatron-Core)
                            layouts += [CandidateLayout(t, p, d, b, m, kind, recompute, sp, v, c, e, how)
                                        for v, how in chunks]
    if not layouts:
        dps = sorted({n_gpus // (t * p * c) for t, p, c in shapes})
        raise ConfigError(f"--global-batch {global_batch}: no layout divides it into micro-batch x data-parallel "
                          f"ranks (micro-batches {sorted(set(space.micro_batches))}, data-parallel degrees {dps})")
    return layouts


def layout_memory_bytes(layout: CandidateLayout, training: TrainingSpec, model: TransformerModel, seq_len: int,
                        v: CommView) -> float:
    """Bytes per GPU by the memory model alone (phase 2), with predict_step's arguments."""
    shard_group = job_layout(training, model, v).shard_ranks()
    return memory_per_gpu(model, training, seq_len, layout.replicas, shard_group,
                          micro_steps=layout.micro_steps).total_bytes


def estimate_step_s(layout: CandidateLayout, training: TrainingSpec, model: TransformerModel,
                    compute: ComputeModel, v: CommView, seq_len: int, nccl: NcclSetup = DEFAULT_NCCL) -> float:
    """Closed-form step time (module docstring, phase 3): only for choosing what to simulate. The
    groups' communicators follow the placement as predict_step's do (simulator.training.groups); `nccl`
    runs the collectives."""

    def _collective_s(view: CommView, op: str, size_bytes: float) -> float:
        """One collective alone on its group's communicator, by the collective model (closed form)."""
        return _call_s(view, CollectiveCall(op, int(size_bytes), ""))

    def _call_s(view: CommView, call: CollectiveCall) -> float:
        """One of a pass's collectives (an NCCL collective or DeepEP's all-to-all) alone on its communicator."""
        return call_estimate(nccl, view, call).time_s if call.size_bytes > 0 else 0.0

    t, p, c, b, m = layout.tp, layout.pp, layout.cp, layout.micro_batch, layout.micro_steps
    compute = compute.casting_weights_over(training, m)
    ranks = job_layout(training, model, v)
    views = communicators(v, ranks)
    (head_f, head_b), (mtp_f, mtp_b) = compute.head(model, b, seq_len, t, c), compute.mtp_heads(model, b, seq_len, t, c)
    head_f, head_b = head_f + mtp_f, head_b + mtp_b  # the planner prices the MTP modules' heads with the model's
    passes = 3 if reruns_forward_collectives(layout.recompute) else 2  # forward, backward (+ recomputed forward)
    kinds = ("forward", "backward") + (("forward",) if layout.recompute != "none" else ())
    # an average stage: 1 / p of every kind of block's layers (a mixture's dense first blocks too)
    forward_s = backward_s = layers_s = tp_s = cp_s = 0.0
    for block, n in model.blocks:
        times = compute.layer(block, b, seq_len, layout.recompute, t, layout.sequence_parallel,
                              training.flash_attention, c, layout.ep,
                              training.parallel.etp if layout.ep > 1 and t > 1 else None)
        calls, rings = pass_collectives(block, b, seq_len, training.parallel,
                                        compute.attention_forward_s(block, b, seq_len, t, c), kinds, tp_passes=passes,
                                        routed_load=compute.routed_load)
        layers = n / p
        forward_s += layers * times.forward_s
        backward_s += layers * times.backward_s
        layers_s += layers * times.total_s
        # with ep_comm_overlap each all-to-all hides behind half a pass: on average total / (2 passes)
        hidden = times.total_s / (2 * passes) if training.parallel.ep_comm_overlap else 0.0
        tp_s += layers * sum(call.count * max(0.0, _call_s(views[call.group], call)
                                              - (hidden if call.group == "ep" else 0.0)) for call in calls)
        cp_s += layers * sum(call.count * max(0.0, _call_s(views["cp"], call) - step_s)
                             for call, step_s in rings)
    dense_blocks, expert_blocks = blocks_params_on_gpu(model, t, layout.ep, expert_tp=training.parallel.etp)
    experts = expert_blocks / p  # held on this GPU apart (split over ep), beside the dense parameters
    dense = model.root_params / (t * p) + dense_blocks / p
    # what trains (LoRA: the adapters) is reduced, updated and, for ZeRO-1/2, gathered again
    trained_blocks, trained_expert_blocks = trainable_blocks_params_on_gpu(model, training, t, layout.ep)
    trained_experts = trained_expert_blocks / p
    trained = trainable_root_params(model, training, t) / p + trained_blocks / p
    accumulate_s = compute.grad_accumulation(trained + trained_experts, training.strategy.grad_accumulation_bytes)
    stage_s = layers_s + head_f + head_b + tp_s + cp_s + accumulate_s
    p2p_view = views[ranks.pipeline_peer(0, 1, v.nodes_per_leaf_group) if p > 1 else "pp:intra"]
    activation = ACTIVATION_BYTES * b * seq_len // c * model.spec.hidden
    p2p_bytes = activation / (t if training.parallel.p2p_scatter_gather else 1)
    p2p_s = 0.0 if p == 1 else 2.0 * layout.virtual_stages * _collective_s(p2p_view, "sendrecv", p2p_bytes)
    pipeline_s = (m + (p - 1) / layout.virtual_stages) * (stage_s + p2p_s)
    dp = views["dp"]
    reduce_op = bucket_reduction_op(layout.strategy, training.strategy)

    def over_groups(op: str, bytes_per_param: float, counts: tuple[float, float]) -> float:
        """`op` over `counts` (dense, experts) parameters: the dense on the data-parallel group, the experts on
        the expert one."""
        return (_collective_s(dp, op, counts[0] * bytes_per_param)
                + _collective_s(views["edp"], op, counts[1] * bytes_per_param))

    reduce_s = over_groups(reduce_op, training.strategy.grad_reduce_bytes, (trained, trained_experts))
    gather_s = over_groups("all_gather", PARAM_BYTES, (dense, experts))  # ZeRO-3 / FSDP: every parameter
    updated_s = over_groups("all_gather", PARAM_BYTES, (trained, trained_experts))  # ZeRO-1/2: what the step changed
    strategy = training.strategy
    # the last micro-batch's backward hides the gradient reduction (if overlapped), the next step's
    # first forward the parameter all-gather of ZeRO-1/2 (if overlapped)
    backward = backward_s if strategy.overlap_grad_reduce else 0.0
    forward = forward_s if strategy.overlap_param_gather else 0.0
    if layout.strategy in ("zero3", "fsdp", "hsdp"):  # gather twice and reduce-scatter every micro-step
        dp_s = m * max(0.0, 2.0 * gather_s + reduce_s - stage_s)
    elif layout.strategy == "ddp":
        all_reduce_s = over_groups("all_reduce", strategy.grad_reduce_bytes, (trained, trained_experts))
        dp_s = max(0.0, all_reduce_s - backward)
    else:
        dp_s = max(0.0, reduce_s - backward) + max(0.0, updated_s - forward)
    owned = owned_params(training, trained, trained_experts, layout.replicas, ranks.shard_ranks())
    return pipeline_s + dp_s + compute.optimizer(owned, training.optimizer)


def _broad(candidates: list[Candidate], keep: int) -> list[Candidate]:
    """The `keep` candidates to simulate, from candidates sorted by estimate: the best of each
    TP x PP x CP x EP shape (shapes in order of their best estimate), then the second best of each, and so
    on, so that a misjudged shape is still simulated."""
    shapes: dict[tuple[int, int, int, int], list[Candidate]] = {}
    for candidate in candidates:
        layout = candidate[2]
        shapes.setdefault((layout.tp, layout.pp, layout.cp, layout.ep), []).append(candidate)
    rounds = max(len(group) for group in shapes.values())
    ordered = [group[i] for i in range(rounds) for group in shapes.values() if i < len(group)]
    return ordered[:keep]


def _predict(topology: TopologySpec, training: TrainingSpec, model: ModelSpec,
             nccl: NcclSetup) -> StepPrediction | str:
    """predict_step without its spans (they are not needed and are large to send between
    processes); a ClusterSimError becomes its message."""
    try:
        return replace(predict_step(topology, training, model, nccl=nccl), spans=())
    except ClusterSimError as exc:
        return str(exc)


def _predictions(jobs: Sequence[tuple[TopologySpec, TrainingSpec, ModelSpec, NcclSetup]],
                 workers: int) -> Iterator[tuple[int, StepPrediction | str]]:
    """(index, prediction or error) for each job, in completion order. The first runs here; if the
    rest would take over POOL_AFTER_S at its pace and `workers` > 1, they go to a process pool
    (spawned, not forked: the caller may run threads, such as a progress bar), else they run here
    too. Starting a pool costs a second or two of imports: worth it only for long searches."""
    start = time.perf_counter()
    for index, job in enumerate(jobs):
        yield index, _predict(*job)
        rest = len(jobs) - index - 1
        if workers > 1 and rest > 1 and (time.perf_counter() - start) / (index + 1) * rest > POOL_AFTER_S:
            break
    else:
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, rest), mp_context=context) as pool:
        futures = {pool.submit(_predict, *job): i for i, job in enumerate(jobs) if i > index}
        for future in as_completed(futures):
            yield futures[future], future.result()


def _candidates(topology: TopologySpec, base: TrainingSpec, model_spec: ModelSpec, space: SearchSpace,
                slack: float, nccl: NcclSetup) -> tuple[list[CandidateLayout], int, int, list[Candidate]]:
    """Phases 1-3: every valid layout, how many of them the base's own settings rule out, how many fit,
    and those that fit with their estimate, best first, no slower than `slack` x the best estimate.
    ConfigError when none fits."""
    if base.global_batch is None:
        raise ConfigError("--global-batch is required: the layouts divide it")
    cluster = build_representative(topology)
    v = comm_view(cluster)
    model = transformer(model_spec, base.mtp_layers)
    seq_len = base.seq_len or model_spec.training_context
    if base.flash_attention and "none" in space.recompute:  # selective keeps what flash keeps, recomputing more
        space = replace(space, recompute=tuple(r for r in space.recompute if r != "selective"))
    layouts = enumerate_layouts(model_spec, topology.gpus_per_node, v.n_ranks, base.global_batch, space, seq_len,
                                base.flash_attention, base.parallel.cp_comm)
    capacity = usable_bytes(cluster.gpu.memory_gib * GIB, base)  # the layouts keep the base's memory_fraction
    compute = ComputeModel.for_job(cluster.gpu, base, topology.gpu_power_limit_w)
    candidates: list[Candidate] = []
    smallest = (float("inf"), layouts[0])
    refused, ruled_out = "", 0  # why the first layout the scenario's own settings rule out was skipped; how many
    for layout in layouts:
        try:  # the base's settings may not run with this layout (e.g. HYBRID_SHARD with TP): not a candidate
            training = layout.training(base)
            memory = layout_memory_bytes(layout, training, model, seq_len, v)
        except (ConfigError, ValidationError) as exc:
            reason = config_error_from(exc, "training") if isinstance(exc, ValidationError) else exc
            refused = refused or f"{describe(layout)}: {reason}"
            ruled_out += 1
            continue
        smallest = min(smallest, (memory, layout), key=lambda pair: pair[0])
        if memory <= capacity:
            rank = compute.with_routed_load(routed_load(training.routing, layout.ep))  # the busiest expert rank
            candidates.append((estimate_step_s(layout, training, model, rank, v, seq_len, nccl), memory, layout,
                               training))
    if not candidates and smallest[0] == float("inf"):
        raise ConfigError(f"no layout can run with the scenario's settings; the first refused: {refused}")
    if not candidates:
        raise ConfigError(f"no layout fits in {capacity / GIB:.0f} GiB per GPU: the smallest, {describe(smallest[1])}, "
                          f"needs {smallest[0] / GIB:.1f} GiB; try more --nodes (or allow --micro-batch 1 and "
                          f"--recompute full{', or --cp to split the sequence' if space.cp == (1,) else ''})")
    candidates.sort(key=lambda c: (c[0], c[1]))
    return layouts, ruled_out, len(candidates), [c for c in candidates if c[0] <= slack * candidates[0][0]]


def search_layouts(topology: TopologySpec, base: TrainingSpec, model_spec: ModelSpec, space: SearchSpace,
                   keep: int = DEFAULT_KEEP, slack: float = DEFAULT_SLACK, workers: int = 1,
                   on_start: Callable[[int], None] | None = None,
                   on_predicted: Callable[[], None] | None = None,
                   nccl: NcclSetup = DEFAULT_NCCL) -> SearchResult:
    """Rank the layouts of `space` for `base` (its model, global batch, sequence, precision and
    strategy knobs) on `topology` with `nccl` running the collectives (module docstring): simulate at
    most `keep` layouts whose estimate is within `slack` x the best, in up to `workers` processes.
    `on_start(n)` is told how many will be simulated and `on_predicted()` is called after each.
    ConfigError when no layout is valid, none fits in memory, or predict_step refuses every one."""
    if keep < 1:
        raise ConfigError(f"--keep must be >= 1, got {keep}")
    if not slack >= 1.0:  # NaN too
        raise ConfigError(f"--slack must be >= 1, got {slack}")
    if base.framework is not None:  # only the strategies the job's framework runs
        runs = FRAMEWORKS[base.framework].kinds
        space = replace(space, strategies=tuple(kind for kind in space.strategies if kind in runs))
        if not space.strategies:
            raise ConfigError(f"--strategies: {base.framework} runs none of those asked; it runs {', '.join(runs)}")
    layouts, ruled_out, fitting, candidates = _candidates(topology, base, model_spec, space, slack, nccl)
    kept = _broad(candidates, keep)
    if on_start is not None:
        on_start(len(kept))
    ranked, failed = [], []
    for index, outcome in _predictions([(topology, training, model_spec, nccl) for _, _, _, training in kept], workers):
        estimate, _, layout, _ = kept[index]
        if isinstance(outcome, str):
            failed.append((layout, outcome))
        elif outcome.fits_in_memory:
            ranked.append(RankedLayout(layout, estimate, outcome))
        if on_predicted is not None:
            on_predicted()
    if not ranked:
        reason = f"predict_step refused them ({failed[0][1]})" if failed else "the simulator finds all out of memory"
        raise ConfigError(f"none of the {len(kept)} layouts simulated can run: {reason}")
    order = {layout: i for i, layout in enumerate(layouts)}
    ranked.sort(key=lambda r: (-r.prediction.tokens_per_s, r.prediction.memory_per_gpu_bytes, order[r.layout]))
    return SearchResult(tuple(ranked), len(layouts), fitting, len(candidates), len(kept), tuple(failed), ruled_out)


def describe(layout: CandidateLayout) -> str:
    """E.g. 'TP8 PP8 DP24, micro-batch 1, zero1, recompute full, SP, interleaved x2' ('TP4 PP1 CP4 DP2, ...',
    'TP1 PP1 DP64 EP8, ...')."""
    extras = (", SP" if layout.sequence_parallel else "") + (
        f", interleaved x{layout.virtual_stages}" if layout.virtual_stages > 1 else "") + (
        ", embedding and loss counted as layers" if layout.pipeline_split == "embedding_and_loss" else "")
    context = f" CP{layout.cp}" if layout.cp > 1 else ""
    experts = f" EP{layout.ep}" if layout.ep > 1 else ""
    return (f"TP{layout.tp} PP{layout.pp}{context} DP{layout.dp}{experts}, micro-batch {layout.micro_batch}, "
            f"{layout.strategy}, recompute {layout.recompute}{extras}")
