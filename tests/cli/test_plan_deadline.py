"""`plan --train-tokens T --deadline-days D`: the fewest GPUs and the cheapest that finish by the deadline at P90."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulator.cli.app", "plan", *args], capture_output=True, text=True)


JOB = ("--model", "llama2-7b", "--topology", "dgx-h100", "--global-batch", "256", "--seq-len", "4096",
       "--keep", "2", "--workers", "1", "--strategies", "fsdp", "--recompute", "none", "--micro-batch", "2")


def test_fewest_and_cheapest_by_deadline():
    """100B tokens by 10 days: one node takes ~13 days, two ~7: two nodes are the fewest; the cheapest is the row
    of fewest GPU-hours among those finishing in time; a row per node count with its curve."""
    out = run(*JOB, "--train-tokens", "100B", "--deadline-days", "10", "--node-counts", "1,2,4", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    rows = data["rows"]
    assert [r["nodes"] for r in rows] == [1, 2, 4]
    p90 = [r["run"]["time_to_train_p90_s"] / 86400 for r in rows]
    assert p90[0] > 10 >= p90[1] > p90[2]
    assert data["fewest_gpus"]["nodes"] == 2
    meeting = [r for r in rows if r["run"]["time_to_train_p90_s"] <= 10 * 86400]
    assert data["cheapest"]["run"]["gpu_hours"] == min(r["run"]["gpu_hours"] for r in meeting)


@pytest.mark.parametrize(("args", "needle"), [
    (("--deadline-days", "10"), "give both"),
    (("--train-tokens", "1T", "--deadline-days", "-1"), "--deadline-days"),
    (("--train-tokens", "1T", "--deadline-days", "5", "--node-counts", "0,2"), "--node-counts"),
])
def test_bad_deadline_input_exits_2(args, needle):
    out = run(*JOB, *args)
    assert out.returncode == 2 and needle in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
