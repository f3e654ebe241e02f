"""`plan`: the JSON contract and table on a tiny model, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TINY = "name: tiny\nlayers: 4\nhidden: 256\nheads: 4\nvocab: 1024\nmax_seq_len: 256\n"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulator.cli.app", *args], capture_output=True, text=True)


@pytest.fixture()
def tiny(tmp_path: Path) -> str:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return str(path)


def test_plan_json_ranks_fitting_layouts_best_first(tiny):
    """--json on one DGX A100: at most --top layouts, ranked 1.., using all 8 GPUs, fitting in
    memory, tokens/s non-increasing, and the counts of each phase."""
    out = run("plan", "--model", tiny, "--topology", "dgx-a100", "--global-batch", "64", "--micro-batch", "1,2",
              "--top", "5", "--keep", "10", "--slack", "10", "--workers", "1", "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["n_gpus"] == 8 and plan["simulated"] == 10
    assert plan["enumerated"] >= plan["fit_in_memory"] >= plan["simulated"]
    rows = plan["layouts"]
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1)) and 1 <= len(rows) <= 5
    assert all(r["tp"] * r["pp"] * r["dp"] == 8 and r["fits_in_memory"] for r in rows)
    assert all(r["micro_batch"] * r["micro_steps"] * r["dp"] == 64 for r in rows)
    rates = [r["tokens_per_s"] for r in rows]
    assert rates == sorted(rates, reverse=True)


def test_plan_prints_a_table(tiny):
    """Without --json: the ranked table with its columns and the search summary."""
    out = run("plan", "--model", tiny, "--topology", "dgx-a100", "--global-batch", "64", "--tp", "2",
              "--pp", "1,2", "--top", "3", "--workers", "1")
    assert out.returncode == 0, out.stderr
    for needle in ("TP", "PP", "DP", "strategy", "tokens/s", "MFU", "layouts enumerated"):
        assert needle in out.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--model", "no-such-model", "--topology", "dgx-a100", "--global-batch", "8"], "--model"),
        (["--model", "gpt3-175b", "--topology", "no-such-cluster", "--global-batch", "8"], "--topology"),
        (["--model", "gpt3-175b", "--topology", "dgx-a100", "--global-batch", "8"], "no layout fits"),
        (["--model", "llama2-7b", "--topology", "dgx-a100", "--global-batch", "12", "--tp", "1", "--pp", "1"],
         "--global-batch 12"),
        (["--model", "llama2-7b", "--topology", "dgx-a100", "--global-batch", "8", "--tp", "3"], "--tp 3"),
        (["--model", "llama2-7b", "--topology", "dgx-a100", "--global-batch", "8", "--strategies", "zero9"],
         "--strategy"),
        (["--model", "llama2-7b", "--topology", "dgx-a100", "--global-batch", "8", "--micro-batch", "1,x"],
         "--micro-batch"),
        (["--model", "llama2-7b", "--topology", "dgx-a100"], "--global-batch"),
    ],
)
def test_bad_input_exits_2_naming_the_option(args, needle):
    """Unknown model or topology, nothing fits, a batch no layout divides, a bad list: exit 2, one line."""
    out = run("plan", *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert needle in out.stderr and "Traceback" not in out.stderr


def test_plan_takes_a_scenario_and_keeps_its_training_fields(tmp_path):
    """A scenario YAML gives the job; its fields (fp16, no flash attention) are kept, options override
    (--global-batch), and without flash attention selective recomputation is tried too."""
    scenario = tmp_path / "job.yaml"
    scenario.write_text("topology: dgx-a100\nnodes: 1\ntraining:\n  model: {" + TINY.strip().replace("\n", ", ")
                        + "}\n  global_batch: 32\n  seq_len: 256\n  precision: fp16\n  flash_attention: false\n")
    out = run("plan", str(scenario), "--global-batch", "64", "--tp", "1", "--pp", "1", "--strategies", "ddp",
              "--micro-batch", "8", "--slack", "10", "--workers", "1", "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["global_batch"] == 64 and plan["n_gpus"] == 8
    assert sorted(r["recompute"] for r in plan["layouts"]) == ["full", "none", "selective"]


def test_plan_ranks_expert_layouts_at_the_busiest_ranks_pace(tmp_path):
    """A tiny mixture of experts over EP 8: --moe-imbalance 2 slows the best EP 8 layout (the step runs at the
    busiest expert rank's pace) and the title states the routing; a bad imbalance exits 2 naming the field."""
    moe = tmp_path / "moe.yaml"
    moe.write_text(TINY + "experts: 8\nexperts_per_token: 2\n")
    args = ("plan", "--model", str(moe), "--topology", "dgx-a100", "--global-batch", "64", "--ep", "8",
            "--top", "1", "--workers", "1")
    balanced = json.loads(run(*args, "--json").stdout)["layouts"][0]
    skewed = json.loads(run(*args, "--moe-imbalance", "2", "--json").stdout)["layouts"][0]
    assert skewed["ep"] == balanced["ep"] == 8
    assert skewed["step_time_s"] > balanced["step_time_s"]
    assert "MoE routing: load imbalance 2" in " ".join(run(*args, "--moe-imbalance", "2").stdout.split())
    bad = run(*args, "--moe-imbalance", "0.5")
    assert bad.returncode == 2 and "load_imbalance" in bad.stderr
