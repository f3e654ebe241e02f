"""Multi-head latent attention (workloads.model, MLA) in the training step: its GEMMs split over tensor
parallelism, its activation memory, the context-parallel exchanges of its wider keys and values, what is
refused, and DeepSeek-V3 end to end. Expected values are hand-computed from the formulas in workloads.model,
simulator.training.compute and simulator.training.tasks."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.core.yaml_text import load_yaml_text
from simulator.scenario import resolve_scenario, scenario_from_data
from simulator.training.compute import ComputeModel
from simulator.training.predict import predict_step
from simulator.training.tasks import cp_call, ulysses_calls
from topologies.hardware import gpu_spec
from topologies.presets import load_preset
from workloads.model import sharded_gemms, transformer
from workloads.presets import load_model
from workloads.spec import ParallelSpec, StrategySpec, TrainingSpec

DEEPSEEK = load_model("deepseek-v3")  # 61 blocks of 7168, 128 heads; MLA 1536 / 512, 128 + 64 and 128 per head
H100 = ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16")


def test_down_projections_are_replicated_over_tensor_parallelism():
    """TP 8: q_down (7168 -> 1536) and kv_down (7168 -> 576) are computed whole on every rank, q_up (-> 128 x 192)
    and kv_up (-> 128 x 256) split by heads, attn_out (128 x 128 ->) by rows."""
    gemms = dict((name, (n, k)) for name, _, n, k in sharded_gemms(transformer(DEEPSEEK).layer_gemms(4096)[:5], 8))
    assert gemms == {"q_down": (1536, 7168), "q_up": (128 * 192 // 8, 1536), "kv_down": (576, 7168),
                     "kv_up": (128 * 256 // 8, 512), "attn_out": (7168, 128 * 128 // 8)}


def test_latent_attention_keeps_its_own_widths_for_backward():
    """Per token and block, beyond Korthikanti's 34 h (which counts q, k, v and the output projection's input at
    h each): 2 B x (24576 + 24576 + 16384 + 16384 - 4 x 7168) split over TP, and the latents before and after
    their norm with the rotary key, 2 B x (2 x (1536 + 512) + 64), on every TP rank."""
    model = transformer(DEEPSEEK)
    plain = transformer(DEEPSEEK.model_copy(update={"mla": None, "heads": 128}))
    for tp in (1, 8):
        delta = (model.activation_bytes_per_layer(1, 4096, "selective", tp)
                 - plain.activation_bytes_per_layer(1, 4096, "selective", tp))
        per_token = 2 * (24576 + 24576 + 16384 + 16384 - 4 * 7168) / tp + 2 * (2 * (1536 + 512) + 64)
        assert delta == pytest.approx(4096 * per_token, rel=1e-12)
    assert model.activation_bytes_per_layer(1, 4096, "full") == plain.activation_bytes_per_layer(1, 4096, "full")


def test_context_parallel_exchanges_carry_mla_keys_and_values():
    """The ring sends each rank's keys (128 x 192) and values (128 x 128) of its s / cp tokens; Ulysses moves q, k
    and v (192 + 192 + 128 per head) in and the 128-wide outputs back."""
    model = transformer(DEEPSEEK)
    call = cp_call(model, 1, 8192, 8, 4, "forward")
    assert call is not None and call.size_bytes == 2 * 2048 * (24576 + 16384) // 8
    qkv, out = ulysses_calls(model, 1, 8192, 8, 4, 1)
    assert (qkv.size_bytes, out.size_bytes) == (2 * 2048 * (24576 * 2 + 16384) // 8, 2 * 2048 * 16384 // 8)


@pytest.mark.parametrize("overlap", ["tp_comm_overlap", "tp_async_grad_reduce"])
def test_tp_overlap_with_mla_pairs_with_its_column_parallel_projections(overlap: str):
    """An overlapped TP collective (or an asynchronous input-gradient reduction) of MLA's attention is decomposed
    with q_up and kv_up, the projections split as a plain block's qkv is: the step runs (it was refused; the
    Megatron-Core conventions turn the asynchronous reduction on with TP) and is no slower than without it."""
    def step(on: bool) -> float:
        training = TrainingSpec(model=DEEPSEEK, seq_len=4096, global_batch=64, strategy=StrategySpec(kind="zero1"),
                                parallel=ParallelSpec(tp=8, ep=8, pp=8, sequence_parallel=True, **{overlap: on}))
        return predict_step(load_preset("dgx-h100", nodes=64), training, DEEPSEEK).step_time_s
    assert step(True) <= step(False)
    gemms = H100.gemms_s(transformer(DEEPSEEK), 1, 4096, tp=8)
    assert gemms["qkv"] == pytest.approx(gemms["q_up"] + gemms["kv_up"])


def test_deepseek_v3_runs_end_to_end():
    """DeepSeek-V3 on 64 DGX H100 nodes (512 GPUs), TP 1, PP 16, EP 32, ZeRO-1, full recompute, 4k tokens: the
    step books all-to-alls and a pipeline bubble; model FLOPs count the 37B active parameters (6 N per token
    plus attention): between 6 x 36.6B and 6 x 37.6B plus 12 x 61 x 128 x 192-ish per token of attention."""
    training = TrainingSpec(model=DEEPSEEK, seq_len=4096, micro_batch=1, global_batch=1024,
                            activation_checkpointing="full", strategy=StrategySpec(kind="zero1"),
                            parallel=ParallelSpec(pp=16, ep=32))
    prediction = predict_step(load_preset("dgx-h100", nodes=64), training, DEEPSEEK)
    assert prediction.comm_by_collective_s.get("ep_comm", 0.0) > 0.0
    assert prediction.idle_breakdown_s["pipeline_bubble"] > 0.0
    assert 0.05 < prediction.mfu < 0.6
    per_token = prediction.model_flops_per_step / prediction.tokens_per_step
    model = transformer(DEEPSEEK)
    assert per_token == pytest.approx(model.model_flops_per_token(4096), rel=1e-12)
    assert 6 * 36.6e9 < per_token < 6 * 37.6e9 + 3 * 2 * 4096 * (24576 + 16384) * 61



def test_deepseek_v3_example_scenario_runs_and_fits():
    """examples/deepseek-v3.yaml (DeepSeek's layout on 2,048 H100s, all-to-alls overlapped) predicts a step that
    fits in memory, books its all-to-alls and beats the same job without the overlap."""
    path = Path(__file__).resolve().parents[2] / "examples" / "deepseek-v3.yaml"
    topology, training, model = resolve_scenario(scenario_from_data(load_yaml_text(path.read_text(), str(path)),
                                                                    str(path)))
    overlapped = predict_step(topology, training, model)
    assert overlapped.fits_in_memory and overlapped.comm_by_collective_s.get("ep_comm", 0.0) > 0.0
    plain = training.model_copy(update={"parallel": training.parallel.model_copy(update={"ep_comm_overlap": False})})
    assert overlapped.step_time_s < predict_step(topology, plain, model).step_time_s
