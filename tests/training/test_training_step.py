"""The training-step simulation: volumes, memory by strategy, directional checks, bad input."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.collectives.comm import comm_view
from simulator.core.errors import ConfigError
from simulator.scenario import JitterSpec, ScenarioSpec, pace_of
from simulator.training.compute import ATTENTION_SHAPE, ATTENTION_SHAPE_ARCHS, ComputeModel, power_capped_clock
from simulator.training.memory import memory_per_gpu
from simulator.training.plan import plan_step
from simulator.training.predict import compute_scale_for, predict_step, simulate_step, steady_state_step
from simulator.training.prediction import StepPrediction
from topologies.build import build
from topologies.hardware import gpu_spec
from topologies.presets import load_preset
from workloads.model import transformer
from workloads.presets import load_model
from workloads.spec import ModelSpec, ParallelSpec, StrategySpec, TrainingSpec

SMALL = ModelSpec(name="tiny-vocab", layers=8, hidden=2048, heads=16, vocab=8, max_seq_len=1024)


def job(kind: str, **kw: object) -> TrainingSpec:
    return TrainingSpec(model=SMALL, seq_len=1024, micro_batch=1, strategy=StrategySpec(kind=kind), **kw)


def bytes_sent_per_rank(kind: str, n: int = 16) -> float:
    """Bytes one rank sends in one step: all_reduce 2(n-1)/n S, all_gather/reduce_scatter (n-1)/n S."""
    model = transformer(SMALL)
    compute = ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16")
    plan = plan_step(model, job(kind), compute, 1024, 1, n, model.total_params)
    factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n}
    return sum(t.collective.size_bytes * factor[t.collective.op] for t in plan.tasks if t.collective)


def test_zero3_moves_one_and_a_half_times_ddp():
    """ZeRO-3 (all-gather forward + backward, reduce-scatter) moves 1.5x DDP's all-reduce volume
    (Rajbhandari et al. 2020, section 7.2: 3 psi vs 2 psi)."""
    assert bytes_sent_per_rank("zero3") == pytest.approx(1.5 * bytes_sent_per_rank("ddp"), rel=0.01)


def test_zero2_moves_what_ddp_moves():
    """ZeRO-2: reduce-scatter of gradients + all-gather of parameters = DDP's 2 psi."""
    assert bytes_sent_per_rank("zero2") == pytest.approx(bytes_sent_per_rank("ddp"), rel=0.01)


@pytest.mark.parametrize(("kind", "per_param"), [("ddp", 16.0), ("zero1", 4.0 + 12.0 / 8), ("zero2", 2.0 + 14.0 / 8),
                                                 ("zero3", 16.0 / 8)])
def test_model_states_follow_the_zero_paper(kind, per_param):
    """Model-state bytes per parameter with mixed-precision Adam over 8 ranks: DDP 16, ZeRO-1
    4 + 12/N, ZeRO-2 2 + 14/N, ZeRO-3 16/N (Rajbhandari et al. 2020, Figure 1)."""
    model = transformer(SMALL)
    m = memory_per_gpu(model, job(kind), 1024, dp=8, shard_group=8, units_in_flight=0)
    states = m.parameters_bytes + m.gradients_bytes + m.optimizer_bytes
    assert states == pytest.approx(per_param * model.total_params, rel=1e-9)


@pytest.mark.parametrize("vocab", [8, 256_000])  # the recomputed block, then the logits, the larger
@pytest.mark.parametrize("flash", [True, False])
def test_full_recomputation_keeps_block_inputs_and_one_block_recomputed(flash: bool, vocab: int):
    """Full recomputation (Korthikanti et al. 2022): each block keeps its 2 s b h input, and during its backward
    the block being recomputed holds all its activations again (34 s b h, its input among them, plus the 5 a s^2 b
    scores without a fused attention kernel); one block at a time, so activations = L x 2 s b h + the
    embedding's + one block less its input + the logits under PyTorch's caching allocator, which keeps the freed
    logits' block; XLA's buffer assignment reuses it (the recompute starts after the output layer's backward
    freed the logits), so the larger of the two."""
    spec = SMALL.model_copy(update={"vocab": vocab})
    model = transformer(spec)
    s_, b, h, a = 1024, 1, SMALL.hidden, SMALL.heads
    training = job("ddp", activation_checkpointing="full", flash_attention=flash).model_copy(update={"model": spec})
    caching, xla = (memory_per_gpu(model, training.model_copy(update={"allocator": allocator}), s_, dp=8,
                                   shard_group=8, units_in_flight=0) for allocator in ("caching", "xla"))
    block = s_ * b * h * (34 - 2 + (0 if flash else 5 * a * s_ / h))
    logits = model.output_activation_bytes(b, s_)
    assert (block > logits) == (vocab == 8)  # both branches of the peak are taken
    kept = SMALL.layers * 2 * s_ * b * h + model.embedding_activation_bytes(b, s_)
    assert caching.activations_bytes == pytest.approx(kept + block + logits, rel=1e-9)
    assert xla.activations_bytes == pytest.approx(kept + max(block, logits), rel=1e-9)


def test_out_of_memory_is_a_result():
    """A job that cannot fit reports fits_in_memory False, it does not raise."""
    big = TrainingSpec(model="llama2-70b", seq_len=4096, micro_batch=8, strategy=StrategySpec(kind="ddp"))
    p = predict_step(load_preset("dgx-a100", nodes=1), big, load_model("llama2-70b"))
    assert not p.fits_in_memory and p.memory_per_gpu_bytes > p.memory_capacity_bytes


def test_global_batch_not_divisible_is_an_error():
    """A global batch that is not micro-batch x GPUs x k names the field."""
    training = TrainingSpec(model=SMALL, seq_len=1024, micro_batch=3, global_batch=100)
    with pytest.raises(ConfigError, match="global_batch"):
        predict_step(load_preset("dgx-h100", nodes=1), training, SMALL)


@settings(max_examples=12, deadline=None)
@given(kind=st.sampled_from(["ddp", "zero1", "zero2", "zero3", "fsdp", "hsdp"]), nodes=st.sampled_from([2, 4]),
       micro_batch=st.sampled_from([1, 4]))
def test_halving_network_bandwidth_never_speeds_a_step(kind, nodes, micro_batch):
    """With half the NIC bandwidth, no strategy's step gets faster."""
    base = load_preset("dgx-h100", nodes=nodes)
    assert base.inter_node is not None
    slow = base.model_copy(update={"inter_node": base.inter_node.model_copy(
        update={"nic_gbps": base.inter_node.nic_gbps / 2})})
    training = job(kind, global_batch=micro_batch * 8 * nodes).model_copy(update={"micro_batch": micro_batch})
    fast_t = predict_step(base, training, SMALL).step_time_s
    slow_t = predict_step(slow, training, SMALL).step_time_s
    assert slow_t >= fast_t * (1 - 1e-9)


@pytest.mark.parametrize("kind", ["ddp", "zero2", "fsdp", "hsdp"])
def test_more_nodes_never_raise_per_gpu_throughput(kind):
    """At a fixed per-GPU batch, per-GPU throughput on N nodes never exceeds one node's."""
    one = predict_step(load_preset("dgx-a100", nodes=1), job(kind), SMALL).tokens_per_s_per_gpu
    for nodes in (2, 8, 32):
        many = predict_step(load_preset("dgx-a100", nodes=nodes), job(kind), SMALL).tokens_per_s_per_gpu
        assert many <= one * (1 + 1e-9)


def test_idle_time_is_within_the_step_and_deterministic():
    """0 <= idle <= step time; exposed communication <= idle; the same input gives the same output."""
    training = TrainingSpec(model="llama2-7b", seq_len=4096, micro_batch=1, global_batch=64,
                            activation_checkpointing="full", strategy=StrategySpec(kind="fsdp"))
    a = predict_step(load_preset("dgx-h100", nodes=2), training, load_model("llama2-7b"))
    b = predict_step(load_preset("dgx-h100", nodes=2), training, load_model("llama2-7b"))
    assert a == b
    assert 0.0 <= a.gpu_idle_s <= a.step_time_s
    assert 0.0 <= a.exposed_comm_s <= a.gpu_idle_s + 1e-12
    assert 0.0 < a.mfu < 1.0


def test_measured_single_gpu_throughput_scales_compute():
    """Given a measured single-GPU tokens/s, one GPU's compute-only rate matches it exactly."""
    topology = load_preset("dgx-h100", nodes=1)
    training = job("fsdp")
    model = transformer(SMALL)
    scale = compute_scale_for(5000.0, topology, training, SMALL)
    compute = ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16", scale)
    rate = 1024 / compute.micro_step_s(model, 1, 1024, "none")
    assert rate == pytest.approx(5000.0, rel=1e-9)


def test_fp8_casts_are_kernels_of_their_own():
    """fp8 GEMMs read 1-byte operands, and every cast (bf16 read, fp8 written as is and transposed:
    4 B per element) runs in series: forward casts each GEMM's inputs (m k + k n), backward its output
    gradient (m n). With an unbounded tensor rate every GEMM is memory-bound, so by hand:
    forward(fp8) - forward(bf16) = [(1 - 2) + 4] sum(m k + k n) / HBM and
    backward(fp8) - backward(bf16) = 2 (1 - 2) sum(m k + k n) / HBM + 4 sum(m n) / HBM."""
    # an idealised part: no measured matmul rate ties its GEMMs to the real H100's (compute.gemm_rate_factor)
    gpu = dataclasses.replace(gpu_spec("H100-SXM5-80GB"), bf16_tflops=1e9, fp16_tflops=1e9, fp8_tflops=1e9,
                              mamf_bf16_tflops=None)
    model = transformer(SMALL)
    gemms = model.layer_gemms(2 * 1024)  # tp 1: the layer's own shapes
    inputs = sum(m * k + k * n for _, m, n, k in gemms)
    outputs = sum(m * n for _, m, n, k in gemms)
    hbm = gpu.hbm_GBps * 1e9 * 0.85
    fp8 = ComputeModel(gpu, "fp8").layer(model, 2, 1024, "none")
    bf16 = ComputeModel(gpu, "bf16").layer(model, 2, 1024, "none")
    assert fp8.forward_s - bf16.forward_s == pytest.approx(3.0 * inputs / hbm, rel=1e-9)
    assert fp8.backward_s - bf16.backward_s == pytest.approx((-2.0 * inputs + 4.0 * outputs) / hbm, rel=1e-9)


@pytest.mark.parametrize(("gpu", "ratio"), [("H100-SXM5-80GB", 0.35 / 0.50), ("B200-180GB", 0.35 / 0.52),
                                            ("A100-SXM4-80GB", 1.0)])
def test_cudnn_attention_is_faster_on_hopper_and_blackwell_only(gpu: str, ratio: float) -> None:
    """cuDNN's fused attention at 50% of H100's peak against FlashAttention-2's 35% (Shah et al. 2024), and at
    52% of B200's (at least 1,613 / 1.3 TFLOP/s of 2,250 by FlashAttention-4's comparison, scaled as Hopper's
    entry is); the same kernel class elsewhere. With no element-wise work left to compare, the layers differ by
    attention alone: t(cudnn) / t(flash2) = 0.35 / e(cudnn) on attention, each kernel on Hopper at its
    measured rate for 4,096 keys and head dim 128 (ATTENTION_SHAPE; 1 elsewhere)."""
    spec = dataclasses.replace(gpu_spec(gpu), bf16_tflops=gpu_spec(gpu).bf16_tflops)
    model = transformer(SMALL)
    flash2 = ComputeModel(spec, "bf16").layer(model, 1, 4096, "none")
    cudnn = ComputeModel(spec, "bf16", attention_kernel="cudnn").layer(model, 1, 4096, "none")
    attention_s = model.attention_forward_flops(4096, 4096) / (spec.bf16_tflops * 1e12 * 0.35)

    def shape(kernel: str) -> float:
        return ATTENTION_SHAPE[kernel].factor(4096, 128) if spec.arch in ATTENTION_SHAPE_ARCHS else 1.0

    saved = flash2.forward_s - cudnn.forward_s
    assert saved == pytest.approx(attention_s * (1.0 / shape("flash2") - ratio / shape("cudnn")), rel=1e-9, abs=1e-12)
    assert flash2.backward_s - cudnn.backward_s == pytest.approx(2.0 * saved, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(("tp", "sp"), [(1, False), (8, False), (8, True)])
def test_eager_elementwise_moves_its_own_bytes(tp: int, sp: bool) -> None:
    """PyTorch eager element-wise ops (torchtitan without compile) move 145 B per token per hidden unit
    a layer forward against 40 fused; without sequence parallelism the norms and residual adds (84 of
    them eager, 20 fused) are replicated on every TP rank. Backward moves twice the forward's."""
    # GEMMs and attention ~free (no measured matmul rate: compute.gemm_rate_factor)
    gpu = dataclasses.replace(gpu_spec("H100-SXM5-80GB"), bf16_tflops=1e9, mamf_bf16_tflops=None)
    model = transformer(SMALL)
    fused = ComputeModel(gpu, "bf16").layer(model, 2, 1024, "none", tp, sp)
    eager = ComputeModel(gpu, "bf16", fused_elementwise=False).layer(model, 2, 1024, "none", tp, sp)
    replicated = {True: 0.0, False: 84.0 - 20.0}[sp]
    extra = 2 * 1024 * SMALL.hidden * (replicated + (145.0 - 40.0 - replicated) / tp) / (gpu.hbm_GBps * 1e9 * 0.85)
    assert eager.forward_s - fused.forward_s == pytest.approx(extra, rel=1e-9)
    assert eager.backward_s - fused.backward_s == pytest.approx(2.0 * extra, rel=1e-9)


@pytest.mark.parametrize("checkpointing", ["none", "selective", "full"])
def test_blocking_launches_leave_a_gap_after_every_kernel(checkpointing: str) -> None:
    """CUDA_LAUNCH_BLOCKING=1: 43 us of idle GPU after each of a Megatron layer's 20 forward and 45
    backward launches; recomputation re-runs the forward's 20 (full) or the attention core's 4 (selective)."""
    gpu = gpu_spec("A100-SXM4-80GB")
    model = transformer(SMALL)
    job = TrainingSpec(model=SMALL, launch_blocking=True)
    async_ = ComputeModel(gpu, "bf16").layer(model, 2, 1024, checkpointing)
    blocking = ComputeModel.for_job(gpu, job).layer(model, 2, 1024, checkpointing)
    assert blocking.forward_s - async_.forward_s == pytest.approx(20 * 43e-6, rel=1e-9)
    assert blocking.backward_s - async_.backward_s == pytest.approx(45 * 43e-6, rel=1e-9)
    recomputed = {"none": 0, "selective": 4, "full": 20}[checkpointing]
    assert blocking.recompute_s - async_.recompute_s == pytest.approx(recomputed * 43e-6, rel=1e-9, abs=1e-15)


def test_fp8_output_layer_runs_in_bf16():
    """TE setups and torchtitan's float8 filter keep the output layer in bf16: same time either way."""
    model, gpu = transformer(SMALL), gpu_spec("H100-SXM5-80GB")
    assert ComputeModel(gpu, "fp8").head(model, 2, 1024) == ComputeModel(gpu, "bf16").head(model, 2, 1024)


def _gathers(training: TrainingSpec) -> int:
    model = transformer(SMALL)
    compute = ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16")
    plan = plan_step(model, training, compute, 1024, 1, 16, model.total_params)
    return sum(1 for t in plan.tasks if t.collective and t.collective.op == "all_gather")


def test_shard_grad_op_gathers_once_per_block():
    """SHARD_GRAD_OP keeps parameters from forward to backward: one all-gather per block (+ root),
    FULL_SHARD two; reshard_after_forward False does the same for FULL_SHARD."""
    full = _gathers(job("fsdp"))
    grad_op = _gathers(job("fsdp").model_copy(update={"strategy": StrategySpec(fsdp_sharding="SHARD_GRAD_OP")}))
    kept = _gathers(job("fsdp").model_copy(update={"strategy": StrategySpec(reshard_after_forward=False)}))
    assert full == 2 * SMALL.layers + 1 and grad_op == kept == SMALL.layers + 1


def test_backward_prefetch_never_slows_a_step():
    """Gathering the next block during backward (BACKWARD_PRE) is never slower than waiting."""
    topology = load_preset("dgx-h100", nodes=4)
    with_prefetch = predict_step(topology, job("fsdp"), SMALL).step_time_s
    without = predict_step(topology, job("fsdp").model_copy(
        update={"strategy": StrategySpec(backward_prefetch=False)}), SMALL).step_time_s
    assert with_prefetch <= without


def hsdp(shard: int | None, nodes: int = 4, tp: int = 1, cp: int = 1, kind: str = "hsdp",
         pp: int = 1) -> StepPrediction:
    training = TrainingSpec(model=SMALL, seq_len=1024, micro_batch=1, global_batch=16 * nodes,
                            strategy=StrategySpec(kind=kind, shard_group_gpus=shard),
                            parallel=ParallelSpec(tp=tp, cp=cp, pp=pp, sequence_parallel=tp > 1))
    return predict_step(load_preset("dgx-h100", nodes=nodes), training, SMALL)


@pytest.mark.parametrize(("tp", "cp"), [(1, 1), (2, 1), (8, 1), (2, 2)])
def test_hsdp_over_every_data_parallel_rank_is_fsdp(tp: int, cp: int):
    """A shard group of the whole data- x context-parallel group leaves one replica: the step and memory of FSDP
    FULL_SHARD, with tensor and context parallelism too (4 DGX H100: 32 / tp data- x context-parallel ranks)."""
    ranks = 32 // tp
    shared, full = hsdp(ranks, tp=tp, cp=cp), hsdp(None, tp=tp, cp=cp, kind="fsdp")
    assert shared.step_time_s == pytest.approx(full.step_time_s, rel=1e-12)
    assert shared.memory_per_gpu_bytes == pytest.approx(full.memory_per_gpu_bytes, rel=1e-12)


@given(nodes=st.sampled_from([2, 4, 8]), tp=st.sampled_from([1, 2, 4]), cp=st.sampled_from([1, 2]),
       data=st.data())
@settings(max_examples=12, deadline=None)
def test_hsdp_shard_group_properties(nodes: int, tp: int, cp: int, data: st.DataObject):
    """Any shard group that can be laid out (a divisor of a node's data-parallel ranks, or whole nodes of them):
    idle time within [0, step time], and model states no larger than a smaller group's."""
    per_node, ranks = 8 // tp, nodes * 8 // tp
    shards = [s for s in range(1, ranks + 1) if ranks % s == 0 and (s <= per_node and per_node % s == 0
                                                                    or s > per_node and s % per_node == 0)]
    small, large = sorted(data.draw(st.lists(st.sampled_from(shards), min_size=2, max_size=2)))
    predictions = [hsdp(shard, nodes=nodes, tp=tp, cp=cp) for shard in (small, large)]
    for p in predictions:
        assert 0.0 <= p.gpu_idle_s <= p.step_time_s
    states = [p.memory.parameters_bytes + p.memory.gradients_bytes + p.memory.optimizer_bytes
              for p in predictions]
    assert states[1] <= states[0] * (1 + 1e-12)


def test_hsdp_shard_groups_of_part_of_a_node_or_several_nodes():
    """Shard groups of 4, 8 (one node, the default), 16 and 32 ranks: the model states shrink as the group grows
    (parameters, gradients and optimizer states over the group) and 8 is what no statement gives."""
    memory = {shard: hsdp(shard).memory for shard in (4, 8, 16, 32)}
    states = {shard: m.parameters_bytes + m.gradients_bytes + m.optimizer_bytes for shard, m in memory.items()}
    assert states[4] > states[8] > states[16] > states[32]
    assert hsdp(None).step_time_s == hsdp(8).step_time_s


def test_hsdp_with_tensor_parallelism_shards_over_the_stated_ranks():
    """TP 2 on 8-GPU nodes leaves 4 data-parallel ranks a node: a shard group of 8 spans two nodes, and shards
    the model states 8 ways (half of what 4, one node's, leaves)."""
    by_node, two_nodes = hsdp(4, tp=2).memory, hsdp(8, tp=2).memory
    assert two_nodes.optimizer_bytes == pytest.approx(by_node.optimizer_bytes / 2, rel=1e-9)


@pytest.mark.parametrize(("shard", "tp", "nodes", "message"), [
    (3, 1, 4, "shard_group_gpus 3 must divide the 32"),
    (12, 1, 6, "shard_group_gpus 12: a shard group takes whole nodes' 8 data-parallel ranks, or a divisor"),
    (None, 8, 4, "a node holds one rank of the data-parallel group"),
])
def test_hsdp_shard_groups_that_cannot_be_laid_out_name_the_field(shard, tp, nodes, message):
    with pytest.raises(ConfigError, match=message):
        hsdp(shard, nodes=nodes, tp=tp)


@pytest.mark.parametrize(("tp", "pp"), [(1, 2), (2, 2), (2, 4)])
def test_hsdp_with_pipelining_over_every_data_parallel_rank_is_fsdp(tp: int, pp: int):
    """With pipeline parallelism too, a shard group of the whole data-parallel group leaves one replica: the step
    and memory of FSDP FULL_SHARD (4 DGX H100: 32 / (tp pp) data-parallel ranks a stage)."""
    ranks = 32 // (tp * pp)
    shared, full = hsdp(ranks, tp=tp, pp=pp), hsdp(None, tp=tp, pp=pp, kind="fsdp")
    assert shared.step_time_s == pytest.approx(full.step_time_s, rel=1e-12)
    assert shared.memory_per_gpu_bytes == pytest.approx(full.memory_per_gpu_bytes, rel=1e-12)


def test_hsdp_with_pipelining_shards_over_its_group_and_reduces_across():
    """PP 2 on 4 DGX H100 leaves 16 data-parallel ranks a stage: shard groups of 4 (half a node's), 8 and 16 hold
    model states in that order, each halving what the one before holds of the optimizer's."""
    memory = {shard: hsdp(shard, pp=2).memory for shard in (4, 8, 16)}
    states = {shard: m.parameters_bytes + m.gradients_bytes + m.optimizer_bytes for shard, m in memory.items()}
    assert states[4] > states[8] > states[16]
    assert memory[4].optimizer_bytes == pytest.approx(memory[8].optimizer_bytes * 2, rel=1e-9)


def test_planning_figures_by_hand():
    """Time, GPU-hours and energy to train N tokens follow from throughput and power by hand."""
    p = predict_step(load_preset("dgx-h100", nodes=1), job("fsdp"), SMALL)
    tokens = 1e9
    assert p.time_to_train_s(tokens) == pytest.approx(tokens / p.tokens_per_s)
    assert p.gpu_hours(tokens) == pytest.approx(p.time_to_train_s(tokens) * 8 / 3600)
    busy = 1 - p.gpu_idle_fraction
    assert p.average_power_w == pytest.approx(700.0 * (busy + 0.3 * (1 - busy)))
    assert p.energy_kwh(tokens) == pytest.approx(p.average_power_w * 8 * p.time_to_train_s(tokens) / 3.6e6)


def test_hsdp_all_reduces_only_the_shard_across_nodes():
    """HSDP reduce-scatters a block's gradients in the node, then all-reduces the 1/G shard across
    nodes (PyTorch HYBRID_SHARD)."""
    model = transformer(SMALL)
    compute = ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16")
    plan = plan_step(model, job("hsdp"), compute, 1024, 1, 32, model.total_params, shard_group=8)
    scatter = [t.collective.size_bytes for t in plan.tasks if t.collective and t.collective.op == "reduce_scatter"]
    across = [t.collective.size_bytes for t in plan.tasks if t.collective and t.collective.op == "all_reduce"]
    assert across == [size // 8 for size in scatter]


def test_hsdp_cross_node_all_reduces_have_a_stream_of_their_own():
    """FSDP's HYBRID_SHARD all-reduces each shard across nodes on its own stream (_all_reduce_stream), so a slow
    network does not hold back the next unit's reduce-scatter. On one stream with them, halving the NICs would
    make this step 4.5% faster (MPT-7B, 2 ABCI-A nodes, no backward prefetch, 16 micro-batches)."""
    plan = plan_step(transformer(SMALL), job("hsdp"), ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16"), 1024, 1, 32,
                     transformer(SMALL).total_params, shard_group=8)
    assert {t.stream for t in plan.tasks if t.collective and t.collective.op == "all_reduce"} == {"ar"}
    training = TrainingSpec(model="mpt-7b", seq_len=1024, micro_batch=1, global_batch=256,
                            strategy=StrategySpec(kind="hsdp", backward_prefetch=False))
    model = load_model("mpt-7b")

    def step_s(nic_gbps: float) -> float:
        topology = load_preset("abci-a", nodes=2)
        inter = topology.inter_node.model_copy(update={"nic_gbps": nic_gbps})
        return predict_step(topology.model_copy(update={"inter_node": inter}), training, model).step_time_s

    assert step_s(100) >= step_s(200)


def test_fsdp_gathers_wait_for_the_tp_collectives_of_the_pass_they_follow():
    """FSDP's rate limiter lets a block's gather start once an earlier block is resharded, after its pass and the
    TP collectives that pass issued on the compute stream; with the pass's compute alone as the gate, plain
    TP would look 9% faster than overlapped TP (Llama-2-7B, TP 8 x FSDP over 2 DGX B200, no backward prefetch, one
    gather in flight)."""
    model = transformer(SMALL)
    training = TrainingSpec(model=SMALL, seq_len=1024, micro_batch=1, global_batch=2,
                            strategy=StrategySpec(kind="fsdp", backward_prefetch=False, limit_all_gathers=1),
                            parallel=ParallelSpec(tp=8))
    plan = plan_step(model, training, ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16"), 1024, 1, 2,
                     model.total_params)
    deps = {t.name: t.deps for t in plan.tasks}
    assert deps["m0.ag_fwd1"] == ("m0.fwd0", "m0.fwd0.tp0") and deps["m0.ag_bwd2"] == ("m0.bwd3", "m0.bwd3.tp0")


def test_ddp_buckets_take_whole_tensors():
    """DDP buckets close at the 25 MiB cap on tensor boundaries: smaller caps give more all-reduces."""
    model = transformer(SMALL)
    compute = ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16")

    def all_reduces(bucket_bytes: int) -> int:
        training = job("ddp").model_copy(update={"strategy": StrategySpec(kind="ddp", bucket_bytes=bucket_bytes)})
        plan = plan_step(model, training, compute, 1024, 1, 16, model.total_params)
        return sum(1 for t in plan.tasks if t.collective and t.collective.op == "all_reduce")

    assert all_reduces(1 << 20) > all_reduces(25 << 20) > all_reduces(1 << 30) == 2  # 1 MiB first bucket + rest


def test_jitter_is_seeded_and_bites_harder_at_scale():
    """Jitter: the same seed gives the same pace; the slowest of 4,096 GPUs is slower than of 8."""
    scenario = ScenarioSpec(topology="dgx-h100", training=job("fsdp"), jitter=JitterSpec(cv=0.03, seed=3))
    assert pace_of(scenario, 8, 8) == pace_of(scenario, 8, 8)
    assert pace_of(scenario, 512, 8).slowdown > pace_of(scenario, 1, 8).slowdown >= 1.0
    assert pace_of(scenario.model_copy(update={"jitter": None}), 512, 8).slowdown == 1.0


@pytest.mark.parametrize("kind", ["ddp", "zero2", "fsdp", "hsdp"])
def test_steady_state_extrapolation_matches_full_simulation(kind):
    """With 8 micro-steps, simulating 2 and 3 and adding periods gives the full simulation's step
    time, compute time and waits (middle micro-steps repeat exactly)."""
    v = comm_view(build(load_preset("dgx-h100", nodes=2)))
    model = transformer(SMALL)
    compute = ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16")
    full = simulate_step(model, job(kind), v, compute, 1024, 8)
    fast = steady_state_step(model, job(kind), v, compute, 1024, 8)
    assert fast.step_time_s == pytest.approx(full.step_time_s, rel=1e-9)
    assert fast.compute_s == pytest.approx(full.compute_s, rel=1e-9)
    for label, wait in full.compute_waits_s.items():
        assert fast.compute_waits_s[label] == pytest.approx(wait, rel=1e-6, abs=1e-12)


def test_power_cap_slows_compute_by_the_cube_root():
    """A GPU capped at 500 W of its 700 W TDP sustains (500/700)^(1/3) = 0.894 of its clock: a
    compute-bound layer takes 1/0.894 longer; no cap (or a cap at the TDP) changes nothing."""
    gpu = gpu_spec("H100-SXM5-80GB")
    assert power_capped_clock(gpu, 500.0) == pytest.approx((500.0 / 700.0) ** (1 / 3))
    assert power_capped_clock(gpu, None) == power_capped_clock(gpu, 700.0) == 1.0
    model = transformer(load_model("llama3-70b"))
    full = ComputeModel(gpu, "bf16").layer(model, 1, 8192, "none")
    capped = ComputeModel(gpu, "bf16", clock_factor=power_capped_clock(gpu, 500.0)).layer(model, 1, 8192, "none")
    assert capped.forward_s / full.forward_s == pytest.approx(1 / power_capped_clock(gpu, 500.0), rel=0.02)


def test_power_cap_above_tdp_is_refused():
    """gpu_power_limit_w above the GPU's TDP is a configuration error naming the field."""
    with pytest.raises(ConfigError, match="gpu_power_limit_w: 800 W is above"):
        load_preset("dgx-h100", gpu_power_limit_w=800.0)
