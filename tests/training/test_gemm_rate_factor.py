"""A part's GEMM rate against its generation's reference part, from the measured maximum achievable matmul rates
(simulator.training.compute.gemm_rate_factor; topologies/data/gpus.yaml [MAMF])."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.training.compute import GEMM_EFFICIENCY, GEMM_REFERENCE_GPU, ComputeModel, gemm_rate_factor
from topologies.hardware import gpu_spec, known_gpus
from workloads.model import transformer
from workloads.spec import ModelSpec

MODEL = ModelSpec(name="m", layers=4, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, gated_mlp=True,
                  vocab=128256, max_seq_len=8192)
BLOCK = transformer(MODEL).blocks[0][0]


@pytest.mark.parametrize(("gpu", "factor"), [
    ("GB200", (1822.0 / 2500) / (1745.0 / 2250)),  # 72.9% of its peak against B200's 77.6%
    ("B300-288GB", (1769.0 / 2250) / (1745.0 / 2250)),
    ("GH200-144GB", (828.6 / 989) / (794.5 / 989)),
    ("A100-PCIe-80GB", (252.9 / 312) / (271.2 / 312)),
    # presumed: B300's rate as GB200's is B200's, 1,769.0 x 1,822.0 / 1,745.0 = 1,847.1, kept as 1,847.0
    ("GB300", (1847.0 / 2500) / (1745.0 / 2250)),
])
def test_the_factor_is_the_measured_share_over_the_reference_parts(gpu, factor):
    """By hand from the table: GB200 0.940, B300 1.014, GH200 1.043, A100 PCIe 0.933, GB300 0.953."""
    assert gemm_rate_factor(gpu_spec(gpu)) == pytest.approx(factor, rel=1e-9)


@pytest.mark.parametrize("gpu", ["H200-SXM-141GB", "A100-SXM4-40GB", *GEMM_REFERENCE_GPU.values()])
def test_the_reference_parts_and_their_measured_twins_keep_the_generation_share(gpu):
    assert gemm_rate_factor(gpu_spec(gpu)) == 1.0


@pytest.mark.parametrize("gpu", [name for name in known_gpus() if gpu_spec(name).mamf_bf16_tflops is None])
def test_a_part_without_a_measured_rate_keeps_its_generation_share(gpu):
    assert gemm_rate_factor(gpu_spec(gpu)) == 1.0


def test_every_measured_rate_is_below_its_peak():
    for name in known_gpus():
        spec = gpu_spec(name)
        if spec.mamf_bf16_tflops is not None:
            assert 0.5 * spec.peak_tflops("bf16") < spec.mamf_bf16_tflops < spec.peak_tflops("bf16")


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_a_gb200_block_gemm_runs_at_the_measured_rate_over_b200s(precision):
    """Compute-bound GEMMs of the same shapes: GB200 over B200 takes 1,745 / 1,822 of the time (the two parts'
    measured matmul rates), not 2,250 / 2,500 (their datasheet peaks)."""
    gb200 = ComputeModel(gpu_spec("GB200"), precision).gemms_s(BLOCK, 1, 8192)
    b200 = ComputeModel(gpu_spec("B200-180GB"), precision).gemms_s(BLOCK, 1, 8192)
    for name, seconds in gb200.items():
        assert seconds / b200[name] == pytest.approx(1745.0 / 1822.0, rel=1e-6)


def test_a_measured_asymptote_replaces_the_table_and_the_factor():
    """A compute calibration measures the user's own part: its asymptote is taken as it is."""
    gb200 = ComputeModel(gpu_spec("GB200"), "bf16", gemm_efficiency_asymptote=0.7)
    b200 = ComputeModel(gpu_spec("B200-180GB"), "bf16", gemm_efficiency_asymptote=0.7)
    assert gb200.gemm_efficiency(8192, 8192, 8192) == b200.gemm_efficiency(8192, 8192, 8192)
    uncalibrated = ComputeModel(gpu_spec("GB200"), "bf16").gemm_efficiency(8192, 8192, 8192)
    assert uncalibrated == pytest.approx(GEMM_EFFICIENCY["blackwell"] * gemm_rate_factor(gpu_spec("GB200"))
                                         * 8192 / (8192 + 512))


@given(st.floats(min_value=1000.0, max_value=2400.0), st.floats(min_value=1.0, max_value=1.3))
def test_a_faster_measured_rate_never_slows_a_gemm(rate: float, gain: float):
    """Property: of two GB200-like parts differing only in their measured matmul rate, the faster one's GEMMs
    take no longer (and, compute-bound, exactly rate / (gain x rate) of the time)."""
    slow = dataclasses.replace(gpu_spec("GB200"), mamf_bf16_tflops=rate)
    fast = dataclasses.replace(gpu_spec("GB200"), mamf_bf16_tflops=rate * gain)
    slow_s = ComputeModel(slow, "bf16").gemms_s(BLOCK, 1, 8192)
    fast_s = ComputeModel(fast, "bf16").gemms_s(BLOCK, 1, 8192)
    for name, seconds in slow_s.items():
        assert fast_s[name] <= seconds
        assert fast_s[name] / seconds == pytest.approx(1.0 / gain, rel=1e-9)
