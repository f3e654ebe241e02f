"""The measured compute profiles that ship (benchmarks/data/h200_compute.yaml, h100_compute.yaml) load; a profile
of bf16 and fp8 GEMMs calibrates a job at its own precision (an fp8 job by the fp8 GEMMs' share of the fp8 peak);
and the curves fitted on the H200 table hold on the H100's, which the fit did not see."""

from __future__ import annotations

import json
import runpy
import statistics
from pathlib import Path

import pytest
import yaml

from simulator.calibration.apply import predict_calibrated
from simulator.calibration.compute_profile import compute_calibration_from_dict
from simulator.training.compute import fp8_gemm_ratio
from simulator.training.predict import predict_step
from topologies.presets import load_preset
from workloads.presets import load_model
from workloads.spec import TrainingSpec

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
PROFILE = BENCHMARKS / "data" / "h200_compute.yaml"
H100_PROFILE = BENCHMARKS / "data" / "h100_compute.yaml"


def _profile(path=PROFILE):
    return compute_calibration_from_dict(yaml.safe_load(path.read_text())["compute"], path.name)


def test_the_shipped_profile_holds_the_table_and_its_provenance():
    """3 x 11^3 grid GEMMs, 24 of the standard set, 238 case shapes x 3 roles; 116 attention points; 1-4 GiB
    copies at 4.2-4.3 TB/s (the H200's 4.8 TB/s datasheet figure at 0.89)."""
    profile = _profile()
    assert profile.gpu_name == "NVIDIA H200" and profile.driver_version == "580.159.04"
    assert len(profile.gemms) == 3 * 11**3 + 24 + 3 * 238 and len(profile.attention) == 116
    assert 4200 < profile.memory_bandwidth_GBps() < 4300
    assert "1500 MHz" in (profile.notes or "")


def test_the_h100_profile_times_the_same_points():
    """The H100 table holds the H200's points, shape for shape; its 1-4 GiB copies run at 3.0-3.1 TB/s (the
    H100 SXM's 3.35 TB/s datasheet figure at 0.91)."""
    h100, h200 = _profile(H100_PROFILE), _profile()
    assert h100.gpu_name == "NVIDIA H100 80GB HBM3" and "1440 MHz" in (h100.notes or "")
    assert [(g.m, g.n, g.k, g.dtype, g.role) for g in h100.gemms] == [(g.m, g.n, g.k, g.dtype, g.role)
                                                                      for g in h200.gemms]
    assert [(a.backend, a.heads, a.seq_len, a.head_dim, a.causal) for a in h100.attention] == [
        (a.backend, a.heads, a.seq_len, a.head_dim, a.causal) for a in h200.attention]
    assert 3000 < h100.memory_bandwidth_GBps() < 3100


def test_the_h200_curves_hold_on_the_h100():
    """benchmarks/fit_compute_curves.py --check: the GEMM ramps and attention curves fitted on the H200 table
    (the attention ones are the compute model's ATTENTION_SHAPE) price the H100's points, which the fit did not
    see, within 5% median |error| each (measured: 2.1-4.6%). Same die and power limit: bf16 GEMMs run at
    0.98-1.03 of the H200's rate shape for shape (measured medians 1.00-1.02), attention at 0.95-1.0 (0.97-0.99)."""
    script = runpy.run_path(str(BENCHMARKS / "fit_compute_curves.py"), run_name="fit_compute_curves")
    h200 = _profile()
    fits = {"gemms": script["fit_gemms"](h200, "H200-SXM-141GB"),
            "attention": script["fit_attention"](h200, "H200-SXM-141GB")}
    checked = script["check"](fits, h200, _profile(H100_PROFILE), "H100-SXM5-80GB")
    assert len(checked["gemms"]) == 5 and len(checked["attention"]) == 2
    for curve in checked["gemms"] + checked["attention"]:
        assert curve["points"] >= 50 and curve["median_abs_error"] < 0.05, curve
    for curve in checked["gemms"]:
        if curve["dtype"] == "bf16":
            assert 0.98 <= curve["rate_ratio"]["median"] <= 1.03, curve
    for curve in checked["attention"]:
        assert 0.95 <= curve["rate_ratio"]["median"] <= 1.0, curve


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_a_mixed_profile_calibrates_each_precision_by_its_own_gemms(precision):
    """The job's precision picks the GEMMs whose median share of their peak replaces the asymptote:
    bf16's of 989 TFLOP/s, fp8's of 1,979, which an fp8 job's forward GEMMs then reach as measured (the
    asymptote is the share over the forward fp8 ratio (fp8_gemm_ratio), which the compute model applies)."""
    topology, model = load_preset("hgx-h200"), load_model("llama3-8b")
    training = TrainingSpec(model="llama3-8b", global_batch=64, precision=precision)
    peak = {"bf16": 989.0, "fp8": 1979.0}[precision]
    share = statistics.median(g.tflops for g in _profile().gemms if g.dtype == precision) / peak
    calibrated = predict_calibrated(topology, training, model, PROFILE, force=False)
    asymptote = share / fp8_gemm_ratio("hopper", "forward") if precision == "fp8" else share
    expected = predict_step(topology, training, model, gemm_efficiency=asymptote)
    assert calibrated.step_time_s == pytest.approx(expected.step_time_s, rel=1e-12)


def test_the_check_option_prints_the_held_out_figures(capsys, tmp_path):
    """`fit_compute_curves.py PROFILE --check OTHER --json` adds a `check` object naming the other profile, with
    a figure per fitted curve; an unknown GPU in OTHER exits 2 naming the file."""
    script = runpy.run_path(str(BENCHMARKS / "fit_compute_curves.py"), run_name="fit_compute_curves")
    assert script["main"]([str(PROFILE), "--check", str(H100_PROFILE), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["check"]["gpu"] == "H100-SXM5-80GB" and document["check"]["profile"] == str(H100_PROFILE)
    assert len(document["check"]["gemms"]) == len(document["gemms"])
    assert [a["backend"] for a in document["check"]["attention"]] == [a["backend"] for a in document["attention"]]
    unknown = tmp_path / "other.yaml"
    unknown.write_text(H100_PROFILE.read_text().replace("gpu_name: NVIDIA H100 80GB HBM3", "gpu_name: NVIDIA Z100"))
    assert script["main"]([str(PROFILE), "--check", str(unknown)]) == 2
    assert f"{unknown}: no GPU table entry for 'NVIDIA Z100'" in capsys.readouterr().err
