"""A manifest entry that cannot be used is skipped with its reason and the other logs load: one bad entry in a
manifest of many logs does not hide the rest (simulator.measurements.load). --strict refuses instead, and a
manifest none of whose entries can be used is refused either way."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.core.errors import ConfigError
from simulator.measurements.load import read_measured

FIXTURES = Path(__file__).parent / "fixtures"
GOOD = """\
- file: nccl_tests_abridged_devices_2x8.txt
  collective: all_reduce
  gpu: H100-SXM5-80GB
  gpus_per_node: 8
  nodes: 2
  intra_node: nvswitch-nvlink4
  inter_node: {transport: ib, nics_per_node: 8, nic_gbps: 400}
"""
UNKNOWN_GPU = GOOD.replace("nccl_tests_abridged_devices_2x8.txt", "copy.txt").replace("H100-SXM5-80GB",
                                                                                   "Hypothetical-X1")
MISSING_FIELD = "- file: other.txt\n  collective: all_reduce\n"
MISSING_FILE = GOOD.replace("nccl_tests_abridged_devices_2x8.txt", "absent.txt")


def _folder(tmp_path: Path, text: str) -> Path:
    shutil.copy(FIXTURES / "nccl_tests_abridged_devices_2x8.txt", tmp_path)
    shutil.copy(FIXTURES / "nccl_tests_abridged_devices_2x8.txt", tmp_path / "copy.txt")
    path = tmp_path / "manifest.yaml"
    path.write_text(text)
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulator.cli.app", *args], capture_output=True, text=True)


def test_bad_entries_are_skipped_with_their_reasons(tmp_path: Path):
    """Three unusable entries (a GPU the table lacks, a missing field, a missing file) beside a good one: the
    good one loads; each of the others is reported once, naming its file and what was wrong."""
    warned: list[str] = []
    loaded = read_measured(_folder(tmp_path, GOOD + UNKNOWN_GPU + MISSING_FIELD + MISSING_FILE), None, warned.append)
    assert [log.entry.file for log in loaded.logs] == ["nccl_tests_abridged_devices_2x8.txt"]
    reasons = {s.file: s.reason for s in loaded.skipped}
    assert set(reasons) == {"copy.txt", "other.txt", "absent.txt"}
    assert "gpu 'Hypothetical-X1' unknown" in reasons["copy.txt"]
    assert "field 'gpu': missing (required)" in reasons["other.txt"]
    assert "absent.txt" in reasons["absent.txt"]
    assert sum(w.startswith("skipped:") for w in warned) == 3


def test_strict_refuses_and_nothing_usable_is_refused(tmp_path: Path):
    manifest = _folder(tmp_path, GOOD + UNKNOWN_GPU)
    with pytest.raises(ConfigError, match="Hypothetical-X1"):
        read_measured(manifest, None, lambda _: None, strict=True)
    with pytest.raises(ConfigError, match="no entry could be used: ") as info:
        read_measured(_folder(tmp_path, UNKNOWN_GPU + MISSING_FIELD), None, lambda _: None)
    assert "Hypothetical-X1" in str(info.value) and "field 'gpu': missing" in str(info.value)
    with pytest.raises(ConfigError) as info:  # one entry: its own reason alone
        read_measured(_folder(tmp_path, UNKNOWN_GPU), None, lambda _: None)
    assert str(info.value).startswith(f"{tmp_path / 'manifest.yaml'}: entry copy.txt: ")
    assert "no entry could be used" not in str(info.value)


def test_only_can_name_a_skipped_entry(tmp_path: Path):
    """--only with a file whose entry was set aside selects it (and so reports why it was skipped), rather than
    calling it not listed."""
    manifest = _folder(tmp_path, GOOD + MISSING_FIELD)
    with pytest.raises(ConfigError, match="field 'gpu': missing"):
        read_measured(manifest, ["other.txt"], lambda _: None)


def test_validate_reports_the_others_and_lists_the_skipped(tmp_path: Path):
    """`clustersim validate` exits 0 with the good log's rows, the skipped entry in the JSON's `skipped` and on
    stderr; --strict exits 2 with one line naming it."""
    manifest = _folder(tmp_path, GOOD + UNKNOWN_GPU)
    out = _run("validate", "--manifest", str(manifest), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert [log["file"] for log in report["logs"]] == ["nccl_tests_abridged_devices_2x8.txt"]
    assert [s["file"] for s in report["skipped"]] == ["copy.txt"]
    assert "Hypothetical-X1" in report["skipped"][0]["reason"] and "Hypothetical-X1" in out.stderr
    table = _run("validate", "--manifest", str(manifest))
    assert table.returncode == 0 and "skipped:" in table.stdout and "copy.txt" in table.stdout
    out = _run("validate", "--manifest", str(manifest), "--strict")
    errors = [line for line in out.stderr.strip().splitlines() if not line.startswith("warning:")]
    assert out.returncode == 2 and len(errors) == 1 and "Hypothetical-X1" in errors[0]


SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nccl-tests"
ABCI = "a100x8-1node-8gpu-allreduce-abci-hdr.txt"


@pytest.mark.skipif(not (SHARED / ABCI).is_file(), reason="../shared/data not beside the checkout")
def test_calibrate_fits_on_the_usable_entries_and_strict_writes_nothing(tmp_path: Path):
    """`calibrate` over a manifest of one good log and one entry with a GPU the table lacks: it warns naming the
    entry and writes a profile from the good log; with --strict it exits 2 and writes nothing."""
    shutil.copy(SHARED / ABCI, tmp_path / ABCI)
    good = (f"- file: {ABCI}\n  collective: all_reduce\n  gpu: A100-SXM4-40GB\n  gpus_per_node: 8\n  nodes: 1\n"
            "  intra_node: nvswitch-nvlink3\n  nccl: 2.8.4\n")
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(good + good.replace(ABCI, "copy.txt").replace("A100-SXM4-40GB", "Hypothetical-X1"))
    shutil.copy(SHARED / ABCI, tmp_path / "copy.txt")
    out = _run("calibrate", "--manifest", str(manifest), "-o", str(tmp_path / "p.yaml"), "--max-nfev", "3")
    assert out.returncode == 0, out.stderr
    assert "skipped" in out.stderr and "Hypothetical-X1" in out.stderr and (tmp_path / "p.yaml").is_file()
    strict = _run("calibrate", "--manifest", str(manifest), "-o", str(tmp_path / "q.yaml"), "--strict")
    assert strict.returncode == 2 and "Hypothetical-X1" in strict.stderr and not (tmp_path / "q.yaml").exists()


@pytest.mark.parametrize(("env", "named"), [
    ("NCCL_ALGO=bogus", "NCCL_ALGO"),
    ("NCCL_PROTO=LL256", "NCCL_PROTO"),
    ("NCCL_BUFFSIZE=8M", "NCCL_BUFFSIZE"),
    ("NCCL_MAX_NCHANNELS=zero", "NCCL_MAX_NCHANNELS"),
    ("NCCL_NCHANNELS_PER_NET_PEER=-2", "NCCL_NCHANNELS_PER_NET_PEER"),
    ("NCCL_IB_QPS_PER_CONNECTION=999", "NCCL_IB_QPS_PER_CONNECTION"),
])
def test_an_nccl_variable_it_cannot_take_sets_the_entry_aside(tmp_path: Path, env: str, named: str):
    """A value a prediction could not read skips its entry when the logs load, naming the field and the variable;
    the manifest's other logs are predicted, as with any other bad field."""
    bad = GOOD.replace("nccl_tests_abridged_devices_2x8.txt", "copy.txt") + f"  env: {env}\n"
    loaded = read_measured(_folder(tmp_path, GOOD + bad), None, lambda _: None)
    assert [log.entry.file for log in loaded.logs] == ["nccl_tests_abridged_devices_2x8.txt"]
    (skipped,) = loaded.skipped
    assert skipped.file == "copy.txt" and "field 'env'" in skipped.reason and named in skipped.reason
