"""Predict one training step: specs -> topology + plan -> SimPy timeline -> metrics.

The GPUs split into tensor-parallel, pipeline and data-parallel groups by the placement
(simulator.training.groups); HSDP adds a shard group (one node of the DP group) and a replica group
(the same GPU of every node). Without pipeline parallelism one GPU's plan is the step
(simulator.training.plan), with it one GPU per stage (simulator.training.pipeline). Collectives
are priced by the collective model on their group's communicator and run as flows on each stage's
shared resources (its GPU's intra-node links, its share of the NICs and of the leaf uplinks), so
concurrent collectives contend.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from simulator.collectives.comm import CommView, comm_view, server_classes
from simulator.collectives.cost import CollectiveEstimate
from simulator.collectives.flows import collective_resources, repeated_flow, resource_capacities
from simulator.collectives.nccl_setup import DEFAULT_NCCL, NcclSetup
from simulator.collectives.params import ModelParams
from simulator.core.errors import ConfigError
from simulator.network.closed_form import uncontended_time_s
from simulator.network.flows import FlowClass
from simulator.training.compute import ComputeModel
from simulator.training.groups import Layout, communicators, layout_of
from simulator.training.memory import memory_per_gpu, usable_bytes
from simulator.training.pace import NOMINAL, Pace, pace_classes
from simulator.training.pipeline import plan_pipeline
from simulator.training.plan import plan_step
from simulator.training.prediction import StepPrediction
from simulator.training.recompute import runs_recomputing
from simulator.training.routing import check_routing, kept_share
from simulator.training.routing import wait_s as routing_wait_s
from simulator.training.shards import (
    chunk_layers,
    owned_params,
    trainable_blocks_params_on_gpu,
    trainable_root_params,
)
from simulator.training.tasks import CollectiveCall, StepPlan, Task, call_estimate
from simulator.training.timeline import RepeatedMicroSteps, Timeline, simulate_plan
from topologies.build import build_representative
from topologies.spec import TopologySpec
from workloads.model import TransformerModel, transformer
from workloads.spec import ModelSpec, TrainingSpec

# what the compute stream can wait on that is communication (the rest: pipeline bubble, optimizer)
COMMUNICATION_LABELS = ("all_gather", "reduce_scatter", "all_reduce", "tp_comm", "cp_comm", "ep_comm", "p2p")


def micro_steps_of(training: TrainingSpec, dp: int) -> int:
    """Micro-steps per optimizer step from the global batch (or grad_accum); ConfigError if the
    global batch does not divide into micro-batches over the data-parallel ranks."""
    if training.grad_accum is not None:
        return training.grad_accum
    if training.global_batch is None:
        return 1
    per_step = training.micro_batch * dp
    if training.global_batch % per_step:
        raise ConfigError(
            f"training.global_batch {training.global_batch} is not a multiple of micro_batch "
            f"{training.micro_batch} x {dp} data-parallel GPUs = {per_step}"
            + _batch_hint(training.global_batch, per_step)
        )
    return training.global_batch // per_step


def _batch_hint(global_batch: int, per_step: int) -> str:
    """The nearest global batches that divide, and, for a whole number of thousands whose power-of-1024
    twin divides, that a bare K / M is a power of 1000 (docs/usage/conventions.md, "Units")."""
    below = global_batch // per_step * per_step
    hint = f": the nearest that divide are {below} and {below + per_step}" if below else f": the smallest is {per_step}"
    for suffix, power in (("M", 2), ("K", 1)):
        if global_batch % 1000**power == 0 and (global_batch // 1000**power * 1024**power) % per_step == 0:
            whole = global_batch // 1000**power
            return hint + (f" (if you wrote {whole}{suffix}: a bare {suffix} is {1000**power:,}; "
                           f"{whole}{suffix}i is {whole * 1024**power:,})")
    return hint


def topology_micro_steps(training: TrainingSpec, topology: TopologySpec) -> int:
    """micro_steps_of over the data-parallel ranks of `training` on all of `topology`'s GPUs, from the spec alone
    (no cluster graph built)."""
    return micro_steps_of(training, layout_of(training.parallel, topology.nodes * topology.gpus_per_node,
                                              topology.gpus_per_node).dp)


def _shard_ranks(stated: int | None, layout: Layout) -> int:
    """HSDP's shard group: `stated` consecutive ranks of the gradient group (data- x context-parallel), or its
    ranks on one node; ConfigError where the group does not divide it, or spans part of a node beside whole
    ones, or where a node holds one rank of it and none is stated (HSDP would shard nothing)."""
    per_node = layout.members_per_node("grad")
    shard = stated or per_node
    field = "training.strategy.shard_group_gpus"
    if stated is None and per_node == 1 and layout.replicas > 1:
        raise ConfigError(f"{field}: a node holds one rank of the data-parallel group (tp x cp fills it), so a "
                          "shard group of one node shards nothing; state how many data-parallel ranks each shard "
                          "group spans (torchtitan's data_parallel_shard_degree)")
    if layout.replicas % shard:
        raise ConfigError(f"{field} {shard} must divide the {layout.replicas} data- x context-parallel ranks")
    if (shard > per_node and shard % per_node) or (shard < per_node and per_node % shard):
        raise ConfigError(f"{field} {shard}: a shard group takes whole nodes' {per_node} data-parallel ranks, or a "
                          f"divisor of them")
    return shard


def job_layout(training: TrainingSpec, model: TransformerModel, v: CommView) -> Layout:
    """The job's parallel layout on the cluster; ConfigError for one that cannot run."""
    layout = layout_of(training.parallel, v.n_ranks, v.ranks_per_node)
    spec = model.spec
    if spec.heads % layout.tp or model.kv_heads % layout.tp:
        raise ConfigError(f"training.parallel.tp {layout.tp} must divide the model's attention heads ({spec.heads}) "
                          f"and key/value heads ({model.kv_heads})")
    chunks = layout.pp * training.parallel.virtual_stages
    embedding_and_loss = training.parallel.pipeline_split == "embedding_and_loss" and chunks > 1
    if training.parallel.pipeline_layout is not None:
        chunk_layers(spec.layers, training.parallel, model.mtp_layers)  # the layout holds the model's layers
    elif chunks > spec.layers + (2 if embedding_and_loss else 0):
        places = " + the embedding and the loss (pipeline_split)" if embedding_and_loss else (
            " (pipeline_split: embedding_and_loss allows 2 more)" if chunks <= spec.layers + 2 else "")
        raise ConfigError(f"training.parallel: pp {layout.pp} x virtual_stages {training.parallel.virtual_stages} "
                          f"exceeds the model's {spec.layers} layers{places}")
    strategy = training.strategy
    if strategy.hybrid:
        layout = replace(layout, shard=_shard_ranks(strategy.shard_group_gpus, layout))
    if layout.ep > 1:
        if not spec.moe:
            raise ConfigError(f"training.parallel.ep {layout.ep}: expert parallelism needs a mixture-of-experts "
                              f"model (model {spec.name} has a dense MLP; set experts > 1)")
        if spec.experts % layout.ep:
            raise ConfigError(f"training.parallel.ep {layout.ep} must divide the model's {spec.experts} experts")
        if strategy.hybrid and layout.shard_ranks() % layout.ep:
            raise ConfigError(f"training.parallel.ep {layout.ep} must divide the HSDP shard group's "
                              f"{layout.shard_ranks()} ranks (training.strategy.shard_group_gpus): expert "
                              "parallelism runs inside each shard group")
        if training.parallel.ep_dispatcher == "deepep" and v.ranks_per_node > 1 and v.intra_kind != "nvlink":
            raise ConfigError("training.parallel.ep_dispatcher deepep needs NVLink between the GPUs of a node "
                              "(DeepEP checks for peer access over NVLink between every pair); these GPUs talk over "
                              f"{'PCIe' if v.intra_kind == 'pcie' else 'host memory'}: use alltoall")
    check_routing(training, model)
    if training.lora_rank is not None and spec.moe:
        raise ConfigError("training.lora_rank with a mixture of experts is not modelled: adapters are priced on "
                          "dense blocks")
    packed = training.packed_sample_len
    if packed is not None and packed > (training.seq_len or spec.training_context):
        raise ConfigError(f"training.packed_sample_len {packed} is longer than the sequence "
                          f"({training.seq_len or spec.training_context} tokens): a packed sample is part of one")
    if layout.cp > 1:
        seq_len = training.seq_len or spec.training_context
        if seq_len % (2 * layout.cp):
            raise ConfigError(f"training.parallel.cp {layout.cp}: the sequence ({seq_len} tokens) must split into "
                              f"2 x cp = {2 * layout.cp} equal chunks (load-balanced causal ring attention)")
        if not training.flash_attention:
            raise ConfigError("training.parallel.cp > 1 needs a fused attention kernel (flash_attention: true): ring "
                              "attention runs it block by block")
        split = layout.tp * layout.cp
        if training.parallel.cp_comm == "a2a" and (spec.heads % split or model.kv_heads % split):
            raise ConfigError(f"training.parallel.cp_comm a2a: tp {layout.tp} x cp {layout.cp} = {split} must divide "
                              f"the attention heads ({spec.heads}) and key/value heads ({model.kv_heads}): the "
                              "all-to-alls split attention by heads")
    return layout


def slowed_stages(plan: StepPlan, stage_slowdown: Mapping[int, float]) -> StepPlan:
    """`plan` with the compute of each stage in `stage_slowdown` taking that factor longer (a straggler
    is its stage's representative GPU: its groups wait for it), the compute its collectives hide behind
    with it."""
    if not stage_slowdown:
        return plan
    tasks = []
    for task in plan.tasks:
        factor = stage_slowdown.get(task.stage, 1.0)
        if factor != 1.0 and task.collective is None:
            task = replace(task, duration_s=task.duration_s * factor, overlaps=tuple(
                (name, tuple(budget * factor for budget in budgets)) for name, budgets in task.overlaps))
        tasks.append(task)
    return replace(plan, tasks=tuple(tasks))


def simulate_step(model: TransformerModel, training: TrainingSpec, v: CommView, compute: ComputeModel,
                  seq_len: int, micro_steps: int, params: ModelParams | None = None,
                  nccl: NcclSetup = DEFAULT_NCCL, stage_slowdown: Mapping[int, float] | None = None,
                  ) -> Timeline:
    """The SimPy timeline of one optimizer step: one GPU, or one GPU per pipeline stage (those of
    `stage_slowdown` computing that much slower); `nccl` runs the collectives."""
    layout = job_layout(training, model, v)
    groups = communicators(v, layout)
    shard_group = layout.shard_ranks()
    if layout.pp == 1:
        dense, experts = trainable_blocks_params_on_gpu(model, training, layout.tp, layout.ep)
        local_params = owned_params(training, trainable_root_params(model, training, layout.tp) + dense, experts,
                                    layout.replicas, shard_group)
        plan = plan_step(model, training, compute, seq_len, micro_steps, layout.replicas, local_params, shard_group)
    else:
        plan = slowed_stages(plan_pipeline(model, training, compute, seq_len, micro_steps, layout.replicas,
                                           shard_group), stage_slowdown or {})
    capacity = resource_capacities(v)
    cache: dict[tuple[str, int, str, int], CollectiveEstimate] = {}
    estimate_of: dict[str, CollectiveEstimate] = {}

    def group_of(task: Task) -> str:
        """The communicator a task's collective runs on (a pipeline peer: within or across nodes and leaves;
        Layout.pipeline_peer caches it)."""
        call = task.collective
        assert call is not None  # only collective tasks are priced
        if not call.group.startswith("pp:"):
            return call.group
        return layout.pipeline_peer(task.stage, int(call.group[3:]), v.nodes_per_leaf_group)

    def estimate(task: Task) -> CollectiveEstimate:
        call = task.collective
        assert call is not None
        group = group_of(task)
        key = (call.op, call.size_bytes, group, call.count)
        if key not in cache:
            cache[key] = call_estimate(nccl, groups[group], call, params)
        estimate_of[task.name] = cache[key]
        return cache[key]

    def flow_of(task: Task) -> FlowClass:
        call = task.collective
        assert call is not None
        return repeated_flow(estimate(task), capacity, task.name, call.count)

    # TP collectives run one after another on their stream; where nothing else of their stage uses
    # the resources they use (TP on NVLink, DP and pipeline traffic on the NICs), they never share
    # bandwidth and the engine's answer is the closed form, so the engine is skipped for them; so it
    # is for the transfers the planner marks alone (blocking pipeline sends)
    collectives = [task for task in plan.tasks if task.collective is not None]
    busy: dict[int, set[str]] = {}
    for task in collectives:
        if task.stream != "tp":
            busy.setdefault(task.stage, set()).update(r for r, spb in estimate(task).demand_s_per_byte if spb > 0)
    resources = collective_resources(capacity)
    lone: dict[str, float] = {}
    alone_s: dict[tuple[CollectiveCall, str], float] = {}  # identical calls on one communicator: same time
    for task in collectives:
        call = task.collective
        assert call is not None
        used = {r for r, spb in estimate(task).demand_s_per_byte if spb > 0}
        if task.alone or (task.stream == "tp" and not used & busy.get(task.stage, set())):
            key = (call, group_of(task))
            if key not in alone_s:
                alone_s[key] = uncontended_time_s([flow_of(task)], resources)
            lone[task.name] = alone_s[key]

    # an overlapped TP collective hides behind the GEMM it is decomposed with and nothing else, a
    # context-parallel exchange behind one block's attention: a call longer than what it hides behind
    # stalls the compute stream by the difference (tasks.PAIRED_GEMMS, tasks.cp_call)
    by_name = {task.name: task for task in plan.tasks}
    one_call_s: dict[tuple[str, int, str], float] = {}

    def stall_s(task: Task) -> dict[str, float]:
        stalls: dict[str, float] = {}
        for name, budgets in task.overlaps:
            beside = by_name[name]
            call = beside.collective
            assert call is not None
            key = (call.op, call.size_bytes, group_of(beside))
            if key not in one_call_s:
                single = replace(beside, collective=replace(call, count=1))
                one_call_s[key] = uncontended_time_s([flow_of(single)], resources)
            stall = call.count / len(budgets) * sum(max(0.0, one_call_s[key] - budget) for budget in budgets)
            stalls[beside.label] = stalls.get(beside.label, 0.0) + stall
        return stalls

    timeline = simulate_plan(plan, resources, flow_of, lambda task: lone.get(task.name), stall_s)
    spans = []
    for span in timeline.spans:
        est = estimate_of.get(span.name)
        if est is not None and span.end_s > span.start_s:
            rate = span.size_bytes / (span.end_s - span.start_s)
            span = replace(span, resource_load=tuple((resource, rate * spb) for resource, spb in est.demand_s_per_byte))
        spans.append(span)
    return replace(timeline, spans=tuple(spans))


def _extrapolation_points(training: TrainingSpec, micro_steps: int) -> tuple[int, int] | None:
    """(m1, period): beyond m1 micro-steps every `period` of them (or a few periods, see
    steady_state_step) add the same time; None when simulating all `micro_steps` is as cheap. Without a
    pipeline the micro-steps between the first and the last repeat exactly (m1 = 2, period 1); with one,
    the steady state starts once every stage is past its warm-up (m1 >= pp + 1), a period being one
    micro-batch (interleaved: one group of pp)."""
    par = training.parallel
    if par.pp == 1:
        first, period = 2, 1
    else:
        period = par.pp if par.pipeline_schedule == "interleaved" else 1
        first = period * math.ceil((par.pp + 1) / period)
    if micro_steps <= first + period or (micro_steps - first) % period:
        return None
    return first, period


REPEAT_TOLERANCE = 1e-9  # relative: two increments this close are the same steady-state period
MAX_PERIODS = 4  # pipeline steady states tried, in periods: 1, 2, ..., MAX_PERIODS
FAR_FIRSTS = 3  # the steady state is checked again this many times m1 micro-steps further on
FULL_RUN_FIRSTS = 11  # a pipeline step of at most this many times m1 micro-steps is simulated whole


def steady_state_step(model: TransformerModel, training: TrainingSpec, v: CommView, compute: ComputeModel,
                      seq_len: int, micro_steps: int, params: ModelParams | None = None,
                      nccl: NcclSetup = DEFAULT_NCCL, stage_slowdown: Mapping[int, float] | None = None,
                      ) -> Timeline:
    """The step's timeline, simulating few micro-steps: beyond a point (see _extrapolation_points)
    each period of micro-steps adds exactly the same time, waits and compute, so the step is the
    m2-micro-step step plus (M - m2) / q periods, q micro-steps being the m2 run minus the m1 run.
    Without a pipeline q is one period. With one, the steady state can come late and in longer
    periods: fair sharing can make consecutive micro-batches alternate (one pass's transfers meeting
    the next one's, in turn: increments of 4.6 and 5.9 ms converging slowly while their sum stays
    fixed), and a stage or a transfer backlog can take over the pace after tens of micro-batches
    (on random pipelines: -9% to +17% at 64 micro-batches, the pace settling after 12-20). So a pipeline
    step of at most FULL_RUN_FIRSTS x m1 micro-steps is simulated whole (exact, and no dearer than what
    follows); a longer one takes q as the fewest periods (up to MAX_PERIODS) over which two successive
    increments agree, checked on a third run, then checks that increment again FAR_FIRSTS x m1
    micro-steps further on and, where it has changed, searches again from there (where no q agrees,
    the last increment tried is used). The cost of a step then grows with layers (and stages), not with
    accumulation. The spans are the m2 run's. The waits extrapolate the same way, unless the two runs'
    critical stages differ (a wait would come out negative): then the step's idle time splits as the m2
    run's waits do."""
    points = _extrapolation_points(training, micro_steps)
    if points is None:
        return simulate_step(model, training, v, compute, seq_len, micro_steps, params, nccl, stage_slowdown)
    first, period = points
    runs: dict[int, Timeline] = {}

    def run(m: int) -> Timeline:
        if m not in runs:
            runs[m] = simulate_step(model, training, v, compute, seq_len, m, params, nccl, stage_slowdown)
        return runs[m]

    def increment(m: int, q: int) -> float:
        return run(m + q).step_time_s - run(m).step_time_s

    def steady_from(start: int) -> tuple[int, int] | None:
        """(base, q) of the steady state searched from `start` micro-steps (base aligned so that whole
        q-steps lead to micro_steps); None when there is no room for its three runs."""
        found = None
        for periods in range(1, MAX_PERIODS + 1):
            q = periods * period
            m1 = start + (micro_steps - start) % q
            if m1 + 2 * q > micro_steps:
                return found
            found = (m1 + q, q)
            if abs(increment(m1 + q, q) - increment(m1, q)) <= REPEAT_TOLERANCE * run(m1 + 2 * q).step_time_s:
                break
        return found

    base, q = first, period  # the two runs extrapolated from: base and base + q micro-steps
    if training.parallel.pp > 1:
        steady = steady_from(first) if micro_steps > FULL_RUN_FIRSTS * first else None
        if steady is None:
            return run(micro_steps)
        base, q = steady
        far = base + q * math.ceil(FAR_FIRSTS * first / q)
        if far + q <= micro_steps and abs(increment(far, q) - increment(base, q)) > REPEAT_TOLERANCE * run(
                far + q).step_time_s:
            base, q = steady_from(far) or (far, q)
    one, two = run(base), run(base + q)
    extra = (micro_steps - base - q) // q
    waits = {label: two.compute_waits_s.get(label, 0.0)
             + extra * (two.compute_waits_s.get(label, 0.0) - one.compute_waits_s.get(label, 0.0))
             for label in sorted(set(one.compute_waits_s) | set(two.compute_waits_s))}
    if min(waits.values(), default=0.0) < 0.0:  # the two runs' critical stages differ: their waits do not subtract
        total, shown = sum(waits.values()), sum(two.compute_waits_s.values())  # the step's idle, and the m2 run's
        waits = {label: total * wait / shown if shown > 0 else 0.0 for label, wait in two.compute_waits_s.items()}
    repeated = RepeatedMicroSteps(base + q, q, extra, two.step_time_s - one.step_time_s)
    return replace(two, compute_waits_s=waits, step_time=two.step_time_s + repeated.total_s,
                   busy=two.compute_s + extra * (two.compute_s - one.compute_s), repeated=repeated)


def compute_scale_for(measured_tokens_per_s: float, topology: TopologySpec, training: TrainingSpec,
                      model_spec: ModelSpec, gemm_efficiency: float | None = None) -> float:
    """Scale on all compute so that one GPU running this job's micro-steps alone (no communication)
    reaches a measured single-GPU throughput (tokens/s)."""
    if not 0 < measured_tokens_per_s < math.inf:  # NaN too
        raise ConfigError(f"measured tokens/s per GPU must be a finite number > 0, got {measured_tokens_per_s}")
    model = transformer(model_spec, training.mtp_layers)
    seq_len = training.seq_len or model_spec.training_context
    gpu = build_representative(topology).gpu
    compute = ComputeModel.for_job(gpu, training, topology.gpu_power_limit_w, gemm_efficiency=gemm_efficiency,
                                   micro_steps=topology_micro_steps(training, topology))
    modelled = training.micro_batch * seq_len / compute.micro_step_s(
        model, training.micro_batch, seq_len, training.activation_checkpointing,
        runs_recomputing(model, training))
    return measured_tokens_per_s / modelled


def predict_step(topology: TopologySpec, training: TrainingSpec, model_spec: ModelSpec,
                 params: ModelParams | None = None, compute_scale: float = 1.0,
                 gemm_efficiency: float | None = None, calibration: str | None = None,
                 pace: Pace = NOMINAL, nccl: NcclSetup = DEFAULT_NCCL,
                 attention_scale: float = 1.0) -> StepPrediction:
    """Predict one optimizer step of `training` (model `model_spec`) on `topology`. `params` are
    calibrated collective parameters, `gemm_efficiency` a measured GEMM asymptote, `compute_scale`
    a measured-over-modelled compute rate, `attention_scale` a factor on the attention kernels'
    efficiency (simulator.validation.training_fit); `calibration` names where they came from. `nccl` is
    the job's NCCL: its environment, release and selection (simulator.collectives.nccl_setup).

    Slow GPUs (`pace`, simulator.training.pace) compute that much slower; every collective waits for
    the slowest, so the step runs at its pace: the representative GPU (of its stage, with pipeline
    parallelism) is the straggler, and the others wait what it computes beyond them, reported as
    `straggler_wait` in the idle breakdown; the job's idle time averages every GPU's. Faults in the
    topology slow the groups of the servers they touch: each group kind is priced on its slowest
    server class (simulator.collectives.comm.server_classes). A mixture of experts' unbalanced or
    capacity-bound routing (training.routing) makes the representative the busiest expert-parallel
    rank in the same way: the mean rank's wait on it is `routing_wait`."""
    # a job whose GPUs or batch do not divide is refused before the cluster's graph is built (seconds at 32k nodes)
    topology_micro_steps(training, topology)
    cluster = build_representative(topology)
    v = comm_view(cluster)
    model = transformer(model_spec, training.mtp_layers)
    seq_len = training.seq_len or model_spec.training_context
    layout = job_layout(training, model, v)
    micro_steps = micro_steps_of(training, layout.dp)
    least = min([pace.slowdown, *(factor for _, factor in pace.slow_ranks)])
    if least < 1.0:
        raise ConfigError(f"stragglers.slowdown must be >= 1, got {least:g}")
    slowest = pace.global_slowdown(layout.pp)
    stage_stride = layout.stride("pp")
    stages = pace.stage_slowdown(layout.pp, {rank: (rank // stage_stride) % layout.pp for rank, _ in pace.slow_ranks})
    compute = ComputeModel.for_job(cluster.gpu, training, topology.gpu_power_limit_w,
                                   compute_scale / slowest, gemm_efficiency, attention_scale, micro_steps)
    timeline = steady_state_step(model, training, v, compute, seq_len, micro_steps, params, nccl, stages)
    waits = dict(timeline.compute_waits_s)
    by_collective = {label: t for label, t in waits.items() if label in COMMUNICATION_LABELS}
    memory = memory_per_gpu(model, training, seq_len, layout.replicas, layout.shard_ranks(), micro_steps=micro_steps)
    tokens = training.micro_batch * seq_len * micro_steps * layout.dp
    critical_pace = slowest * stages.get(timeline.critical_stage, 1.0)
    nominal_compute_s = timeline.compute_s / critical_pace
    faulty = [(f"{_servers_text(c.servers)} ({_faults_text(c.faults)})", c.count * cluster.gpus_per_server)
              for c in server_classes(cluster) if not c.healthy]
    idle = {"exposed_comm": sum(by_collective.values()), "pipeline_bubble": waits.get("pipeline_bubble", 0.0),
            "optimizer_wait": waits.get("optimizer", 0.0),
            "straggler_wait": timeline.compute_s - nominal_compute_s,
            "routing_wait": routing_wait_s(model, training, compute, seq_len, micro_steps)}
    return StepPrediction(
        step_time_s=timeline.step_time_s,
        compute_s=timeline.compute_s,
        exposed_comm_s=sum(by_collective.values()),
        idle_breakdown_s=idle,
        tokens_per_step=tokens,
        n_gpus=v.n_ranks,
        model_flops_per_step=model.model_flops_per_token(seq_len, kept_share(training.routing),
                                                         training.packed_sample_len,
                                                         training.lora_rank is not None) * tokens,
        peak_tflops=compute.peak_flops / 1e12,
        memory=memory,
        memory_capacity_bytes=usable_bytes(cluster.gpu.memory_gib * 1024**3, training),
        comm_by_collective_s=by_collective,
        calibration=calibration,
        nccl_selection=nccl.selection or "model",
        spans=timeline.spans,
        gpu_tdp_w=topology.gpu_power_limit_w or cluster.gpu.tdp_w,
        idle_classes=pace_classes(pace, v.n_ranks, nominal_compute_s, faulty),
        repeated=timeline.repeated,
    )


def _servers_text(servers: tuple[int, ...]) -> str:
    """'s3', 's0, s5' or 's0, s1, s2 and 13 more'."""
    names = [f"s{s}" for s in servers[:3]]
    more = f" and {len(servers) - 3} more" if len(servers) > 3 else ""
    return ", ".join(names) + more


def _faults_text(faults: tuple[tuple[str, float], ...]) -> str:
    """'nic3 x0.1', 'nic3 failed'."""
    return ", ".join(f"{device} failed" if factor == 0 else f"{device} x{factor:g}" for device, factor in faults)
