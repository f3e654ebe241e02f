"""Framework conventions (workloads.frameworks) and the step behaviour they select, each against what the
framework's source does: DeepSpeed's blocking per-rank reduces, Megatron's fp32 gradient reduction and
sequence-parallel re-gather, PyTorch DDP's AMP memory, buckets in the order they fill."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simulator.cli.app import app
from simulator.scenario import with_framework
from simulator.training.compute import ComputeModel
from simulator.training.memory import memory_per_gpu
from simulator.training.pipeline import plan_pipeline
from simulator.training.plan import plan_step
from simulator.training.predict import predict_step
from simulator.training.shards import gathers_ahead
from simulator.training.tasks import pass_collectives
from topologies.hardware import gpu_spec
from topologies.presets import load_preset
from workloads.frameworks import FRAMEWORKS, Job, framework_defaults
from workloads.model import transformer
from workloads.spec import ModelSpec, ParallelSpec, StrategySpec, TrainingSpec

H100 = ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16")
SMALL = ModelSpec(name="small", layers=8, hidden=2048, heads=16, vocab=32000, max_seq_len=1024)
TIED = SMALL.model_copy(update={"tied_embeddings": True})
SECTIONS = {"": TrainingSpec, "strategy": StrategySpec, "parallel": ParallelSpec}


def resolved(framework: str, **fields: object) -> TrainingSpec:
    return with_framework(TrainingSpec(model=SMALL, seq_len=1024, framework=framework, **fields))


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_every_default_names_a_field_and_cites_a_source(framework):
    conventions = FRAMEWORKS[framework]
    paths = [default.path for default in conventions.defaults]
    assert len(paths) == len(set(paths)), "one default a field"
    for default in conventions.defaults:
        section, _, name = default.path.rpartition(".")
        assert name in SECTIONS[section].model_fields, default.path
        assert len(default.source) > 20, default.path
    for kind in conventions.kinds:  # every default applies to some job the framework runs, and validates
        spec = resolved(framework, strategy=StrategySpec(kind=kind))
        assert spec.strategy.kind == kind


@settings(max_examples=40, deadline=None)
@given(framework=st.sampled_from(sorted(FRAMEWORKS)), reduce_bytes=st.sampled_from([1, 2, 4]),
       overlap=st.booleans())
def test_stated_fields_win_over_the_framework(framework, reduce_bytes, overlap):
    kind = FRAMEWORKS[framework].kinds[0]
    spec = resolved(framework, strategy=StrategySpec(kind=kind, grad_reduce_bytes=reduce_bytes,
                                                     overlap_grad_reduce=overlap))
    assert (spec.strategy.grad_reduce_bytes, spec.strategy.overlap_grad_reduce) == (reduce_bytes, overlap)


def test_no_framework_keeps_the_generic_defaults():
    spec = TrainingSpec(model=SMALL, seq_len=1024)
    assert with_framework(spec) is spec


@pytest.mark.parametrize(("kind", "overlap", "all_reduce"), [("zero1", False, True), ("zero2", False, True),
                                                             ("zero3", True, False)])
def test_deepspeed_overlaps_only_stage_3(kind, overlap, all_reduce):
    """deepspeed/runtime/zero/config.py: overlap_comm defaults to stage == 3, use_multi_rank_bucket_allreduce to
    True (0.12.4 on): stage_1_and_2.py average_tensor all-reduces each bucket instead of one reduce per rank."""
    spec = resolved("deepspeed", strategy=StrategySpec(kind=kind))
    assert (spec.strategy.overlap_grad_reduce, spec.strategy.bucket_all_reduce) == (overlap, all_reduce)
    assert spec.strategy.reduce_per_rank is False
    if kind != "zero3":
        assert {t.collective.op for t in plan_of(spec).tasks if t.stream == "rs"} == {"all_reduce"}


@pytest.mark.parametrize(("precision", "reduce_bytes"), [("bf16", 4), ("fp16", 2)])
def test_megatron_reduces_bf16_gradients_in_fp32(precision, reduce_bytes):
    """megatron/training/arguments.py: --bf16 sets accumulate_allreduce_grads_in_fp32."""
    assert resolved("megatron-core", precision=precision).strategy.grad_reduce_bytes == reduce_bytes


@pytest.mark.parametrize(("pp", "virtual_stages", "overlap"), [(1, 1, False), (4, 1, False), (4, 2, True)])
def test_megatron_and_nemo_overlap_pipeline_sends_only_with_virtual_stages(pp, virtual_stages, overlap):
    """nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py: overlap_p2p_comm with pp > 1 and a virtual
    pipeline size > 1, batched blocking sends otherwise; Megatron-LM's arguments.py likewise (on unless
    --no-overlap-p2p-communication, turned off without virtual stages); a stated value wins."""
    schedule = "interleaved" if virtual_stages > 1 else "1f1b"
    parallel = ParallelSpec(pp=pp, virtual_stages=virtual_stages, pipeline_schedule=schedule)
    assert resolved("nemo", parallel=parallel).parallel.overlap_p2p == overlap
    assert resolved("megatron-core", parallel=parallel).parallel.overlap_p2p == overlap
    stated = ParallelSpec(pp=pp, virtual_stages=virtual_stages, pipeline_schedule=schedule, overlap_p2p=False)
    assert resolved("nemo", parallel=stated).parallel.overlap_p2p is False
    assert resolved("megatron-core", parallel=stated).parallel.overlap_p2p is False


@pytest.mark.parametrize(("compiled", "loss"), [(None, "eager"), (False, "eager"), (True, "fused")])
def test_torchtitan_compiles_its_loss_with_the_model(compiled, loss):
    """torchtitan/components/loss.py: the fp32 cross entropy is compiled with the model under compile (the
    fused loss's memory), eager otherwise; a stated loss wins."""
    stated = {} if compiled is None else {"fused_elementwise": compiled}
    assert resolved("fsdp2", **stated).cross_entropy == loss
    assert resolved("fsdp2", **stated, cross_entropy="eager").cross_entropy == "eager"


@pytest.mark.parametrize(("stated", "expected"), [({}, 71.0), ({"fused_elementwise": True}, None),
                                                 ({"fused_elementwise": False}, None),
                                                 ({"elementwise_bytes": 50.0}, 50.0)])
def test_internevo_counts_its_own_element_wise_bytes(stated, expected):
    """InternEvo's block (modeling_internlm.py): fp32 casts before apex's fused RMSNorm, flash_attn's rotary in
    place, eager residual adds and an eager SwiGLU: 24 + 8 + 12 + 27 = 71 B per token per hidden unit, between the
    fused 40 and PyTorch eager's 145, so a layer's forward sits between the two; a job stated compiled or eager,
    or a stated count, wins."""
    job = resolved("internevo", **stated)
    assert job.elementwise_bytes == expected
    model = transformer(SMALL)

    def forward_s(training: TrainingSpec) -> float:
        return ComputeModel.for_job(H100.gpu, training).layer(model, 4, 1024, "none").forward_s

    fused = forward_s(TrainingSpec(model=SMALL, seq_len=1024))
    eager = forward_s(TrainingSpec(model=SMALL, seq_len=1024, fused_elementwise=False))
    counted = forward_s(resolved("internevo"))
    assert fused < counted < eager
    # element-wise time is linear in the bytes: (71 - 40) / (145 - 40) of the way from fused to eager
    assert (counted - fused) / (eager - fused) == pytest.approx(31 / 105, rel=1e-9)


def test_a_strategy_the_framework_does_not_run_is_refused():
    out = subprocess.run([sys.executable, "-m", "simulator.cli.app", "predict", "--model", "llama2-7b", "--nodes",
                          "1", "--strategy", "fsdp", "--framework", "pytorch-ddp"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "pytorch-ddp runs; it runs ddp" in " ".join(out.stderr.split())


def test_predict_echoes_the_framework_and_what_it_set():
    result = CliRunner().invoke(app, ["predict", "--model", "llama2-7b", "--nodes", "2", "--strategy", "zero2",
                                      "--framework", "deepspeed", "--json"])
    assert result.exit_code == 0, result.output
    strategy = json.loads(result.output)["scenario"]["training"]
    assert strategy["framework"] == "deepspeed"
    assert strategy["strategy"]["overlap_grad_reduce"] is False
    assert strategy["strategy"]["bucket_all_reduce"] is True


def test_framework_defaults_skip_stated_fields():
    job = Job("zero2", "bf16", 1, 1)
    filled = framework_defaults("deepspeed", job, {"strategy": {"overlap_grad_reduce"}})
    assert "overlap_grad_reduce" not in filled["strategy"]
    assert filled["strategy"]["bucket_all_reduce"] is True


def plan_of(training: TrainingSpec, micro_steps: int = 2, dp: int = 8, model: ModelSpec = SMALL):
    built = transformer(model)
    return plan_step(built, training, H100, 1024, micro_steps, dp, built.total_params)


def test_blocking_zero2_reduction_holds_the_next_micro_step():
    """Without overlap_comm DeepSpeed reduces on the compute stream in every micro-step (stage 2): the next
    micro-step's forward starts after them; with it, nothing waits."""
    blocking = plan_of(resolved("deepspeed", strategy=StrategySpec(kind="zero2")))
    overlapped = plan_of(resolved("deepspeed", strategy=StrategySpec(kind="zero2", overlap_grad_reduce=True)))
    first = {task.name: task for task in blocking.tasks}["m1.emb_fwd"]
    assert any("reduce" in dep for dep in first.deps)
    assert not any("reduce" in dep for dep in {t.name: t for t in overlapped.tasks}["m1.emb_fwd"].deps)


def test_per_rank_reduces_move_the_bucket_in_as_many_launches_as_ranks():
    """DeepSpeed before 0.12.4 (reduce_per_rank, stated, wins over the bucket all-reduce): the bucket's bytes in
    one reduce per rank; 0.12.4 on: one all-reduce a bucket, twice a reduce-scatter's bytes."""
    per_rank = plan_of(resolved("deepspeed", strategy=StrategySpec(kind="zero2", reduce_per_rank=True)), micro_steps=1)
    scatter = plan_of(resolved("deepspeed", strategy=StrategySpec(kind="zero2", bucket_all_reduce=False)),
                      micro_steps=1)
    reduced = plan_of(resolved("deepspeed", strategy=StrategySpec(kind="zero2")), micro_steps=1)
    reduces = [t.collective for t in per_rank.tasks if t.collective and t.collective.op == "reduce"]
    scatters = [t.collective for t in scatter.tasks if t.collective and t.collective.op == "reduce_scatter"]
    all_reduces = [t.collective for t in reduced.tasks if t.collective and t.stream == "rs"]
    assert reduces and all(call.count == 8 for call in reduces)
    assert sum(c.size_bytes * c.count for c in reduces) == pytest.approx(sum(c.size_bytes for c in scatters), rel=1e-6)
    assert {c.op for c in all_reduces} == {"all_reduce"} and all(c.count == 1 for c in all_reduces)
    assert sum(c.size_bytes for c in all_reduces) == pytest.approx(sum(c.size_bytes for c in scatters), rel=1e-6)


def test_per_rank_reduces_and_blocking_are_never_faster():
    topology = load_preset("dgx-h100", nodes=4)
    times = [predict_step(topology, resolved("deepspeed", strategy=StrategySpec(kind="zero2", **knobs),
                                             micro_batch=2, global_batch=256), SMALL).step_time_s
             for knobs in ({"overlap_grad_reduce": True, "bucket_all_reduce": False}, {"bucket_all_reduce": False},
                           {"reduce_per_rank": True})]
    assert times[0] <= times[1] <= times[2]


def test_megatron_deepspeed_runs_deepspeeds_zero_optimizer():
    """Megatron-DeepSpeed's ZeRO-1 is DeepSpeed's ZeRO optimizer: buckets all-reduced (per-rank reduces before
    DeepSpeed 0.12.4), and the reduction bucket (reduce_bucket_size elements in bf16) in memory; with pipeline
    parallelism the stage's gradients go in as many reduces as data-parallel ranks, the same bytes as one
    reduce-scatter. DDP takes neither."""
    current = resolved("megatron-deepspeed", strategy=StrategySpec(kind="zero1"))
    assert (current.strategy.bucket_all_reduce, current.strategy.contiguous_gradients) == (True, True)
    zero1 = resolved("megatron-deepspeed", strategy=StrategySpec(kind="zero1", reduce_per_rank=True))
    ddp = resolved("megatron-deepspeed", strategy=StrategySpec(kind="ddp"))
    assert (ddp.strategy.bucket_all_reduce, ddp.strategy.contiguous_gradients) == (False, False)
    model = transformer(SMALL)
    bucket = memory_per_gpu(model, zero1, 1024, 4, 4).buffers_bytes
    assert bucket == pytest.approx(zero1.strategy.zero_bucket_elements * 2)
    piped = zero1.model_copy(update={"parallel": ParallelSpec(pp=2), "micro_batch": 1, "global_batch": 8})
    scatter = piped.model_copy(update={"strategy": piped.strategy.model_copy(update={"reduce_per_rank": False,
                                                                                      "bucket_all_reduce": False})})
    tasks = {kind: [t.collective for t in plan_pipeline(model, job, H100, 1024, 2, 4, 4).tasks
                    if t.collective and t.stream == "rs"] for kind, job in (("reduce", piped), ("scatter", scatter))}
    assert {c.op for c in tasks["reduce"]} == {"reduce"} and all(c.count == 4 for c in tasks["reduce"])
    assert {c.op for c in tasks["scatter"]} == {"reduce_scatter"}
    assert sum(c.size_bytes * c.count for c in tasks["reduce"]) == pytest.approx(
        sum(c.size_bytes for c in tasks["scatter"]), rel=1e-6)


def test_untied_output_layer_is_reduced_first_and_the_embedding_last():
    """PyTorch DDP buckets gradients in the order backward produces them: the output layer's first."""
    ddp = StrategySpec(kind="ddp")
    untied = [t for t in plan_of(TrainingSpec(model=SMALL, seq_len=1024, strategy=ddp), 1).tasks if t.stream == "rs"]
    tied = [t for t in plan_of(TrainingSpec(model=TIED, seq_len=1024, strategy=ddp), 1, model=TIED).tasks
            if t.stream == "rs"]
    assert untied[0].deps == ("m0.head_bwd",)
    output_bytes = 32000 * 2048 * 2
    assert untied[0].collective.size_bytes >= output_bytes
    assert tied[0].collective.size_bytes < output_bytes  # tied: the shared matrix waits for the embedding
    assert untied[-1].deps == ("m0.bwd0",) and tied[-1].deps == ("m0.bwd0",)


def test_expert_buckets_do_not_wait_behind_the_embedding_bucket():
    moe = SMALL.model_copy(update={"experts": 8, "experts_per_token": 2, "ffn_hidden": 4096, "gated_mlp": True})
    training = TrainingSpec(model=moe, seq_len=1024, strategy=StrategySpec(kind="ddp"),
                            parallel=ParallelSpec(ep=4))
    rs = [t for t in plan_of(training, 1, model=moe).tasks if t.stream == "rs"]
    last_dense = max(i for i, t in enumerate(rs) if not t.name.endswith(".x"))
    assert rs[last_dense].deps == ("m0.bwd0",)
    assert all(i < last_dense or t.deps == ("m0.bwd0",) for i, t in enumerate(rs) if t.name.endswith(".x"))


def test_sequence_parallel_backward_regathers_the_inputs():
    """Megatron's column-parallel backward all-gathers its saved input shard again: 6 TP collectives per layer
    backward (2 all-gathers of the output gradient, 2 reduce-scatters, 2 re-gathers), not 4."""
    model = transformer(SMALL)
    plain = ParallelSpec(tp=4, sequence_parallel=True)
    regather = ParallelSpec(tp=4, sequence_parallel=True, sp_backward_regather=True)
    counts = [sum(c.count for c in pass_collectives(model, 1, 1024, par, 0.0, ("backward",))[0])
              for par in (plain, regather)]
    assert counts == [4, 6]
    forward = pass_collectives(model, 1, 1024, regather, 0.0, ("forward",))[0]
    assert sum(c.count for c in forward) == 4


def per_param(training: TrainingSpec, buffers: bool = True) -> float:
    model = transformer(SMALL)
    m = memory_per_gpu(model, with_framework(training), 1024, dp=8, shard_group=8, units_in_flight=0)
    held = m.parameters_bytes + m.gradients_bytes + m.optimizer_bytes + (m.buffers_bytes if buffers else 0.0)
    return held / model.total_params


def test_pytorch_ddp_with_amp_holds_20_bytes_a_parameter():
    """fp32 parameters (4) and gradients (4), Adam's moments (8), and the buckets' copy of the gradients (4):
    gradient_as_bucket_view defaults to False."""
    assert per_param(TrainingSpec(model=SMALL, framework="pytorch-ddp")) == pytest.approx(20.0, rel=1e-9)


def test_megatron_bf16_holds_18_bytes_a_parameter():
    """bf16 parameters (2), fp32 main gradients (4), fp32 master weights and moments (12): Megatron's
    distributed-optimizer documentation's 18 bytes without the distributed optimizer."""
    spec = TrainingSpec(model=SMALL, framework="megatron-core", strategy=StrategySpec(kind="ddp"))
    assert per_param(spec, buffers=False) == pytest.approx(18.0, rel=1e-9)


@pytest.mark.parametrize(("kind", "overlap", "buffers"), [("zero1", False, 1), ("zero2", False, 1), ("zero2", True, 2),
                                                      ("zero3", True, 1)])
def test_deepspeed_holds_its_flat_gradient_buckets(kind: str, overlap: bool, buffers: int):
    """contiguous_gradients (DeepSpeed's default): ZeRO-1/2 allocate a reduce_bucket_size buffer of the model's
    dtype for each backward, a second one with overlap_comm (stage_1_and_2.py backward); ZeRO-3 one (stage3.py).
    At the default 5e8 elements of bf16: 1 GB each, on top of what the same job holds without the framework."""
    model = transformer(SMALL)
    strategy = StrategySpec(kind=kind, overlap_grad_reduce=overlap)
    deepspeed, plain = (memory_per_gpu(model, job, 1024, dp=8, shard_group=8, units_in_flight=2)
                        for job in (with_framework(TrainingSpec(model=SMALL, framework="deepspeed", strategy=strategy)),
                                    TrainingSpec(model=SMALL, strategy=strategy)))
    assert deepspeed.buffers_bytes - plain.buffers_bytes == buffers * 500_000_000 * 2


def test_deepspeed_zero3_gathers_each_matrix_on_its_own():
    """DeepSpeed stage 3 fetches submodule by submodule: a Llama-style block's 4 matrices (qkv, attention out,
    MLP up, MLP down here) in 4 all-gathers of a quarter each; FSDP in one."""
    per_module = plan_of(resolved("deepspeed", strategy=StrategySpec(kind="zero3")), 1)
    unit = plan_of(TrainingSpec(model=SMALL, seq_len=1024, strategy=StrategySpec(kind="zero3")), 1)
    first = {t.name: t.collective for t in per_module.tasks}["m0.ag_fwd0"]
    whole = {t.name: t.collective for t in unit.tasks}["m0.ag_fwd0"]
    assert first.count == 4 and whole.count == 1
    assert first.size_bytes * first.count == pytest.approx(whole.size_bytes, abs=4)


@pytest.mark.parametrize(("hidden", "ahead"), [(2048, 1), (1024, 3), (512, 15)])
def test_deepspeed_prefetches_a_bucket_of_elements_ahead(hidden: int, ahead: int):
    """stage3_prefetch_bucket_size (5e7 elements) over a block's 12 h^2 + 4 h elements: blocks of 50M elements
    (h 2048) are fetched one ahead at most, of 12.6M three, of 3.1M fifteen; FSDP's limiter says 2 whatever the
    size. A forward gather waits for the pass that many blocks before it."""
    spec = SMALL.model_copy(update={"hidden": hidden, "layers": 20})
    deepspeed = with_framework(TrainingSpec(model=spec, seq_len=1024, framework="deepspeed",
                                            strategy=StrategySpec(kind="zero3")))
    fsdp = TrainingSpec(model=spec, seq_len=1024, strategy=StrategySpec(kind="zero3"))
    model = transformer(spec)
    assert (gathers_ahead(model, deepspeed), gathers_ahead(model, fsdp)) == (ahead, 2)
    plan = plan_of(deepspeed, 1, model=spec)
    deps = {t.name: t.deps for t in plan.tasks}["m0.ag_fwd19"]
    assert deps and all(d.startswith(f"m0.fwd{19 - ahead}") for d in deps)


ZEROPP = dict.fromkeys(("zeropp_quantized_weights", "zeropp_hierarchical_partition", "zeropp_quantized_gradients"),
                       True)


def cross_node_bytes(strategy: StrategySpec) -> float:
    """Bytes one step's ZeRO-3 collectives of the blocks put on the data-parallel group (across nodes)."""
    plan = plan_of(TrainingSpec(model=SMALL, seq_len=1024, strategy=strategy), 1)
    return sum(t.collective.size_bytes * t.collective.count for t in plan.tasks
               if t.collective and t.collective.group == "dp" and "root" not in t.name)


def test_zeropp_moves_a_quarter_of_zero3s_bytes_across_nodes():
    """ZeRO++ (Wang et al. 2023, section 3): int8 forward gathers (1/2), backward gathers inside the node
    (hpZ: none across), int4 gradients (1/4): 0.5 M + 0.25 M against ZeRO-3's 3 M, '4x less communication'."""
    zero3 = cross_node_bytes(StrategySpec(kind="zero3"))
    zeropp = cross_node_bytes(StrategySpec(kind="zero3", **ZEROPP))
    assert zeropp == pytest.approx(zero3 / 4, rel=0.01)
    plan = plan_of(TrainingSpec(model=SMALL, seq_len=1024, strategy=StrategySpec(kind="zero3", **ZEROPP)), 1)
    assert {t.collective.group for t in plan.tasks if ".ag_bwd" in t.name} == {"shard"}


def test_zeropp_is_a_zero3_option_and_hpz_costs_memory():
    with pytest.raises(ValueError, match="ZeRO-3"):
        StrategySpec(kind="zero2", zeropp_quantized_gradients=True)
    model = transformer(SMALL)
    plain, hpz = (memory_per_gpu(model, TrainingSpec(model=SMALL, strategy=StrategySpec(kind="zero3", **knobs)),
                                 1024, dp=64, shard_group=8, units_in_flight=2)
                  for knobs in ({}, {"zeropp_hierarchical_partition": True}))
    assert hpz.parameters_bytes - plain.parameters_bytes == pytest.approx(model.total_params * 2 / 8, rel=1e-6)


@pytest.mark.parametrize("hpz", [True, False])
def test_zeropp_quantization_kernels_are_memory_passes(hpz):
    """qwZ dequantizes each gathered int8 block on the compute stream before its pass: 1 + 2 bytes a parameter
    at HBM speed (backward's gathers too, unless hpZ gathers them in bf16 inside the node); qgZ quantizes each
    block's gradients on the reduction stream ahead of its exchange: 3.1 bytes an element (hand-computed)."""
    knobs = {**ZEROPP, "zeropp_hierarchical_partition": hpz}
    plan = plan_of(TrainingSpec(model=SMALL, seq_len=1024, strategy=StrategySpec(kind="zero3", **knobs)), 1)
    tasks = {t.name: t for t in plan.tasks}
    layer_params = transformer(SMALL).blocks[0][0].params_per_layer
    dequantize = tasks["m0.ag_fwd3.dequantize"]
    assert (dequantize.stream, dequantize.deps) == ("compute", ("m0.ag_fwd3",))
    assert dequantize.duration_s == pytest.approx(3.0 * layer_params / H100.hbm_Bps, rel=1e-6)
    assert "m0.ag_fwd3.dequantize" in tasks["m0.fwd3"].deps
    assert ("m0.ag_bwd3.dequantize" in tasks) is not hpz
    quantize = tasks["m0.rs3.quantize"]
    assert (quantize.stream, quantize.deps, tasks["m0.rs3"].deps) == ("rs", ("m0.bwd3",), ("m0.rs3.quantize",))
    assert quantize.duration_s == pytest.approx(3.1 * layer_params / H100.hbm_Bps, rel=1e-6)
    plain = plan_of(TrainingSpec(model=SMALL, seq_len=1024, strategy=StrategySpec(kind="zero3")), 1)
    assert not any("quantize" in t.name for t in plain.tasks)


def test_the_table_header_names_the_framework_on_the_first_line():
    """The framework closes the first line (model, strategy, cluster), so the job line fits the table's width."""
    result = CliRunner().invoke(app, ["predict", "--model", "llama2-7b", "--nodes", "1", "--framework", "fsdp2"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("llama2-7b, fsdp") and lines[0].rstrip().endswith(", fsdp2")
    assert "\\n" not in result.output
    assert lines[1].strip().startswith("sequence 4,096") and lines[1].rstrip().endswith("bf16")


LLAMA3_8B = ModelSpec(name="llama3-8b-shape", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
                      gated_mlp=True, vocab=128256, max_seq_len=8192)


def test_torchtitan_op_checkpointing_keeps_every_other_matmul():
    """torchtitan's per-op policy on a Llama 3 8B block (wq, wk, wv, wo, w1, w3, w2): it keeps the outputs of wq
    (h), wv (h/4), w1 (3.5 h) and w2 (h), attention's output (h) and the block's input (h), 7.75 h a token, 15.5 s b h
    bytes, plus attention's fp32 log-sum-exp (4 bytes a head); it re-runs wk, wo and w3, not w2 (nothing backward
    needs comes after it)."""
    block = transformer(LLAMA3_8B).blocks[0][0]
    s, b, h = 8192, 2, 4096
    assert block.activation_bytes_per_layer(b, s, "op") == pytest.approx(s * b * (15.5 * h + 4 * 32), rel=1e-12)
    assert [(name, round(part, 3)) for name, part, _ in block.op_recomputed_gemms()] == [
        ("qkv", round(1024 / 6144, 3)), ("attn_out", 1.0), ("mlp_up", 0.5)]
    plain = transformer(SMALL).blocks[0][0]  # q, k, v, o, up, down: down is last, so only k and o
    assert [name for name, _, _ in plain.op_recomputed_gemms()] == ["qkv", "attn_out"]


def test_op_recompute_runs_the_matmuls_it_drops_and_no_attention():
    """Recompute time under op = the recomputed matmuls' share of their GEMMs + the element-wise work; with TP and
    sequence parallelism the recomputed forward re-runs the two all-gathers (the reduce-scatters' outputs are
    kept); with context parallelism no ring is re-run (attention's output is kept)."""
    block = transformer(LLAMA3_8B).blocks[0][0]
    times = H100.layer(block, 1, 4096, "op")
    gemm_s = H100.gemms_s(block, 1, 4096)
    expected = sum(gemm_s[name] * part for name, part, _ in block.op_recomputed_gemms())
    assert expected < times.recompute_s < expected + H100.layer(block, 1, 4096, "none").forward_s - sum(gemm_s.values())
    job = TrainingSpec(model=LLAMA3_8B, seq_len=4096, activation_checkpointing="op", strategy=StrategySpec(kind="fsdp"),
                       parallel=ParallelSpec(tp=2, cp=2, sequence_parallel=True))
    plan = plan_of(job, 1, model=LLAMA3_8B)
    recompute = next(t for t in plan.tasks if t.name.startswith("m0.rec0"))
    calls = [t.collective for t in plan.tasks if t.collective and t.name.startswith("m0.rec0")]
    assert recompute.label == "recompute"
    assert {(c.op, c.group) for c in calls} <= {("all_gather", "tp")} and sum(c.count for c in calls) == 2


def test_torchtitans_eager_loss_holds_three_fp32_copies_of_the_logits():
    """torchtitan's loss is F.cross_entropy on fp32 logits: at the start of backward the saved log-softmax output,
    its gradient and the input gradient, 12 bytes a logit against the fused loss's 4."""
    model = transformer(LLAMA3_8B)
    eager, fused = (memory_per_gpu(model, TrainingSpec(model=LLAMA3_8B, seq_len=4096, micro_batch=1,
                                                       cross_entropy=loss, strategy=StrategySpec(kind="fsdp")),
                                   4096, dp=8, shard_group=8, units_in_flight=3) for loss in ("eager", "fused"))
    assert eager.activations_bytes - fused.activations_bytes == pytest.approx(8 * 4096 * 128256, rel=1e-12)
    assert resolved("fsdp2", strategy=StrategySpec(kind="fsdp")).cross_entropy == "eager"
    assert resolved("megatron-core", strategy=StrategySpec(kind="ddp")).cross_entropy == "fused"



@pytest.mark.parametrize(("framework", "stated", "loss_bytes"), [
    ("megatron-core", {}, 52.0), ("nemo", {}, 40.0), ("megatron-deepspeed", {}, 52.0), ("deepspeed", {}, 44.0),
    ("llm-foundry", {}, 6.0), ("internevo", {}, 6.0), ("maxtext", {}, 8.0), ("fsdp2", {}, 44.0),
    ("fsdp2", {"fused_elementwise": True}, 8.0), ("pytorch-fsdp", {}, 44.0),
    ("fsdp2", {"fused_elementwise": True, "cross_entropy": "eager"}, 44.0),  # torchtitan before 2025-04
    ("nemo", {"loss_bytes_per_logit": 52.0}, 52.0),  # a stated count wins
])
def test_each_framework_runs_its_own_loss(framework, stated, loss_bytes):
    """Megatron's unfused vocabulary-parallel cross entropy (52 bytes a logit), NeMo's fused one (40), PyTorch's
    eager F.cross_entropy on fp32 logits (44) or compiled (8), flash-attn's Triton kernel (6: LLM Foundry,
    InternEvo), XLA's fused loss (8: MaxText)."""
    kind = FRAMEWORKS[framework].kinds[0]
    assert resolved(framework, strategy=StrategySpec(kind=kind), **stated).loss_bytes_per_logit == loss_bytes


def test_the_loss_passes_cost_their_bytes_at_memory_speed():
    """Head time = the output GEMM's roofline + half the loss's bytes a logit in each pass, over HBM: by hand for
    Llama 3 8B's 128,256-token vocabulary at 4,096 tokens, 52 against 6 bytes a logit (TP 2: half the vocabulary)."""
    model = transformer(LLAMA3_8B)
    gpu = gpu_spec("H100-SXM5-80GB")
    megatron, flash = (ComputeModel(gpu, "bf16", loss_bytes_per_logit=b).head(model, 1, 4096, tp=2)
                       for b in (52.0, 6.0))
    hbm = gpu.hbm_GBps * 1e9 * 0.85  # MEMORY_EFFICIENCY
    logits = 4096 * 128256 / 2
    assert megatron[0] - flash[0] == pytest.approx(0.5 * 46.0 * logits / hbm, rel=1e-9)
    assert megatron[1] - flash[1] == pytest.approx(0.5 * 46.0 * logits / hbm, rel=1e-9)
    generic = TrainingSpec(model=SMALL, seq_len=1024)
    assert ComputeModel.for_job(gpu, generic).loss_bytes_per_logit == 40.0  # no framework: by cross_entropy
    eager = TrainingSpec(model=SMALL, seq_len=1024, cross_entropy="eager")
    assert ComputeModel.for_job(gpu, eager).loss_bytes_per_logit == 44.0

def test_float8_op_checkpointing_reruns_every_matmul():
    """torchtitan's save list names aten.mm; float8 matmuls are torch._scaled_mm, so under float8 the per-op
    policy re-runs all of a block's matmuls (with their casts), not every other one, and still not attention."""
    block = transformer(LLAMA3_8B).blocks[0][0]
    fp8 = ComputeModel(gpu_spec("H100-SXM5-80GB"), "fp8")
    op, full = fp8.layer(block, 1, 4096, "op"), fp8.layer(block, 1, 4096, "full")
    gemms = sum(fp8.gemms_s(block, 1, 4096).values())
    attention = fp8.attention_forward_s(block, 1, 4096)
    assert op.recompute_s > gemms and op.recompute_s == pytest.approx(full.recompute_s - attention, rel=1e-6)


@pytest.mark.parametrize("nodes", [16, 64, 128])
def test_per_rank_reduces_at_scale_cost_a_wavefront_not_n_chains(nodes):
    """A reduce per rank over n ranks is n reduces to successive roots of one ring: each follows the previous
    one down the ring, so the series pays one chain's hops and fill, not n of them (collectives.cost). On
    DeepSpeed ZeRO-2 without overlap (every micro-step's buckets on the compute stream) the per-rank reduces
    stay within half a step of one reduce-scatter of the same bytes, at 128 to 1,024 GPUs; priced call by
    call they took 4-100x the step."""
    topology = load_preset("dgx-a100", nodes=nodes)
    times = [predict_step(topology, resolved("deepspeed", strategy=StrategySpec(
        kind="zero2", reduce_per_rank=per, bucket_all_reduce=False), micro_batch=2,
        global_batch=nodes * 8 * 2 * 2), SMALL).step_time_s for per in (False, True)]
    assert times[0] <= times[1] < 1.5 * times[0]


def test_a_series_of_chained_calls_pays_one_fill():
    """n back-to-back reduces: one latency and fill, n launches and n times the bytes; an all-reduce series pays
    every call's latency (hand-computed from the estimate's parts)."""
    from simulator.collectives.comm import comm_view
    from simulator.collectives.cost import repeated_latency_s, repeated_time_s
    from simulator.collectives.predict import predict_collective
    from topologies.build import build_representative

    view = comm_view(build_representative(load_preset("dgx-a100", nodes=64)))
    reduce = predict_collective(view, "reduce", 1 << 20, repeat=512)
    assert reduce.launch_s > 0
    assert repeated_latency_s(reduce, 512) == pytest.approx(reduce.latency_s + reduce.fill_s + 511 * reduce.launch_s)
    assert repeated_time_s(reduce, 512) == pytest.approx(repeated_latency_s(reduce, 512) + 512 * reduce.bandwidth_s)
    ring = predict_collective(view, "all_reduce", 1 << 20)
    assert repeated_latency_s(ring, 3) == pytest.approx(3 * (ring.latency_s + ring.fill_s))
    for proto in ("ll", "ll128", "simple"):  # the series' pair is the one whose series is fastest
        pinned = predict_collective(view, "reduce", 1 << 20, proto=proto)
        assert repeated_time_s(reduce, 512) <= repeated_time_s(pinned, 512) * (1 + 1e-9)
    # other ops (a pipeline chunk's TP collectives) choose call by call, trees ranked as NCCL's tuner credits them
    # (on two DGX-1 a plain ranking would take a tree at these sizes)
    two = comm_view(build_representative(load_preset("dgx-1-v100", nodes=2)))
    for size in (1 << 20, 1 << 26, 1 << 28):
        one = predict_collective(two, "all_reduce", size)
        series = predict_collective(two, "all_reduce", size, repeat=48)
        assert (series.algo, series.proto) == (one.algo, one.proto)
