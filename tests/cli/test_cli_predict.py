"""`predict` and `scale`: the embedded default, the JSON contract, overrides, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from topologies.hardware import known_gpus

METRICS = {"step_time_s", "compute_s", "gpu_idle_s", "gpu_idle_fraction", "exposed_comm_s", "tokens_per_s",
           "tflops_per_gpu", "mfu", "memory_per_gpu_bytes", "fits_in_memory"}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulator.cli.app", *args], capture_output=True, text=True)


def test_predict_default_scenario_prints_the_summary():
    """No arguments: the embedded scenario, a table with step time, MFU, idle and the memory verdict."""
    out = run("predict")
    assert out.returncode == 0, out.stderr
    for needle in ("step time", "MFU", "GPU idle", "exposed communication", "memory per GPU", "fits"):
        assert needle in out.stdout


def test_predict_json_has_the_design_metrics():
    """--json: one object with every metric name of DESIGN.md section 9, consistent with each other."""
    out = run("predict", "--model", "llama2-7b", "--nodes", "2", "--strategy", "zero2", "--micro-batch", "1",
              "--global-batch", "32", "--seq-len", "2048", "--json")
    assert out.returncode == 0, out.stderr
    p = json.loads(out.stdout)
    assert set(p) >= METRICS
    assert p["gpu_idle_s"] == pytest.approx(p["step_time_s"] - p["compute_s"])
    assert 0.0 <= p["gpu_idle_fraction"] <= 1.0
    assert p["tokens_per_s"] == pytest.approx(32 * 2048 / p["step_time_s"])


def test_scale_reports_efficiency_against_the_first_row():
    """scale --nodes 1,2,4 with DDP: the first row is 100%, none exceeds it. (With sharded
    optimizers the optimizer step shrinks as 1/N, so a fully overlapped FSDP job may gain a little.)"""
    out = run("scale", "--model", "llama2-7b", "--nodes", "1,2,4", "--micro-batch", "1", "--seq-len", "2048",
              "--strategy", "ddp", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert [r["nodes"] for r in rows] == [1, 2, 4]
    assert rows[0]["scaling_efficiency"] == pytest.approx(1.0)
    assert all(r["scaling_efficiency"] <= 1.0 + 1e-9 for r in rows)


def test_scale_runs_the_scenarios_job_at_each_node_count():
    """scale on a scenario keeps its accumulation (global batch over the first count's data-parallel ranks) and
    its stragglers: at the scenario's own node count it gives predict's step, slower for the straggler."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    steps = {}
    for name in ("base.yaml", "straggler.yaml"):
        scaled = json.loads(run("scale", str(examples / name), "--nodes", "8", "--json").stdout)["rows"][0]
        predicted = json.loads(run("predict", str(examples / name), "--json").stdout)
        assert scaled["step_time_s"] == pytest.approx(predicted["step_time_s"], rel=1e-12)
        steps[name] = scaled["step_time_s"]
    assert steps["straggler.yaml"] > steps["base.yaml"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["predict", "--model", "no-such-model"], "no-such-model"),
        (["predict", "--global-batch", "100", "--micro-batch", "3"], "global_batch"),
        (["predict", "--tp", "3"], "tp 3 x pp 1"),
        (["predict", "--nodes", "0"], "nodes"),
        (["predict", "--strategy", "zero9"], "strategy"),
        (["predict", "does-not-exist.yaml"], "not found"),
        (["scale", "--nodes", "1,two"], "--nodes"),
        (["predict", "--recompute-layers", "8"], "needs activation_checkpointing full"),
    ],
)
def test_bad_input_exits_2_naming_the_field(args, needle):
    """Bad input: exit code 2 and one line naming the field; no traceback."""
    out = run(*args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert needle in out.stderr and "Traceback" not in out.stderr


def test_recompute_layers_lies_between_none_and_full():
    """--recompute full --recompute-layers 16 of Llama 2 7B's 32: echoed in the JSON scenario and the header,
    the step between --recompute none and full (scale takes the flag too)."""
    model = ("--model", "llama2-7b", "--strategy", "fsdp", "--micro-batch", "2", "--seq-len", "4096")
    job = (*model, "--nodes", "2")
    steps = {}
    for name, extra in (("none", ("--recompute", "none")), ("full", ("--recompute", "full")),
                        ("half", ("--recompute", "full", "--recompute-layers", "16"))):
        out = run("predict", *job, *extra, "--json")
        assert out.returncode == 0, out.stderr
        p = json.loads(out.stdout)
        steps[name] = p["step_time_s"]
        assert p["scenario"]["training"]["recompute_layers"] == (16 if name == "half" else None)
    assert steps["none"] < steps["half"] < steps["full"]
    table = run("predict", *job, "--recompute", "full", "--recompute-layers", "16")
    assert "recompute full (16 layers)" in table.stdout
    scaled = run("scale", *model, "--nodes", "1,2", "--recompute", "full", "--recompute-layers", "16", "--json")
    assert scaled.returncode == 0, scaled.stderr


def test_hsdp_shard_group_on_the_command_line(tmp_path: Path):
    """--strategy hsdp --shard-group-gpus 16 beside TP 2 on 16 nodes: echoed, the same step as the scenario file
    stating strategy.shard_group_gpus, and the flag alone sets it on a scenario's HSDP strategy (scale takes it
    too); without it, TP 8 leaves one data-parallel rank a node and the error names the field."""
    job = ("--model", "llama3-70b", "--nodes", "16", "--tp", "2", "--sequence-parallel", "--global-batch", "256")
    out = run("predict", *job, "--strategy", "hsdp", "--shard-group-gpus", "16", "--json")
    assert out.returncode == 0, out.stderr
    flagged = json.loads(out.stdout)
    assert flagged["scenario"]["training"]["strategy"]["shard_group_gpus"] == 16
    scenario = tmp_path / "hsdp.yaml"
    scenario.write_text("topology: dgx-h100\nnodes: 16\ntraining:\n  model: llama3-70b\n  global_batch: 256\n"
                        "  strategy: {kind: hsdp}\n  parallel: {tp: 2, sequence_parallel: true}\n")
    filed = run("predict", str(scenario), "--shard-group-gpus", "16", "--json")
    assert filed.returncode == 0, filed.stderr
    assert json.loads(filed.stdout)["step_time_s"] == flagged["step_time_s"]
    scaled = run("scale", str(scenario), "--nodes", "8,16", "--shard-group-gpus", "8", "--json")
    assert scaled.returncode == 0, scaled.stderr
    refused = run("predict", "--model", "llama3-70b", "--nodes", "16", "--tp", "8", "--strategy", "hsdp")
    assert refused.returncode == 2 and "shard_group_gpus" in refused.stderr


def test_recompute_on_the_command_line_replaces_the_scenarios_layer_count(tmp_path: Path):
    """A scenario recomputing 16 layers: --recompute none or full replaces its recomputation, count included;
    --recompute-layers beside it sets a new count."""
    scenario = tmp_path / "job.yaml"
    scenario.write_text("topology: dgx-a100\nnodes: 2\ntraining:\n  model: llama2-7b\n  micro_batch: 2\n"
                        "  activation_checkpointing: full\n  recompute_layers: 16\n  strategy: {kind: fsdp}\n")
    for flags, expected in (((), ("full", 16)), (("--recompute", "none"), ("none", None)),
                            (("--recompute", "full"), ("full", None)),
                            (("--recompute", "full", "--recompute-layers", "8"), ("full", 8))):
        out = run("predict", str(scenario), *flags, "--json")
        assert out.returncode == 0, out.stderr
        training = json.loads(out.stdout)["scenario"]["training"]
        assert (training["activation_checkpointing"], training["recompute_layers"]) == expected


def test_out_of_memory_is_a_result_not_an_error():
    """A job that cannot fit is predicted, with fits_in_memory false."""
    out = run("predict", "--model", "llama2-70b", "--nodes", "1", "--strategy", "ddp", "--micro-batch", "4",
              "--global-batch", "32", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["fits_in_memory"] is False


def test_predict_with_tensor_and_pipeline_parallelism():
    """--tp/--pp/--sequence-parallel: a 3D layout runs; the bubble shows in the idle breakdown, the
    idle parts add up to the idle time, and the tokens per step count data-parallel replicas only."""
    out = run("predict", "--model", "gpt3-13b", "--nodes", "2", "--tp", "2", "--pp", "4", "--sequence-parallel",
              "--strategy", "zero1", "--micro-batch", "1", "--global-batch", "32", "--seq-len", "2048", "--json")
    assert out.returncode == 0, out.stderr
    p = json.loads(out.stdout)
    idle = p["idle_breakdown_s"]
    assert idle["pipeline_bubble"] > 0.0
    assert idle["exposed_comm"] + idle["pipeline_bubble"] + idle["optimizer_wait"] == pytest.approx(
        p["gpu_idle_s"], rel=1e-6)
    assert p["tokens_per_s"] == pytest.approx(32 * 2048 / p["step_time_s"])
    assert "tp_comm" in p["exposed_comm_by_collective_s"]


def test_predict_with_context_parallelism():
    """--cp/--recompute: 128k-token sequences over 8 GPUs each fit with full recomputation (not without);
    tokens per step count one sequence per data-parallel rank (32 GPUs / cp 8 = 4); the title says CP8; a
    cp the GPUs do not divide exits 2 naming it."""
    args = ("predict", "--model", "llama3-8b", "--nodes", "4", "--cp", "8", "--seq-len", "131072", "--strategy",
            "fsdp", "--global-batch", "8")
    full = json.loads(run(*args, "--recompute", "full", "--json").stdout)
    assert full["fits_in_memory"] and full["tokens_per_step"] == 8 * 131072
    assert not json.loads(run(*args, "--recompute", "none", "--json").stdout)["fits_in_memory"]
    assert "TP1 PP1 CP8" in run(*args, "--recompute", "full").stdout
    bad = run("predict", "--model", "llama3-8b", "--nodes", "4", "--cp", "3", "--seq-len", "131072")
    assert bad.returncode == 2 and "cp 3" in bad.stderr


def test_predict_with_expert_parallelism():
    """--ep on Mixtral 8x7B: the title says EP8, the all-to-alls show as ep_comm, memory falls against EP 1
    (each GPU holds 1 of 8 experts); EP on a dense model exits 2 naming it."""
    args = ("predict", "--model", "mixtral-8x7b", "--topology", "dgx-h100", "--nodes", "2", "--strategy", "zero1",
            "--seq-len", "4096", "--micro-batch", "1", "--global-batch", "16", "--recompute", "full")
    ep8 = json.loads(run(*args, "--ep", "8", "--json").stdout)
    ep1 = json.loads(run(*args, "--ep", "1", "--json").stdout)
    assert ep8["exposed_comm_by_collective_s"]["ep_comm"] > 0.0
    assert ep8["memory_per_gpu_bytes"] < ep1["memory_per_gpu_bytes"]
    assert "TP1 PP1 EP8" in run(*args, "--ep", "8").stdout
    bad = run("predict", "--model", "llama3-8b", "--nodes", "2", "--ep", "8")
    assert bad.returncode == 2 and "mixture-of-experts" in bad.stderr
    overlapped = json.loads(run(*args, "--ep", "8", "--ep-overlap", "--json").stdout)  # inside a node: all hidden
    assert "ep_comm" not in overlapped["exposed_comm_by_collective_s"]
    assert overlapped["step_time_s"] < ep8["step_time_s"]
    alone = run(*args, "--ep-overlap")
    assert alone.returncode == 2 and "ep_comm_overlap needs ep >= 2" in alone.stderr


def test_predict_with_unbalanced_routing():
    """--moe-imbalance / --capacity-factor: the title states the busiest expert rank's load and its dropped
    share, the others' wait shows in the table and the JSON; a capacity caps the cost; bad values exit 2
    naming the field, routing on a dense model names training.routing."""
    args = ("predict", "--model", "mixtral-8x7b", "--topology", "dgx-h100", "--nodes", "2", "--strategy", "zero1",
            "--seq-len", "4096", "--micro-batch", "1", "--global-batch", "16", "--recompute", "full", "--ep", "8")
    base = json.loads(run(*args, "--json").stdout)
    skewed = json.loads(run(*args, "--moe-imbalance", "1.5", "--json").stdout)
    capped = json.loads(run(*args, "--moe-imbalance", "1.5", "--capacity-factor", "1.2", "--json").stdout)
    assert base["step_time_s"] < capped["step_time_s"] < skewed["step_time_s"]
    assert skewed["idle_breakdown_s"]["routing_wait"] > capped["idle_breakdown_s"]["routing_wait"] > 0.0
    text = run(*args, "--moe-imbalance", "1.5", "--capacity-factor", "1.2").stdout
    assert "busiest expert rank 1.20x its share (20% of its tokens dropped)" in " ".join(text.split())
    assert "wait on the busiest" in text  # the table may wrap the rest of the row
    bad = run(*args, "--moe-imbalance", "0.5")
    assert bad.returncode == 2 and "routing.load_imbalance" in bad.stderr
    bad = run(*args, "--pad-to-capacity")
    assert bad.returncode == 2 and "pad_to_capacity needs a capacity_factor" in bad.stderr
    dense = run("predict", "--model", "llama3-8b", "--nodes", "2", "--moe-imbalance", "1.2")
    assert dense.returncode == 2 and "training.routing" in dense.stderr


def test_presets_lists_topologies_and_models():
    """`presets` lists the topology presets; `presets --models` the model presets with their sizes, a mixture
    of experts with its active parameters."""
    assert "dgx-h100" in run("presets").stdout
    models = run("presets", "--models").stdout
    assert "llama3-8b" in models and "46.70B params (12.9B active)" in models


def test_presets_lists_the_gpu_table():
    """`presets --gpus` lists every GPU a topology takes with its peaks and, where published, its measured
    best-shape matmul rate (GB300's marked presumed); --json gives every field; with --models it is refused."""
    table = run("presets", "--gpus")
    assert table.returncode == 0
    lines = table.stdout.splitlines()
    for name in known_gpus():
        assert any(f" {name} " in line for line in lines), name
    gb200 = next(line for line in lines if " GB200 " in line)
    assert "2,500" in gb200 and "1,822" in gb200 and "presumed" not in gb200
    assert "1,847 (presumed)" in next(line for line in lines if " GB300 " in line)
    listed = {gpu["name"]: gpu for gpu in json.loads(run("presets", "--gpus", "--json").stdout)}
    assert list(listed) == known_gpus()
    assert (listed["B200-180GB"]["mamf_bf16_tflops"], listed["B200-180GB"]["mamf_presumed"]) == (1745.0, False)
    assert listed["GB300"]["mamf_presumed"] is True and listed["L40S"]["mamf_bf16_tflops"] is None
    both = run("presets", "--gpus", "--models")
    assert both.returncode == 2 and "--models and --gpus" in both.stderr


def test_trace_gpus_refused_with_pipeline():
    """--trace-gpus expands symmetric ranks; with PP stages differ, so it is refused with exit 2."""
    out = run("predict", "--model", "gpt3-13b", "--nodes", "2", "--pp", "2", "--strategy", "zero1",
              "--global-batch", "32", "--trace", "/dev/null", "--trace-gpus", "0,8")
    assert out.returncode == 2
    assert "--trace-gpus" in out.stderr


@pytest.mark.parametrize("args", [["sweep"], ["predict", "--nodes", "two"]])
def test_usage_errors_exit_2_without_traceback(args: list[str]):
    """A missing argument or a malformed option value is a usage error: exit 2, click's message, no
    traceback (typer vendors its own click; both copies' exceptions are caught)."""
    out = run(*args)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr


def test_predict_json_is_the_same_in_every_process():
    """The extrapolated waits are summed in a fixed order: over a set of labels, the order (and so
    exposed_comm_s's last digits and the JSON's key order) would follow each process's string hashing."""
    args = ("predict", "--topology", "dgx-b200", "--nodes", "8", "--model", "llama2-7b", "--tp", "8",
            "--strategy", "fsdp", "--recompute", "full", "--seq-len", "1024", "--global-batch", "128", "--json")
    outputs = {subprocess.run([sys.executable, "-m", "simulator.cli.app", *args], capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}, check=True).stdout
               for seed in ("1", "4", "7")}
    assert len(outputs) == 1


def test_memory_fraction_on_the_command_line(tmp_path: Path):
    """--memory-fraction 0.94 on NVIDIA's MaxText Llama 3 70B job: echoed, the same capacity as the scenario
    file stating training.memory_fraction (94% of 80 GiB plus the 1.5 GiB of context beside it), fitting;
    at JAX's old 0.75 it does not fit; out of (0, 1] the error names the field. scale takes it too."""
    job = ("--model", "llama3-70b", "--nodes", "16", "--framework", "maxtext", "--recompute", "save_qkv_proj",
           "--micro-batch", "2", "--global-batch", "256")
    out = run("predict", *job, "--memory-fraction", "0.94", "--json")
    assert out.returncode == 0, out.stderr
    flagged = json.loads(out.stdout)
    assert flagged["scenario"]["training"]["memory_fraction"] == 0.94
    assert flagged["memory_capacity_bytes"] == pytest.approx((0.94 * 80 + 1.5) * 2**30, rel=1e-12)
    assert flagged["fits_in_memory"]
    scenario = tmp_path / "maxtext.yaml"
    scenario.write_text("topology: dgx-h100\nnodes: 16\ntraining:\n  model: llama3-70b\n  framework: maxtext\n"
                        "  activation_checkpointing: save_qkv_proj\n  micro_batch: 2\n  global_batch: 256\n"
                        "  memory_fraction: 0.94\n")
    filed = run("predict", str(scenario), "--json")
    assert filed.returncode == 0, filed.stderr
    assert json.loads(filed.stdout)["memory_capacity_bytes"] == flagged["memory_capacity_bytes"]
    tight = run("predict", *job, "--memory-fraction", "0.75", "--json")
    assert tight.returncode == 0 and not json.loads(tight.stdout)["fits_in_memory"]
    refused = run("predict", *job, "--memory-fraction", "1.5")
    assert refused.returncode == 2 and "memory_fraction" in refused.stderr
    scaled = run("scale", str(scenario), "--nodes", "16,32", "--memory-fraction", "0.75", "--json")
    assert scaled.returncode == 0, scaled.stderr
