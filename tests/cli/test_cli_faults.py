"""Faults and stragglers the short way on the command line (--link-fault, --straggler) and as a preset with
overrides in a scenario; what the table, the JSON and the reports show of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SMALL = ("--model", "llama2-7b", "--nodes", "2", "--seq-len", "1024", "--micro-batch", "1", "--global-batch", "16")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulator.cli.app", *args], capture_output=True, text=True,
                          timeout=300)


def step(*args: str) -> dict:
    out = run("predict", *SMALL, *args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_link_fault_flag_slows_the_step_wherever_the_nic_is():
    """--link-fault s0/nic3=0.1 and s1/nic6=0.1 give the same step, slower than the healthy one, with the faulty
    server's GPUs as a class of their own."""
    healthy, s0, s1 = step(), step("--link-fault", "s0/nic3=0.1"), step("--link-fault", "s1/nic6=0.1")
    assert s0["step_time_s"] == pytest.approx(s1["step_time_s"], rel=1e-9)
    assert s0["step_time_s"] > healthy["step_time_s"]
    assert set(s0["gpu_idle_by_class"]) == {"s0 (nic3 x0.1)", "others"}
    assert s0["gpu_idle_by_class"]["others"]["gpus"] == 8


def test_straggler_flag_places_a_slow_gpu_and_counts_the_others_wait():
    """--straggler s1/gpu2=1.2: one slow GPU, 15 others idle longer than it by what it computes beyond them."""
    healthy, slow = step(), step("--straggler", "s1/gpu2=1.2")
    assert slow["step_time_s"] > healthy["step_time_s"]
    by_class = slow["gpu_idle_by_class"]
    assert by_class["slow (x1.2)"]["gpus"] == 1 and by_class["others"]["gpus"] == 15
    wait = slow["idle_breakdown_s"]["straggler_wait"]
    assert by_class["others"]["idle_s"] == pytest.approx(by_class["slow (x1.2)"]["idle_s"] + wait, rel=1e-9)
    assert slow["gpu_idle_s"] == pytest.approx((by_class["slow (x1.2)"]["idle_s"] + 15 * by_class["others"]["idle_s"])
                                               / 16, rel=1e-9)


def test_a_preset_with_overrides_in_a_scenario_is_the_flag():
    """examples/degraded-nic.yaml (topology: {preset: dgx-h100, link_faults: [...]}) predicts what the base
    scenario with --link-fault s5/nic3=0.25 predicts."""
    from_file = run("predict", str(EXAMPLES / "degraded-nic.yaml"), "--json")
    from_flag = run("predict", str(EXAMPLES / "base.yaml"), "--link-fault", "s5/nic3=0.25", "--json")
    assert from_file.returncode == 0 and from_flag.returncode == 0, from_file.stderr + from_flag.stderr
    assert json.loads(from_file.stdout)["step_time_s"] == json.loads(from_flag.stdout)["step_time_s"]


def test_compare_shows_the_idle_classes_in_the_table_and_the_page(tmp_path):
    """compare base straggler: the terminal table and the HTML page both carry every row, the straggler's wait
    and the idle time of each class of GPUs among them."""
    page = tmp_path / "what-if.html"
    out = run("compare", str(EXAMPLES / "base.yaml"), str(EXAMPLES / "straggler.yaml"), "--report", str(page))
    assert out.returncode == 0, out.stderr
    html = page.read_text()
    for row in ("others waiting on a straggler", "GPU idle: slow (x1.15)", "GPU idle: others", "waiting on"):
        assert row in out.stdout.replace("\n", " ") or row in out.stdout, row
        assert row in html, row


@pytest.mark.parametrize(("args", "message"), [
    (("--link-fault", "s0/nic3"), "--link-fault 's0/nic3': expected DEVICE=FACTOR"),
    (("--link-fault", "s0/nic3=fast"), "expected DEVICE=FACTOR"),
    (("--link-fault", "s0/nic3=1.5"), "link_faults.0.factor"),
    (("--link-fault", "s9/nic3=0.5"), "no device or role 's9/nic3'"),
    (("--straggler", "s1/gpu2=0.5"), "slowdown"),
    (("--straggler", "s7=1.2"), "the cluster has servers s0-s1"),
    (("--straggler", "s1/gpu9=1.2"), "a server has gpu0-gpu7"),
    (("--straggler", "gpu3=1.2"), "expected a GPU (s3/gpu2), a server (s3) or a rank (17)"),
    (("--straggler", "s1=1e400"), "slowdown"),
])
def test_bad_faults_and_stragglers_are_one_line_errors(args: tuple[str, ...], message: str):
    """A malformed, out-of-range or absent device: exit 2 with one line naming it."""
    out = run("predict", *SMALL, *args)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_collective_takes_link_faults():
    """collective --link-fault s2/nic3=0.1 on 4 x DGX H100: the 1 GiB all_gather of a fault on s0 (over 2x healthy)."""
    def time_us(*extra: str) -> float:
        out = run("collective", "--topology", "dgx-h100", "--nodes", "4", "--op", "all_gather", "-b", "1G", "-e", "1G",
                  "--json", *extra)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["rows"][0]["time_us"]
    healthy, s2, s0 = time_us(), time_us("--link-fault", "s2/nic3=0.1"), time_us("--link-fault", "s0/nic3=0.1")
    assert s2 == s0 > 2 * healthy
