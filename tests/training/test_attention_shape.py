"""The fused attention kernels' shape factor (simulator.training.compute.ATTENTION_SHAPE): its hand values,
its monotonicity, that it is what benchmarks/fit_compute_curves.py fits to the measured H200 profile, and
how the compute model applies it (context-parallel ring steps see their own, shorter, key blocks)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.training.compute import ATTENTION_REFERENCE_SEQ, ATTENTION_SHAPE, ATTENTION_SHAPE_ARCHS, ComputeModel
from topologies.hardware import gpu_spec
from workloads.model import transformer
from workloads.presets import load_model
from workloads.spec import TrainingSpec

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("kernel", sorted(ATTENTION_SHAPE))
def test_factor_is_one_at_the_tables_reference_shape(kernel):
    assert ATTENTION_SHAPE[kernel].factor(ATTENTION_REFERENCE_SEQ, 128) == pytest.approx(1.0, rel=1e-12)


def test_factor_hand_values():
    """FlashAttention-2 at 2,048 keys, head dim 128: (2048 / 2848) / (8192 / 8992) = 0.7893; cuDNN at 8,192
    keys, head dim 64: a64 / a128 = 0.807 / 1.063 = 0.7592; head dim 96 halfway between the two."""
    assert ATTENTION_SHAPE["flash2"].factor(2048, 128) == pytest.approx((2048 / 2848) / (8192 / 8992), rel=1e-9)
    assert ATTENTION_SHAPE["cudnn"].factor(8192, 64) == pytest.approx(0.807 / 1.063, rel=1e-9)
    cudnn = ATTENTION_SHAPE["cudnn"]
    assert cudnn.factor(8192, 96) == pytest.approx((cudnn.factor(8192, 64) + 1.0) / 2, rel=1e-9)
    assert cudnn.factor(8192, 256) == cudnn.factor(8192, 128) and cudnn.factor(8192, 32) == cudnn.factor(8192, 64)


@given(st.sampled_from(sorted(ATTENTION_SHAPE)), st.integers(1, 1 << 20), st.integers(1, 1 << 20),
       st.integers(16, 256), st.integers(16, 256))
def test_more_keys_or_wider_heads_are_never_less_efficient(kernel, s1, s2, d1, d2):
    shape = ATTENTION_SHAPE[kernel]
    assert shape.factor(max(s1, s2), max(d1, d2)) >= shape.factor(min(s1, s2), min(d1, d2))


def test_constants_are_what_the_documented_fit_gives():
    """benchmarks/fit_compute_curves.py over benchmarks/data/h200_compute.yaml reproduces every constant of
    ATTENTION_SHAPE to the precision it is written with (the SDPA backend 'flash' is the flash2 kernel)."""
    script = runpy.run_path(str(ROOT / "benchmarks" / "fit_compute_curves.py"), run_name="fit_compute_curves")
    profile = script["compute_calibration_from_dict"](
        script["yaml"].safe_load(script["DEFAULT_PROFILE"].read_text())["compute"], "h200_compute.yaml")
    fits = {fit["backend"]: fit for fit in script["fit_attention"](profile, "H200-SXM-141GB")}
    for backend, kernel in (("flash", "flash2"), ("cudnn", "cudnn")):
        shape = ATTENTION_SHAPE[kernel]
        assert fits[backend]["a64"] == pytest.approx(shape.a64, abs=0.002)
        assert fits[backend]["a128"] == pytest.approx(shape.a128, abs=0.002)
        assert fits[backend]["s_half"] == pytest.approx(shape.s_half, abs=2)
        assert fits[backend]["median_abs_error"] < 0.03


def _attention_s(seq_len: int, cp: int = 1, micro_batch: int = 1) -> float:
    training = TrainingSpec(model="llama2-7b", seq_len=seq_len, micro_batch=micro_batch, global_batch=8,
                            attention_kernel="cudnn")
    compute = ComputeModel.for_job(gpu_spec("H100-SXM5-80GB"), training)
    model = transformer(load_model("llama2-7b"))
    return compute.attention_forward_s(model, micro_batch, seq_len, cp=cp)


def test_short_sequences_pay_more_per_score():
    """Llama 2 7B (head dim 128) on cuDNN: 8 sequences of 1,024 tokens have 1/8 of the score FLOPs of one of
    8,192 but take 1 / factor(1024) = 1.59 times longer than that share."""
    ratio = _attention_s(1024, micro_batch=8) / (_attention_s(8192) / 8)
    assert ratio == pytest.approx(1.0 / ATTENTION_SHAPE["cudnn"].factor(1024, 128), rel=1e-9)
    assert ratio == pytest.approx(1.59, abs=0.01)


def test_a_ring_step_runs_at_its_block_of_keys():
    """Context parallelism over 4 GPUs: a GPU's queries are a quarter of the sequence's, its ring's 4 steps
    each attend them to a quarter of the keys, 3 of the 4 with the non-causal kernel (NONCAUSAL_SPEEDUP), and
    each step's kernel sees 8192 / 4 keys: factor(2048) instead of factor(8192) = 1."""
    from simulator.training.compute import NONCAUSAL_SPEEDUP

    whole = _attention_s(8192)
    ring = _attention_s(8192, cp=4)
    expected = whole / 4 * (1 + 3 / NONCAUSAL_SPEEDUP) / 4 / ATTENTION_SHAPE["cudnn"].factor(2048, 128)
    assert ring == pytest.approx(expected, rel=1e-9)


def test_generations_it_was_not_measured_on_keep_the_flat_figure():
    """An A100 prices 8 sequences of 1,024 tokens at exactly 1/8 of one of 8,192 (no shape factor)."""
    def attention_s(seq_len: int, micro_batch: int) -> float:
        training = TrainingSpec(model="llama2-7b", seq_len=seq_len, micro_batch=micro_batch, global_batch=8)
        compute = ComputeModel.for_job(gpu_spec("A100-SXM4-80GB"), training)
        return compute.attention_forward_s(transformer(load_model("llama2-7b")), micro_batch, seq_len)

    assert "ampere" not in ATTENTION_SHAPE_ARCHS
    assert attention_s(1024, 8) == pytest.approx(attention_s(8192, 1) / 8, rel=1e-12)


@pytest.mark.parametrize("kernel", sorted(ATTENTION_SHAPE))
def test_the_curve_is_held_beyond_the_measured_keys(kernel):
    """Measured from 1,024 to 16,384 keys: a 128K-key ring step is priced as 16K, a 256-key sample as 1K."""
    shape = ATTENTION_SHAPE[kernel]
    assert shape.factor(131072, 128) == shape.factor(16384, 128) < 1.05
    assert shape.factor(256, 128) == shape.factor(1024, 128)
