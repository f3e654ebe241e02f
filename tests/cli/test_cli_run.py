"""`predict` with a run: --train-tokens, --failures, --checkpoint-interval and the scenario's `run:`; bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulator.cli.app", *args], capture_output=True, text=True)


def test_predict_json_gains_the_run():
    """--train-tokens adds `run`: P10 <= P50 <= P90, at least the failure-free time, and the lost time by cause."""
    out = run("predict", "--train-tokens", "1T", "--failures", "llama3", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    r = data["run"]
    assert r["time_to_train_p10_s"] <= r["time_to_train_s"] <= r["time_to_train_p90_s"]
    assert r["time_to_train_p10_s"] >= data["time_to_train_s"] * (1 - 1e-9)
    assert set(r["lost_s_by_cause"]) == {"checkpoint", "lost_work", "restart", "spare_wait"}
    assert 0 < r["goodput_fraction"] <= 1 and r["gpu_hours"] >= data["gpu_hours"]
    assert "run" not in json.loads(run("predict", "--json").stdout)


def test_scenario_run_section(tmp_path: Path):
    """A scenario's `run:` section is used; the options override it."""
    scenario = tmp_path / "job.yaml"
    scenario.write_text("topology: dgx-h100\nnodes: 4\ntraining: {model: llama2-7b, global_batch: 256, seq_len: 4096}\n"
                        "run: {train_tokens: 2e11, failures: {node_mtbf_h: 100}, checkpoint: {interval_s: 1800}, "
                        "runs: 50}\n")
    r = json.loads(run("predict", str(scenario), "--json").stdout)["run"]
    assert r["failures"] == "explicit rates" and r["runs"] == 50
    assert r["checkpoint_interval_s"] == pytest.approx(1800, rel=0.01)
    assert r["interruptions_per_day"] == pytest.approx(24 * 4 / 100, rel=0.3)
    other = json.loads(run("predict", str(scenario), "--failures", "none", "--json").stdout)["run"]
    assert other["interruptions"] == 0


def test_llama3_405b_end_to_end():
    """Llama 3 405B on 2,048 DGX H100 from the command line: 6.5-9.5 interruptions a day, goodput 0.85-0.97."""
    out = run("predict", "--model", "llama3-405b", "--topology", "dgx-h100", "--nodes", "2048", "--tp", "8",
              "--pp", "16", "--sequence-parallel", "--pipeline-split", "embedding_and_loss", "--strategy", "zero1",
              "--seq-len", "8192", "--micro-batch", "1", "--global-batch", "2048", "--train-tokens", "15.6T",
              "--failures", "llama3", "--checkpoint-interval", "optimal", "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)["run"]
    assert 6.5 <= r["interruptions_per_day"] <= 9.5 and 0.85 <= r["goodput_fraction"] <= 0.97


@pytest.mark.parametrize(("args", "needle"), [
    (["--train-tokens", "1T", "--failures", "nope"], "unknown preset 'nope'"),
    (["--train-tokens", "1T", "--checkpoint-interval", "5"], "shorter than a save"),
    (["--train-tokens", "1T", "--checkpoint-interval", "-5"], "--checkpoint-interval"),
    (["--train-tokens", "lots"], "--train-tokens"),
    (["--failures", "llama3"], "give --train-tokens"),
])
def test_bad_run_input_exits_2_with_one_line(args, needle):
    out = run("predict", *args)
    assert out.returncode == 2 and needle in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_negative_rate_in_a_scenario_exits_2(tmp_path: Path):
    scenario = tmp_path / "job.yaml"
    scenario.write_text("topology: dgx-h100\ntraining: {model: llama2-7b}\n"
                        "run: {train_tokens: 1e12, failures: {node_mtbf_h: -5}}\n")
    out = run("predict", str(scenario))
    assert out.returncode == 2 and "node_mtbf_h" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_report_and_compare_show_the_run(tmp_path: Path):
    """--report draws the finish times and the goodput waterfall; compare gives each scenario's run."""
    report = tmp_path / "run.html"
    assert run("predict", "--train-tokens", "5e11", "--report", str(report)).returncode == 0
    page = report.read_text()
    assert 'id="finish-times"' in page and 'id="goodput"' in page
    base, other = tmp_path / "a.yaml", tmp_path / "b.yaml"
    text = ("topology: dgx-h100\nnodes: 4\ntraining: {model: llama2-7b, global_batch: 256, seq_len: 4096}\n"
            "run: {train_tokens: 5e11, failures: llama3, runs: 40}\n")
    base.write_text(text)
    other.write_text(text.replace("llama3", "rsc1"))
    out = run("compare", str(base), str(other), "--json")
    assert out.returncode == 0, out.stderr
    scenarios = json.loads(out.stdout)["scenarios"]
    assert [s["run"]["failures"] for s in scenarios] == ["llama3", "rsc1"]
    assert scenarios[1]["run"]["interruptions_per_day"] > scenarios[0]["run"]["interruptions_per_day"]
    table = run("compare", str(base), str(other)).stdout
    assert "goodput" in table and "run.failures: llama3 -> rsc1" in table
