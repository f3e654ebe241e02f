"""Predict one training step: specs -> topology + plan -> SimPy timeline -> metrics.

The data-parallel group spans every GPU (tensor and pipeline parallelism come later); HSDP adds a
shard group (one node) and a replica group (the same GPU of every node). Collectives are priced
by the collective model on their group's communicator and run as flows on two shared resources,
a GPU's intra-node links and its node's NICs, so concurrent collectives contend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from simulator.collectives.comm import CommView, comm_view
from simulator.collectives.cost import CollectiveEstimate
from simulator.collectives.flows import collective_flow, collective_resources, resource_capacities
from simulator.collectives.params import ModelParams
from simulator.collectives.predict import predict_collective
from simulator.core.errors import ConfigError
from simulator.network.flows import FlowClass
from simulator.training.compute import ComputeModel
from simulator.training.memory import memory_per_gpu, shard_degrees
from simulator.training.plan import CollectiveCall, plan_step
from simulator.training.prediction import StepPrediction
from simulator.training.timeline import Timeline, simulate_plan
from topologies.build import build
from topologies.spec import TopologySpec
from workloads.model import TransformerModel, transformer
from workloads.spec import ModelSpec, TrainingSpec


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
        )
    return training.global_batch // per_step


def communicators(v: CommView) -> dict[str, CommView]:
    """The groups a data-parallel step communicates in (see module docstring)."""
    g = v.ranks_per_node
    shard = replace(v, n_ranks=g, n_nodes=1, net_Bps=0.0, transport=None)
    replica = replace(v, n_ranks=v.n_nodes, ranks_per_node=1, net_Bps=v.net_Bps / g, spine_Bps=v.spine_Bps / g,
                      nics_per_node=max(1, v.nics_per_node // g))
    return {"dp": v, "shard": shard, "replica": replica}


def simulate_step(model: TransformerModel, training: TrainingSpec, v: CommView, compute: ComputeModel,
                  seq_len: int, micro_steps: int, params: ModelParams | None = None,
                  env: Mapping[str, str] | None = None) -> Timeline:
    """The SimPy timeline of one optimizer step on a representative GPU."""
    dp = v.n_ranks
    shard_group = v.ranks_per_node
    _, _, optimizer_shard = shard_degrees(training, dp, shard_group)
    plan = plan_step(model, training, compute, seq_len, micro_steps, dp, model.total_params / optimizer_shard,
                     shard_group)
    groups = communicators(v)
    capacity = resource_capacities(v)
    cache: dict[CollectiveCall, CollectiveEstimate] = {}

    call_of = {task.name: task.collective for task in plan.tasks if task.collective is not None}

    def flow_of(call: CollectiveCall, name: str) -> FlowClass:
        if call not in cache:
            cache[call] = predict_collective(groups[call.group], call.op, call.size_bytes, env=env, params=params)
        return collective_flow(cache[call], capacity, name)

    timeline = simulate_plan(plan, collective_resources(capacity), flow_of)
    spans = []
    for span in timeline.spans:
        call = call_of.get(span.name)
        if call is not None and span.end_s > span.start_s:
            rate = call.size_bytes / (span.end_s - span.start_s)
            load = tuple((resource, rate * spb) for resource, spb in cache[call].demand_s_per_byte)
            span = replace(span, resource_load=load)
        spans.append(span)
    return Timeline(tuple(spans), timeline.compute_waits_s)


def steady_state_step(model: TransformerModel, training: TrainingSpec, v: CommView, compute: ComputeModel,
                      seq_len: int, micro_steps: int, params: ModelParams | None = None,
                      env: Mapping[str, str] | None = None) -> Timeline:
    """The step's timeline, simulating at most three micro-steps. Micro-steps between the first and
    the last repeat exactly (same tasks, same waits), so with M > 3 the step is the 3-micro-step
    step plus (M - 3) periods, the period being what one more middle micro-step adds (the 3-step
    run minus the 2-step run). The cost of a step then grows with layers, not with accumulation.
    The spans are the 3-micro-step run's (the first two and the last micro-step)."""
    if micro_steps <= 3:
        return simulate_step(model, training, v, compute, seq_len, micro_steps, params, env)
    two = simulate_step(model, training, v, compute, seq_len, 2, params, env)
    three = simulate_step(model, training, v, compute, seq_len, 3, params, env)
    extra = micro_steps - 3
    waits = {label: three.compute_waits_s.get(label, 0.0)
             + extra * (three.compute_waits_s.get(label, 0.0) - two.compute_waits_s.get(label, 0.0))
             for label in set(two.compute_waits_s) | set(three.compute_waits_s)}
    return Timeline(three.spans, waits,
                    step_time=three.step_time_s + extra * (three.step_time_s - two.step_time_s),
                    busy=three.compute_s + extra * (three.compute_s - two.compute_s))


def compute_scale_for(measured_tokens_per_s: float, topology: TopologySpec, training: TrainingSpec,
                      model_spec: ModelSpec, gemm_efficiency: float | None = None) -> float:
    """Scale on all compute so that one GPU running this job's micro-steps alone (no communication)
    reaches a measured single-GPU throughput (tokens/s)."""
    if measured_tokens_per_s <= 0:
        raise ConfigError(f"measured tokens/s per GPU must be > 0, got {measured_tokens_per_s}")
    model = transformer(model_spec)
    seq_len = training.seq_len or model_spec.max_seq_len
    compute = ComputeModel(build(topology).gpu, training.precision, 1.0, gemm_efficiency)
    modelled = training.micro_batch * seq_len / compute.micro_step_s(
        model, training.micro_batch, seq_len, training.activation_checkpointing)
    return measured_tokens_per_s / modelled


def predict_step(topology: TopologySpec, training: TrainingSpec, model_spec: ModelSpec,
                 params: ModelParams | None = None, compute_scale: float = 1.0,
                 gemm_efficiency: float | None = None, calibration: str | None = None,
                 straggler_slowdown: float = 1.0, env: Mapping[str, str] | None = None) -> StepPrediction:
    """Predict one optimizer step of `training` (model `model_spec`) on `topology`. `params` are
    calibrated collective parameters, `gemm_efficiency` a measured GEMM asymptote, `compute_scale`
    a measured-over-modelled compute rate; `calibration` names where they came from.

    A straggler (`straggler_slowdown` > 1) computes that much slower; every collective waits for
    it, so the step runs at its pace: the representative GPU is the straggler, and the others wait
    (1 - 1/slowdown) of its compute time, reported as `straggler_wait` in the idle breakdown."""
    cluster = build(topology)
    v = comm_view(cluster)
    model = transformer(model_spec)
    seq_len = training.seq_len or model_spec.max_seq_len
    micro_steps = micro_steps_of(training, v.n_ranks)
    group = training.strategy.shard_group_gpus
    if group is not None and group != v.ranks_per_node:
        raise ConfigError(f"training.strategy.shard_group_gpus {group}: only one node ({v.ranks_per_node} GPUs) "
                          "per HSDP shard group is modelled so far")
    if straggler_slowdown < 1.0:
        raise ConfigError(f"stragglers.slowdown must be >= 1, got {straggler_slowdown}")
    compute = ComputeModel(cluster.gpu, training.precision, compute_scale / straggler_slowdown, gemm_efficiency)
    timeline = steady_state_step(model, training, v, compute, seq_len, micro_steps, params, env)
    waits = dict(timeline.compute_waits_s)
    exposed = sum(waits.values())
    by_collective = {label: t for label, t in waits.items() if label in ("all_gather", "reduce_scatter", "all_reduce")}
    memory = memory_per_gpu(model, training, seq_len, v.n_ranks, v.ranks_per_node,
                            units_in_flight=training.strategy.limit_all_gathers + 1)
    tokens = training.micro_batch * seq_len * micro_steps * v.n_ranks
    idle = {"exposed_comm": exposed, "optimizer_wait": waits.get("optimizer", 0.0),
            "straggler_wait": timeline.compute_s * (1.0 - 1.0 / straggler_slowdown)}
    return StepPrediction(
        step_time_s=timeline.step_time_s,
        compute_s=timeline.compute_s,
        exposed_comm_s=sum(by_collective.values()),
        idle_breakdown_s=idle,
        tokens_per_step=tokens,
        n_gpus=v.n_ranks,
        model_flops_per_step=model.model_flops_per_token(seq_len) * tokens,
        peak_tflops=compute.peak_flops / 1e12,
        memory=memory,
        memory_capacity_bytes=cluster.gpu.memory_gib * 1024**3,
        comm_by_collective_s=by_collective,
        calibration=calibration,
        spans=timeline.spans,
        gpu_tdp_w=cluster.gpu.tdp_w,
    )
