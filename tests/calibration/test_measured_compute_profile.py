"""The measured H200 compute profile that ships (benchmarks/data/h200_compute.yaml) loads, and a profile of
bf16 and fp8 GEMMs calibrates a job at its own precision: an fp8 job by the fp8 GEMMs' share of the fp8 peak."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import yaml

from simulator.calibration.apply import predict_calibrated
from simulator.calibration.compute_profile import compute_calibration_from_dict
from simulator.training.predict import predict_step
from topologies.presets import load_preset
from workloads.presets import load_model
from workloads.spec import TrainingSpec

PROFILE = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "h200_compute.yaml"


def _profile():
    return compute_calibration_from_dict(yaml.safe_load(PROFILE.read_text())["compute"], PROFILE.name)


def test_the_shipped_profile_holds_the_table_and_its_provenance():
    """3 x 11^3 grid GEMMs, 24 of the standard set, 238 case shapes x 3 roles; 116 attention points; 1-4 GiB
    copies at 4.2-4.3 TB/s (the H200's 4.8 TB/s datasheet figure at 0.89)."""
    profile = _profile()
    assert profile.gpu_name == "NVIDIA H200" and profile.driver_version == "580.159.04"
    assert len(profile.gemms) == 3 * 11**3 + 24 + 3 * 238 and len(profile.attention) == 116
    assert 4200 < profile.memory_bandwidth_GBps() < 4300
    assert "1500 MHz" in (profile.notes or "")


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_a_mixed_profile_calibrates_each_precision_by_its_own_gemms(precision):
    """The job's precision picks the GEMMs whose median share of their peak replaces the asymptote:
    bf16's of 989 TFLOP/s, fp8's of 1,979."""
    topology, model = load_preset("hgx-h200"), load_model("llama3-8b")
    training = TrainingSpec(model="llama3-8b", global_batch=64, precision=precision)
    peak = {"bf16": 989.0, "fp8": 1979.0}[precision]
    share = statistics.median(g.tflops for g in _profile().gemms if g.dtype == precision) / peak
    calibrated = predict_calibrated(topology, training, model, PROFILE, force=False)
    expected = predict_step(topology, training, model, gemm_efficiency=share)
    assert calibrated.step_time_s == pytest.approx(expected.step_time_s, rel=1e-12)
