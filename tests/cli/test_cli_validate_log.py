"""`validate --log`: one nccl-tests log and the cluster it ran on, without a manifest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "measurements" / "fixtures"
MANIFEST = FIXTURES / "published_manifest.yaml"
H100_2X8 = ["--gpu", "H100-SXM5-80GB", "--gpus-per-node", "8", "--intra-node", "nvswitch-nvlink4", "--nodes", "2",
            "--transport", "ib", "--nics-per-node", "8", "--nic-gbps", "400"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulator.cli.app", *args], capture_output=True, text=True)


def _log_report(stdout: str, file: str) -> dict:
    return next(log for log in json.loads(stdout)["logs"] if log["file"] == file)


def test_one_log_with_its_cluster_as_flags_is_its_manifest_entry():
    """The manifest's fields as flags give the entry's report row for row (an abridged device list warns)."""
    file = "nccl_tests_abridged_devices_2x8.txt"
    listed = run("validate", "--manifest", str(MANIFEST), "--json")
    alone = run("validate", "--log", str(FIXTURES / file), "--op", "all_reduce", *H100_2X8, "--json")
    assert listed.returncode == 0 and alone.returncode == 0, alone.stderr
    assert _log_report(alone.stdout, file) == _log_report(listed.stdout, file)
    assert "abridged" in alone.stderr


def test_one_log_on_a_preset_names_its_own_collective():
    """A JSON log (-J) names its tool; a preset and --nodes describe the cluster; 16 ranks are predicted."""
    out = run("validate", "--log", str(FIXTURES / "nccl_tests_all_reduce_2x8.json"), "--topology", "dgx-h100",
              "--nodes", "2", "--json")
    assert out.returncode == 0, out.stderr
    (log,) = json.loads(out.stdout)["logs"]
    assert log["collective"] == "all_reduce" and log["points"] == 4


def test_run_picks_one_of_several_runs():
    """A file of two single-node runs (nccl-tests without MPI under mpirun): --run 2 takes the second, as the
    manifest's `run: 2` does."""
    file = "nccl_tests_two_runs_no_mpi_1x8.txt"
    listed = run("validate", "--manifest", str(MANIFEST), "--json")
    alone = run("validate", "--log", str(FIXTURES / file), "--op", "allreduce", "--gpu", "H100-SXM5-80GB",
                "--gpus-per-node", "8", "--intra-node", "nvswitch-nvlink4", "--run", "2", "--json")
    assert alone.returncode == 0, alone.stderr
    assert _log_report(alone.stdout, file) == _log_report(listed.stdout, file)


@pytest.mark.parametrize(("args", "needle"), [
    (["validate"], "give --manifest (logs listed with their clusters) or --log"),
    (["validate", "--manifest", str(MANIFEST), "--log", str(FIXTURES / "nccl_tests_all_reduce_2x8.json")],
     "not both"),
    (["validate", "--manifest", str(MANIFEST), "--nodes", "2", "--gpu", "H100"], "--nodes, --gpu: with --manifest"),
    (["validate", "--log", str(FIXTURES / "nccl_tests_all_reduce_2x8.json")], "--log needs the cluster"),
    (["validate", "--log", str(FIXTURES / "nccl_tests_abridged_devices_2x8.txt"), "--topology", "dgx-h100",
      "--nodes", "2"], "does not say which collective it ran"),
    (["validate", "--log", str(FIXTURES / "nccl_tests_all_reduce_2x8.json"), "--topology", "dgx-h100",
      "--op", "allredux"], "op: unknown collective 'allredux'"),
    (["validate", "--log", str(FIXTURES / "nccl_tests_all_reduce_2x8.json"), "--topology", "dgx-h100",
      "--nodes", "2", "--run", "0"], "run: runs are counted from 1"),
    (["validate", "--log", "no/such/log.txt", "--topology", "dgx-h100"], "not found"),
    (["validate", "--log", str(FIXTURES / "nccl_tests_all_reduce_2x8.json"), "--topology", "dgx-h100",
      "--nodes", "1"], "ranks"),
])
def test_bad_input_exits_2_naming_the_option(args, needle):
    """Each mistake: exit 2, one line naming the option or the file, no traceback."""
    out = run(*args)
    assert out.returncode == 2
    assert needle in out.stderr and "Traceback" not in out.stderr
