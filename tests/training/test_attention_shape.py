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
    """FlashAttention-2 at 2,048 keys, head dim 128: (2048 / 2826) / (8192 / 8970) = 0.7935; cuDNN at 8,192
    keys, head dim 64: a_64 / a_128 = 0.792 / 1.042 = 0.7601; head dim 112 halfway between 96 and 128."""
    assert ATTENTION_SHAPE["flash2"].factor(2048, 128) == pytest.approx((2048 / 2826) / (8192 / 8970), rel=1e-9)
    assert ATTENTION_SHAPE["cudnn"].factor(8192, 64) == pytest.approx(0.792 / 1.042, rel=1e-9)
    cudnn = ATTENTION_SHAPE["cudnn"]
    assert cudnn.factor(8192, 112) == pytest.approx((cudnn.factor(8192, 96) + 1.0) / 2, rel=1e-9)


def test_an_80_wide_head_is_slower_than_a_64_wide_one_as_measured():
    """Head dim 80 runs padded to 96 (80 / 96 of 96's rate, about); both kernels measured so."""
    for shape in ATTENTION_SHAPE.values():
        assert shape.factor(8192, 80) < shape.factor(8192, 64) < shape.factor(8192, 96) < shape.factor(8192, 128)


@given(st.sampled_from(sorted(ATTENTION_SHAPE)), st.integers(1, 1 << 20), st.integers(1, 1 << 20),
       st.integers(16, 512))
def test_more_keys_are_never_less_efficient(kernel, s1, s2, head_dim):
    shape = ATTENTION_SHAPE[kernel]
    assert shape.factor(max(s1, s2), head_dim) >= shape.factor(min(s1, s2), head_dim)


def test_constants_are_what_the_documented_fit_gives():
    """benchmarks/fit_compute_curves.py over benchmarks/data/h200_compute.yaml reproduces every constant of
    ATTENTION_SHAPE to the precision it is written with (the SDPA backend 'flash' is the flash2 kernel)."""
    script = runpy.run_path(str(ROOT / "benchmarks" / "fit_compute_curves.py"), run_name="fit_compute_curves")
    profile = script["compute_calibration_from_dict"](
        script["yaml"].safe_load(script["DEFAULT_PROFILE"].read_text())["compute"], "h200_compute.yaml")
    fits = {fit["backend"]: fit for fit in script["fit_attention"](profile, "H200-SXM-141GB")}
    for backend, kernel in (("flash", "flash2"), ("cudnn", "cudnn")):
        shape = ATTENTION_SHAPE[kernel]
        assert list(fits[backend]["amplitudes"]) == [d for d, _ in shape.amplitudes]
        for d, amplitude in shape.amplitudes:
            assert fits[backend]["amplitudes"][d] == pytest.approx(amplitude, abs=0.002)
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
    8,192 but take 1 / factor(1024) = 1.55 times longer than that share."""
    ratio = _attention_s(1024, micro_batch=8) / (_attention_s(8192) / 8)
    assert ratio == pytest.approx(1.0 / ATTENTION_SHAPE["cudnn"].factor(1024, 128), rel=1e-9)
    assert ratio == pytest.approx(1.55, abs=0.01)


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
def test_the_curve_is_held_beyond_the_measured_range(kernel):
    """Measured from 512 to 65,536 keys and head dims 64 to 256: a 256K-key ring step is priced as 64K, a
    256-key sample as 512, a 512-wide head as 256, a 32-wide one as 64."""
    shape = ATTENTION_SHAPE[kernel]
    assert shape.factor(262144, 128) == shape.factor(65536, 128) < 1.1
    assert shape.factor(256, 128) == shape.factor(512, 128)
    assert shape.factor(8192, 512) == shape.factor(8192, 256) and shape.factor(8192, 32) == shape.factor(8192, 64)
