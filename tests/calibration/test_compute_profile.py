"""The `compute:` calibration section (simulator/calibration/compute_profile.py) and the GPU
calibration script's behaviour on a machine without torch or a CUDA GPU."""

from __future__ import annotations

import copy
import runpy
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from simulator.calibration.compute_profile import (
    ComputeCalibration,
    attention_forward_flops,
    compute_calibration_from_dict,
    compute_calibration_to_dict,
    gemm_flops,
    layer_fwd_bwd_flops,
)
from simulator.core.errors import CalibrationError

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "compute_h100_example.yaml"


def _section() -> dict[str, Any]:
    document = yaml.safe_load(FIXTURE.read_text())
    assert document["schema_version"] == 1
    section = document["compute"]
    assert isinstance(section, dict)
    return section


def _gemm(tflops: float, time_s: float, dtype: str = "bf16") -> dict[str, Any]:
    """A 1000^3 GEMM (2e9 FLOPs) with the given rate and time."""
    return {"m": 1000, "n": 1000, "k": 1000, "dtype": dtype, "time_s": time_s, "tflops": tflops}


def _minimal(gemms: list[dict[str, Any]]) -> dict[str, Any]:
    return {"gpu_name": "NVIDIA H100 80GB HBM3", "torch_version": "2.5.1", "measured_at": "2025-01-31T12:00:00",
            "gemms": gemms, "layers": [], "memory": []}


def test_fixture_parses_into_a_compute_calibration():
    """The hand-written example loads with every measurement and its provenance."""
    calibration = compute_calibration_from_dict(_section(), source=FIXTURE.name)
    assert isinstance(calibration, ComputeCalibration)
    assert calibration.gpu_name == "NVIDIA H100 80GB HBM3"
    assert (calibration.driver_version, calibration.cuda_version) == ("550.54.15", "12.4")
    assert [g.tflops for g in calibration.gemms] == [690.0, 610.0, 700.0, 680.0]
    assert [layer.model_tflops for layer in calibration.layers] == [450.0, 480.0]
    assert calibration.memory_bandwidth_GBps() == 2900.0
    # median of 610, 680, 690, 700 = (680 + 690) / 2 = 685, against the H100 bf16 dense peak 989
    assert calibration.gemm_efficiency(989.0) == pytest.approx(685.0 / 989.0, rel=1e-12)


def test_round_trip_to_dict_from_dict_is_identical():
    """to_dict -> YAML -> from_dict gives back an equal calibration and an equal dict."""
    calibration = compute_calibration_from_dict(_section(), source=FIXTURE.name)
    data = compute_calibration_to_dict(calibration)
    reloaded = yaml.safe_load(yaml.safe_dump({"schema_version": 1, "compute": data}))["compute"]
    again = compute_calibration_from_dict(reloaded, source="round-trip")
    assert again == calibration
    assert compute_calibration_to_dict(again) == data == _section()


@pytest.mark.parametrize(
    ("section", "index", "field", "factor"),
    [("gemms", 1, "tflops", 1.10), ("layers", 0, "model_tflops", 0.90), ("memory", 0, "bandwidth_GBps", 1.10)],
)
def test_inconsistent_rate_names_the_field(section, index, field, factor):
    """A rate 10 % away from the one its time gives is rejected, naming the source and field path."""
    data = copy.deepcopy(_section())
    data[section][index][field] *= factor
    with pytest.raises(CalibrationError) as caught:
        compute_calibration_from_dict(data, source="compute.yaml")
    message = str(caught.value)
    assert message.startswith(f"compute.yaml: compute.{section}.{index}.{field}: ")
    assert "off by" in message and "\n" not in message


def test_missing_field_names_it():
    """A profile without gpu_name is rejected with the field path and 'missing'."""
    data = _section()
    del data["gpu_name"]
    with pytest.raises(CalibrationError, match=r"^compute\.yaml: compute\.gpu_name: missing \(required\)$"):
        compute_calibration_from_dict(data, source="compute.yaml")


def test_unknown_field_and_non_mapping_are_rejected():
    """A misspelt key, or a section that is not a mapping, is a CalibrationError naming where."""
    data = {**_section(), "gpu_nmae": "x"}
    with pytest.raises(CalibrationError, match=r"compute\.gpu_nmae: Extra inputs are not permitted"):
        compute_calibration_from_dict(data, source="compute.yaml")
    with pytest.raises(CalibrationError, match=r"^compute\.yaml: compute: expected a mapping"):
        compute_calibration_from_dict([1, 2], source="compute.yaml")


def test_unquoted_yaml_timestamp_is_kept_as_iso_string():
    """YAML reads an unquoted date-time as a datetime; it is stored as its ISO 8601 string."""
    data = {**_section(), "measured_at": datetime(2025, 1, 31, 12, tzinfo=UTC)}
    calibration = compute_calibration_from_dict(data, source="compute.yaml")
    assert calibration.measured_at == "2025-01-31T12:00:00+00:00"
    with pytest.raises(CalibrationError, match=r"compute\.measured_at: .*not an ISO 8601 date-time"):
        compute_calibration_from_dict({**_section(), "measured_at": "last tuesday"}, source="compute.yaml")


def test_version_read_as_a_number_asks_for_quotes():
    """An unquoted cuda_version 12.4 (a YAML float) is rejected with a hint to quote it."""
    with pytest.raises(CalibrationError, match=r"compute\.cuda_version: YAML read 12\.4 as a number; quote"):
        compute_calibration_from_dict({**_section(), "cuda_version": 12.4}, source="compute.yaml")


def test_gemm_efficiency_is_the_median_over_peak():
    """Rates 400, 800, 500 TFLOP/s (2e9 FLOPs in 5, 2.5, 4 us): median 500 / peak 1000 = 0.5."""
    gemms = [_gemm(400.0, 5e-6), _gemm(800.0, 2.5e-6), _gemm(500.0, 4e-6)]
    calibration = compute_calibration_from_dict(_minimal(gemms), source="hand")
    assert calibration.gemm_efficiency(1000.0) == 0.5
    with pytest.raises(CalibrationError, match="exceeds peak"):
        calibration.gemm_efficiency(400.0)
    with pytest.raises(CalibrationError, match="no memory measurements"):
        calibration.memory_bandwidth_GBps()


def test_gemm_efficiency_with_mixed_dtypes_needs_one():
    """With bf16 and fp8 GEMMs the median is taken per dtype, chosen by the caller."""
    gemms = [_gemm(400.0, 5e-6), _gemm(800.0, 2.5e-6, dtype="fp8")]
    calibration = compute_calibration_from_dict(_minimal(gemms), source="hand")
    assert calibration.gemm_efficiency(1000.0, dtype="bf16") == 0.4
    assert calibration.gemm_efficiency(2000.0, dtype="fp8") == 0.4
    with pytest.raises(CalibrationError, match="several dtypes"):
        calibration.gemm_efficiency(1000.0)


def test_flop_formulas_match_hand_values():
    """2mnk for a GEMM; 3 x (24 b s h^2 + 4 b s^2 h) for a layer (Narayanan et al. 2021)."""
    assert gemm_flops(2, 3, 4) == 48
    # h = 2, s = 3, b = 1: 3 x (24 x 3 x 4 + 4 x 9 x 2) = 3 x (288 + 72) = 1080
    assert layer_fwd_bwd_flops(hidden=2, seq_len=3, micro_batch=1) == 1080


@given(
    m=st.integers(1, 65536), n=st.integers(1, 65536), k=st.integers(1, 65536),
    time_s=st.floats(1e-7, 10.0, allow_nan=False, allow_infinity=False),
)
def test_gemm_with_rate_from_its_time_always_validates_and_round_trips(m, n, k, time_s):
    """Any GEMM whose rate is computed from its time passes the check and survives to_dict/from_dict."""
    gemm = {"m": m, "n": n, "k": k, "dtype": "bf16", "time_s": time_s, "tflops": gemm_flops(m, n, k) / time_s / 1e12}
    calibration = compute_calibration_from_dict(_minimal([gemm]), source="hypothesis")
    assert compute_calibration_from_dict(compute_calibration_to_dict(calibration), source="again") == calibration


def test_script_without_gpu_exits_2_with_one_line(tmp_path):
    """Here (no torch, no CUDA GPU) the script says so on one stderr line, exits 2, writes nothing."""
    output = tmp_path / "x.yaml"
    result = subprocess.run(
        [sys.executable, "benchmarks/gpu_calibration.py", "-o", str(output)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("gpu_calibration: no CUDA GPU visible (")
    assert lines[0].endswith("); run this on a machine with an NVIDIA GPU")
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert not output.exists()


def test_attention_rates_are_checked_against_their_times():
    """The fixture's attention point: 4 x 32 heads x 4096^2 x 128 x 4 / 2 (causal) = 5.50e11 FLOPs forward;
    a forward rate 10 % off its time, or kv_heads that do not divide heads, is named."""
    calibration = compute_calibration_from_dict(_section(), source=FIXTURE.name)
    (point,) = calibration.attention
    assert attention_forward_flops(4, 32, 4096, 128, causal=True) == pytest.approx(5.4976e11, rel=1e-4)
    assert point.forward_tflops == 320.0
    data = copy.deepcopy(_section())
    data["attention"][0]["forward_tflops"] *= 1.1
    with pytest.raises(CalibrationError, match=r"compute\.attention\.0\.forward_tflops: .*off by"):
        compute_calibration_from_dict(data, source="compute.yaml")
    data = copy.deepcopy(_section())
    data["attention"][0]["kv_heads"] = 5
    with pytest.raises(CalibrationError, match=r"compute\.attention\.0\.kv_heads: 5 does not divide heads 32"):
        compute_calibration_from_dict(data, source="compute.yaml")


def test_gemm_role_is_one_of_a_linear_layers_three_products():
    """role defaults to forward; anything but forward, input_grad or weight_grad is rejected by name."""
    gemm = _gemm(400.0, 5e-6)
    assert compute_calibration_from_dict(_minimal([gemm]), source="x").gemms[0].role == "forward"
    with pytest.raises(CalibrationError, match=r"compute\.gemms\.0\.role: "):
        compute_calibration_from_dict(_minimal([{**gemm, "role": "backward"}]), source="compute.yaml")


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "benchmarks/gpu_calibration.py", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)


def test_script_shapes_need_table_and_a_list_of_triples(tmp_path):
    """--shapes is read before any GPU work: without --table, or holding anything but [m, n, k] of positive
    integers, the script exits 2 with one line naming the entry, and writes nothing."""
    output = tmp_path / "x.yaml"
    shapes = tmp_path / "shapes.json"
    shapes.write_text("[[4096, 4096, 4096]]")
    result = _script("-o", str(output), "--shapes", str(shapes))
    assert (result.returncode, result.stderr.strip()) == (2, "gpu_calibration: --shapes: only with --table")
    shapes.write_text("[[4096, 4096, 4096], [4096, 0, 8]]")
    result = _script("-o", str(output), "--table", "--shapes", str(shapes))
    assert result.returncode == 2
    assert "entry 1: expected [m, n, k] of positive integers, found [4096, 0, 8]" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not output.exists()


def test_table_points_cover_the_grid_and_each_shape_in_three_roles():
    """The grid in bf16 (forward) and fp8 (fast and split accumulation), then each extra shape in bf16 as
    the forward, input-gradient and weight-gradient products."""
    script = runpy.run_path(str(REPO_ROOT / "benchmarks" / "gpu_calibration.py"), run_name="gpu_calibration")
    points = script["table_points"]([(4096, 2688, 7168)])
    dims = len(script["TABLE_DIMS"])
    assert len(points) == 3 * dims**3 + 3
    assert points[-3:] == [(4096, 2688, 7168, "bf16", role) for role in ("forward", "input_grad", "weight_grad")]
    assert {(dtype, role) for *_, dtype, role in points[:-3]} == {("bf16", "forward"), ("fp8", "forward"),
                                                                   ("fp8", "input_grad")}


def test_many_errors_are_named_by_the_first_five():
    """A profile whose 40 GEMMs all carry an unknown key names five of them and counts the rest."""
    gemms = [{**_gemm(400.0, 5e-6), "speed": 1} for _ in range(40)]
    with pytest.raises(CalibrationError) as caught:
        compute_calibration_from_dict(_minimal(gemms), source="compute.yaml")
    message = str(caught.value)
    assert message.count("Extra inputs are not permitted") == 5
    assert message.endswith("; and 35 more")


def test_script_help_states_its_purpose_whole():
    """--help opens with the docstring's whole first paragraph, not a line cut mid-sentence."""
    result = _script("--help")
    assert result.returncode == 0
    assert "save them as the `compute:` section of a calibration profile" in " ".join(result.stdout.split())
