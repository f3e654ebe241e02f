"""Unfused attention on heads that are not whole 16-byte vectors runs its batched GEMMs on CUDA cores.

Hand values: a head dim is aligned when head_dim x element bytes is a multiple of 16 (bf16: a multiple of 8);
a misaligned head's attention GEMMs take bf16 peak / fp32 peak = 312 / 19.5 = 16 times the tensor-core time
on an A100; a fused (flash) kernel, or an aligned head, is priced as before.
"""

from __future__ import annotations

import pytest

from simulator.training.compute import ComputeModel
from topologies.hardware import gpu_spec
from workloads.model import transformer
from workloads.presets import load_model
from workloads.spec import TrainingSpec

SEQ, MICRO_BATCH = 2048, 2


def bloom_like(hidden: int, heads: int):
    """A BLOOM prototype's block shape: Llama 2 7B's fields with the prototype's width and heads."""
    spec = load_model("llama2-7b").model_copy(update={
        "hidden": hidden, "heads": heads, "kv_heads": heads, "head_dim": hidden // heads,
        "ffn_hidden": 4 * hidden, "gated_mlp": False})
    return transformer(spec)


def compute(precision: str = "bf16") -> ComputeModel:
    training = TrainingSpec(model="llama2-7b", seq_len=SEQ, micro_batch=MICRO_BATCH, global_batch=8,
                            precision=precision)
    return ComputeModel.for_job(gpu_spec("A100-SXM4-80GB"), training)


@pytest.mark.parametrize(("hidden", "heads", "aligned"), [
    (14400, 64, False),   # head dim 225
    (14400, 96, False),   # 150
    (13824, 128, False),  # 108
    (13824, 64, True),    # 216
    (14336, 128, True),   # 112
    (12288, 96, True),    # 128
])
def test_which_heads_are_whole_vectors_in_bf16(hidden, heads, aligned):
    assert compute().heads_aligned(bloom_like(hidden, heads)) is aligned


def test_in_fp32_a_multiple_of_four_is_enough():
    """108 fp32 elements are 432 bytes, 27 vectors; 150 are 600 bytes, not a whole number."""
    assert compute("fp32").heads_aligned(bloom_like(13824, 128))
    assert not compute("fp32").heads_aligned(bloom_like(14400, 96))


def test_misaligned_attention_gemms_run_at_the_fp32_peak():
    """A100: bf16 312 TFLOP/s against fp32 19.5, so 16 times the tensor-core time."""
    c, model = compute(), bloom_like(14400, 64)
    tokens = MICRO_BATCH * SEQ
    ratio = c._attention_s(model, tokens, SEQ, 8, tensor_cores=False) / c._attention_s(model, tokens, SEQ, 8)
    assert ratio == pytest.approx(312 / 19.5, rel=1e-12)


@pytest.mark.parametrize(("hidden", "heads", "slowdown"), [(14400, 64, 312 / 19.5), (13824, 64, 1.0)])
def test_unfused_minus_fused_is_the_scores_traffic_plus_the_lost_tensor_cores(hidden, heads, slowdown):
    """forward(unfused) - forward(flash) = the score matrix's HBM traffic + (slowdown - 1) x the attention
    GEMMs' tensor-core time: exact, for a misaligned head (225) and an aligned one (216, slowdown 1)."""
    from simulator.training.compute import UNFUSED_SCORE_BYTES

    c, model = compute(), bloom_like(hidden, heads)
    unfused = c.layer(model, MICRO_BATCH, SEQ, "none", tp=8, flash_attention=False).forward_s
    fused = c.layer(model, MICRO_BATCH, SEQ, "none", tp=8, flash_attention=True).forward_s
    scores = MICRO_BATCH * heads / 8 * SEQ * SEQ
    attention_s = c.attention_forward_s(model, MICRO_BATCH, SEQ, tp=8)
    expected = scores * UNFUSED_SCORE_BYTES / c.hbm_Bps + (slowdown - 1.0) * attention_s
    assert unfused - fused == pytest.approx(expected, rel=1e-9)


def test_a_fitted_attention_factor_leaves_the_cuda_core_path_alone():
    """The factor validate-training --crossval fits describes the tensor-core kernels: scaling it moves the
    aligned attention, not the misaligned batch on CUDA cores."""
    from dataclasses import replace

    c, model = compute(), bloom_like(14400, 64)
    scaled = replace(c, attention_scale=0.6)
    tokens = MICRO_BATCH * SEQ
    assert scaled._attention_s(model, tokens, SEQ, 8, tensor_cores=False) == c._attention_s(
        model, tokens, SEQ, 8, tensor_cores=False)
    assert scaled._attention_s(model, tokens, SEQ, 8) == pytest.approx(c._attention_s(model, tokens, SEQ, 8) / 0.6)
