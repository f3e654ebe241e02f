"""LoRA fine-tuning (TrainingSpec.lora_rank): frozen weights with trainable adapters. Backward computes input
gradients only, and only the adapters are reduced, updated and held with gradients and optimizer states."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.training.compute import ComputeModel
from simulator.training.pipeline import plan_pipeline
from simulator.training.plan import plan_step
from simulator.training.predict import predict_step
from simulator.training.shards import trainable_blocks_params_on_gpu, trainable_layer_params_on_gpu
from topologies.hardware import gpu_spec
from topologies.presets import load_preset
from workloads.model import sharded_gemms, transformer
from workloads.spec import ModelSpec, ParallelSpec, StrategySpec, TrainingSpec

# a GPT block: qkv 4096 -> 12288, attn_out 4096 -> 4096, mlp_up 4096 -> 16384, mlp_down 16384 -> 4096
MODEL = ModelSpec(name="m", layers=8, hidden=4096, heads=32, vocab=32000, max_seq_len=4096)
TOPOLOGY = load_preset("dgx-h100", nodes=1)


def job(rank: int | None = 16, kind: str = "ddp", **fields: object) -> TrainingSpec:
    return TrainingSpec(model="m", seq_len=4096, global_batch=8, lora_rank=rank,
                        strategy=StrategySpec(kind=kind), **fields)  # type: ignore[arg-type]


def test_adapter_parameters_by_hand():
    """r (k + n) per weight GEMM: (4096 + 12288) + (4096 + 4096) + (4096 + 16384) + (16384 + 4096) = 65,536 per
    rank; over TP 2 each GEMM's shard (qkv and mlp_up split n, attn_out and mlp_down k): 40,960 per rank."""
    m = transformer(MODEL)
    assert trainable_layer_params_on_gpu(m, job(16), 1, 1) == (16 * 65536, 0.0)
    assert trainable_layer_params_on_gpu(m, job(16), 2, 1) == (16 * 40960, 0.0)
    assert trainable_layer_params_on_gpu(m, job(None), 1, 1) == (m.params_per_layer, 0.0)


def test_backward_computes_input_gradients_only():
    """A layer's backward without the weight-gradient GEMMs: full fine-tuning's backward minus the forward GEMMs'
    time, plus the adapters' backward; its forward is full fine-tuning's plus the adapters'. The adapters'
    forward is at least their element-wise scaling and add, 10 bytes an output element of every weight GEMM:
    10 x 4,096 tokens x (12,288 + 4,096 + 16,384 + 4,096) outputs at the HBM rate."""
    m = transformer(MODEL)
    gpu = gpu_spec("H100-SXM5-80GB")
    full, lora = ComputeModel.for_job(gpu, job(None)), ComputeModel.for_job(gpu, job(16))
    gemm_s = sum(full.gemms_s(m, 1, 4096).values())
    adapters_forward_s, adapters_backward_s = lora._lora_s(sharded_gemms(m.layer_gemms(4096), 1))
    f, lo = full.layer(m, 1, 4096, "none"), lora.layer(m, 1, 4096, "none")
    assert lo.backward_s == pytest.approx(f.backward_s - gemm_s + adapters_backward_s, rel=1e-9)
    assert lo.forward_s == pytest.approx(f.forward_s + adapters_forward_s, rel=1e-9)
    assert adapters_forward_s >= 10.0 * 4096 * (12288 + 4096 + 16384 + 4096) / lora.hbm_Bps
    head_f, head_b = lora.head(m, 1, 4096)
    assert head_b == pytest.approx(head_f)  # the frozen output layer: its input gradient only


def test_only_the_adapters_are_reduced():
    """DDP with LoRA all-reduces exactly the adapters' gradients: the step's all-reduce bytes are 8 layers x
    16 x 65,536 parameters x the gradients' bytes (bytes sent = what trains)."""
    m = transformer(MODEL)
    training = job(16)
    compute = ComputeModel.for_job(gpu_spec("H100-SXM5-80GB"), training)
    trained, _ = trainable_blocks_params_on_gpu(m, training, 1, 1)
    plan = plan_step(m, training, compute, 4096, 1, 8, trained)
    reduced = sum(t.collective.size_bytes for t in plan.tasks if t.collective and t.collective.op == "all_reduce")
    assert trained == 8 * 16 * 65536
    assert reduced == pytest.approx(trained * training.strategy.grad_reduce_bytes, rel=1e-6)


def test_memory_holds_states_for_the_adapters_only():
    """ZeRO-1 over 8 GPUs with LoRA: gradients are the adapters' (2 bytes each), optimizer states their 12 bytes
    over 8 ranks, the parameters every frozen weight's 2 bytes plus the adapters'."""
    m = transformer(MODEL)
    lora, full = predict_step(TOPOLOGY, job(16, "zero1"), MODEL), predict_step(TOPOLOGY, job(None, "zero1"), MODEL)
    adapters = 8 * 16 * 65536
    assert lora.memory.gradients_bytes == pytest.approx(adapters * 2.0)
    assert lora.memory.optimizer_bytes == pytest.approx(adapters * 12.0 / 8)
    assert lora.memory.parameters_bytes == pytest.approx(full.memory.parameters_bytes + adapters * 2.0)
    assert m.total_params * 2.0 == pytest.approx(full.memory.parameters_bytes)


def test_model_flops_are_forward_twice_plus_attention():
    """Frozen weights: backward is the GEMMs once more and attention twice: 2 F + attention a token."""
    m = transformer(MODEL)
    forward = m.model_flops_per_token(4096) / 3.0
    attention = 8 * m.attention_forward_flops(1, 4096)
    assert m.model_flops_per_token(4096, lora=True) == pytest.approx(2.0 * forward + attention)


@settings(max_examples=10, deadline=None)
@given(st.integers(min_value=1, max_value=256), st.integers(min_value=1, max_value=256))
def test_lora_is_faster_than_full_fine_tuning_and_a_larger_rank_never_faster(low: int, high: int):
    low, high = sorted((low, high))
    full = predict_step(TOPOLOGY, job(None), MODEL).step_time_s
    small = predict_step(TOPOLOGY, job(low), MODEL).step_time_s
    large = predict_step(TOPOLOGY, job(high), MODEL).step_time_s
    assert small <= large < full


def test_lora_with_pipeline_stages_reduces_only_the_adapters():
    """4 stages of 2 layers (GPT blocks with tied embeddings), ZeRO-1 over 2 replicas: each stage reduces and
    gathers its 2 layers' adapters (2 x 16 x 65,536), not its weights nor the tied embedding (frozen: no tied
    all-reduce), and the step is shorter than full fine-tuning's."""
    tied = MODEL.model_copy(update={"tied_embeddings": True})
    lora = job(16, "zero1", parallel=ParallelSpec(pp=4), micro_batch=1)
    m = transformer(tied)
    compute = ComputeModel.for_job(gpu_spec("H100-SXM5-80GB"), lora)
    plan = plan_pipeline(m, lora, compute, 4096, 4, 2, 1)
    reduced = [0.0] * 4
    for task in plan.tasks:
        if task.collective and task.name.startswith("red"):
            reduced[task.stage] += task.collective.size_bytes
    assert reduced == pytest.approx([2 * 16 * 65536 * lora.strategy.grad_reduce_bytes] * 4, rel=1e-6)
    assert not [t for t in plan.tasks if t.name == "tied"]
    topology = load_preset("dgx-h100", nodes=1)
    full = job(None, "zero1", parallel=ParallelSpec(pp=4), micro_batch=1)
    assert predict_step(topology, lora, tied).step_time_s < predict_step(topology, full, tied).step_time_s


def test_lora_where_it_is_not_modelled_is_refused():
    """With a mixture of experts: refused naming training.lora_rank; from the CLI, exit 2 and one line."""
    out = subprocess.run([sys.executable, "-m", "simulator.cli.app", "predict", "--model", "mixtral-8x7b",
                          "--topology", "dgx-h100", "--seq-len", "4096", "--lora-rank", "16"],
                         capture_output=True, text=True)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "training.lora_rank with a mixture of experts" in lines[0]
