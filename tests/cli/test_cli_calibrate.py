"""`calibrate`, `crossval` and --calibration: outputs, provenance, and bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nccl-tests"
ABCI_V100 = ["v100x4-1node-4gpu-allreduce-abci-edr.txt", "v100x4-2node-allreduce-abci-edr.txt",
             "v100x4-4node-allreduce-abci-edr.txt"]
needs_shared = pytest.mark.skipif(not (SHARED / "manifest.yaml").exists(), reason="shared measured data not present")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulator.cli.app", *args], capture_output=True, text=True)


def _only(files: list[str]) -> list[str]:
    return [arg for name in files for arg in ("--only", name)]


@needs_shared
def test_calibrate_writes_a_profile_with_provenance(tmp_path):
    """A profile: schema version, clustersim version, date, fitted values with priors and bounds,
    the source logs with their rows and in-sample error before and after."""
    out = tmp_path / "abci-v.yaml"
    result = run("calibrate", "--manifest", str(SHARED / "manifest.yaml"), *_only(ABCI_V100[:2]), "-o", str(out))
    assert result.returncode == 0, result.stderr
    profile = yaml.safe_load(out.read_text())
    assert profile["schema_version"] == 1 and profile["clustersim_version"] and profile["created"]
    (section,) = profile["sections"]
    assert section["hardware"] == {"gpu": "V100-SXM2-16GB", "intra_node": "nvlink2-full-mesh-4", "transport": "ib"}
    assert {s["file"] for s in section["sources"]} == set(ABCI_V100[:2])
    for p in section["parameters"].values():
        assert p["bounds"][0] <= p["value"] <= p["bounds"][1]
    assert sum(s["median_abs_pct_error_fitted"] for s in section["sources"]) <= sum(
        s["median_abs_pct_error_prior"] for s in section["sources"])


@needs_shared
def test_calibrated_validate_and_collective_use_the_profile(tmp_path):
    """--calibration changes predictions for that hardware, and is refused on other hardware."""
    out = tmp_path / "abci-v.yaml"
    assert run("calibrate", "--manifest", str(SHARED / "manifest.yaml"), *_only(ABCI_V100[:2]),
               "-o", str(out)).returncode == 0
    args = ["collective", "--topology", "abci-v", "--nodes", "4", "-b", "1M", "-e", "1M", "--json"]
    prior = json.loads(run(*args).stdout)["rows"][0]["time_us"]
    calibrated = json.loads(run(*args, "--calibration", str(out)).stdout)["rows"][0]["time_us"]
    assert calibrated != prior
    other = run("collective", "--topology", "dgx-h100", "--nodes", "2", "--calibration", str(out))
    assert other.returncode == 2 and "force" in other.stderr
    assert run("collective", "--topology", "dgx-h100", "--nodes", "2", "--calibration", str(out),
               "--force-calibration", "-e", "1M").returncode == 0


@needs_shared
def test_crossval_by_nodes_reports_prior_and_calibrated(tmp_path):
    """Fit on <= 2 nodes, predict 4: both error figures for the held-out log, as JSON."""
    result = run("crossval", "--manifest", str(SHARED / "manifest.yaml"), *_only(ABCI_V100),
                 "--group-by", "nodes", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [h["file"] for h in report["held_out"]] == [ABCI_V100[2]]
    held = report["held_out"][0]
    assert held["prior"]["ge_1MiB"]["points"] == held["calibrated"]["ge_1MiB"]["points"] == 6


def _copy_manifest(tmp_path: Path, entries: list[dict]) -> Path:
    for entry in entries:
        source = SHARED / entry["file"]
        if source.exists():
            shutil.copy(source, tmp_path / entry["file"])
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump(entries))
    return manifest


@needs_shared
def test_a_log_that_does_not_match_its_cluster_writes_nothing(tmp_path):
    """A log of 16 ranks described as 1 node x 8 GPUs: exit 2 naming it, and no profile written."""
    entry = {"file": "v100x4-2node-allreduce-abci-edr.txt", "collective": "all_reduce", "gpu": "V100-SXM2-16GB",
             "gpus_per_node": 4, "nodes": 1, "intra_node": "nvlink2-full-mesh-4"}
    manifest = _copy_manifest(tmp_path, [entry])
    out = tmp_path / "p.yaml"
    result = run("calibrate", "--manifest", str(manifest), "-o", str(out))
    assert result.returncode == 2 and "ranks" in result.stderr
    assert not out.exists() and not list(tmp_path.glob(".p.yaml*"))


def test_a_manifest_naming_a_missing_file_writes_nothing(tmp_path):
    """A manifest entry whose log is missing: exit 2 naming the file; no profile."""
    manifest = _copy_manifest(tmp_path, [{"file": "nope.txt", "collective": "all_reduce", "gpu": "H100-SXM5-80GB",
                                          "gpus_per_node": 8, "nodes": 1, "intra_node": "nvswitch-nvlink4"}])
    out = tmp_path / "p.yaml"
    result = run("calibrate", "--manifest", str(manifest), "-o", str(out))
    assert result.returncode == 2 and "nope.txt" in result.stderr
    assert not out.exists()


def test_a_profile_from_another_schema_is_refused(tmp_path):
    """--calibration with a profile of another schema version: exit 2 naming the version."""
    profile = tmp_path / "old.yaml"
    profile.write_text("schema_version: 0\nsections: []\n")
    result = run("collective", "--calibration", str(profile), "-e", "1M")
    assert result.returncode == 2 and "schema_version 0" in result.stderr
