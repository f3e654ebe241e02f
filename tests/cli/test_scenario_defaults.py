"""What a job leaves unstated comes from its model and its layout, never from the embedded scenario; predict,
scale, compare and plan resolve a job the same way, and `predict --json` echoes the resolved scenario."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from simulator.cli.job_args import override
from simulator.cli.plan import _job
from simulator.scenario import complete_training, resolve_scenario, scenario_from_data
from topologies.presets import load_preset
from workloads.presets import load_model
from workloads.spec import TrainingSpec

OPTIONS = ("topology", "nodes", "gpus_per_node", "model", "strategy", "micro_batch", "global_batch", "seq_len")


def options(**given: Any) -> dict[str, Any]:
    """The command line's options, the ones not given None (as predict passes them)."""
    return {**dict.fromkeys(OPTIONS), **given}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulator.cli.app", *args], capture_output=True, text=True)


def test_gpt3_megatron_command_resolves_its_own_context_and_micro_batch():
    """The GPT-3 175B command without --seq-len or --micro-batch: 2,048 tokens (Brown et al. 2020, n_ctx), one
    sequence per micro-batch (Megatron), 1536 / (16 DP x 1) = 96 micro-batches, Megatron's ddp, no recompute."""
    _, topology, training, model = override(None, options(model="gpt3-175b", topology="dgx-a100", nodes=128,
                                                           tp=8, pp=8, global_batch=1536))
    assert (training.seq_len, training.micro_batch, training.global_batch) == (2048, 1, 1536)
    assert (training.strategy.kind, training.activation_checkpointing, training.precision) == ("ddp", "none", "bf16")
    assert (topology.gpu, topology.nodes, model.name) == ("A100-SXM4-80GB", 128, "gpt3-175b")


@pytest.mark.parametrize(("model", "context"), [("gpt3-175b", 2048), ("llama2-7b", 4096), ("llama3-8b", 8192),
                                                ("llama3-405b", 8192), ("qwen3-30b-a3b", 4096), ("mpt-30b", 2048)])
def test_a_model_runs_at_its_pre_training_sequence_length(model: str, context: int):
    """--model X alone: X's pre-training context (the presets' train_seq_len where it differs from the
    context the model was extended to: Llama 3.1 405B 8,192 of 131,072, Qwen3 4,096 of 32,768)."""
    _, _, training, _ = override(None, options(model=model))
    assert training.seq_len == context


def test_stated_sequence_length_wins():
    """--seq-len says otherwise: the model's context no longer applies."""
    _, _, training, _ = override(None, options(model="llama3-8b", seq_len=1024))
    assert training.seq_len == 1024


def test_another_model_leaves_the_embedded_job_behind():
    """The embedded scenario's job (Llama-2-7B: micro-batch 2, global batch 256, selective recompute) is not
    carried to another model; with data parallelism alone the strategy is FSDP, and without a global batch
    there is no accumulation (micro-batch x 32 GPUs)."""
    spec, topology, training, _ = override(None, options(model="llama3-8b"))
    assert (training.micro_batch, training.global_batch, training.activation_checkpointing) == (1, 32, "none")
    assert training.strategy.kind == "fsdp"
    assert (topology.name, topology.nodes, spec.name) == ("dgx-h100", 4, None)


def test_embedded_scenario_unchanged_without_a_model():
    """No options at all: the embedded Llama-2-7B job as written, with its name."""
    spec, _, training, _ = override(None, options())
    assert (training.seq_len, training.micro_batch, training.global_batch) == (4096, 2, 256)
    assert training.activation_checkpointing == "selective" and spec.name is not None


def test_scenario_file_fields_stay_stated(tmp_path: Path):
    """A scenario file's seq_len and strategy are kept under --model; the fields it leaves out are filled:
    its model's context where it states none."""
    stated = scenario_from_data({"topology": "dgx-h100", "nodes": 2, "training": {
        "model": "llama2-7b", "seq_len": 1024, "strategy": {"kind": "zero1"}, "parallel": {"tp": 2}}}, "s")
    _, _, training, _ = override(stated, options(model="gpt3-13b"))
    assert (training.seq_len, training.strategy.kind) == (1024, "zero1")
    bare = scenario_from_data({"topology": "dgx-h100", "training": {"model": "llama3-405b",
                                                                    "parallel": {"tp": 8}}}, "s")
    _, training, _ = resolve_scenario(bare)
    assert (training.seq_len, training.strategy.kind, training.global_batch) == (8192, "ddp", 1)


def test_strategy_knobs_without_a_kind_get_the_default_kind():
    """A strategy that sets knobs but no kind: the kind is still the layout's default, the knobs kept."""
    spec = scenario_from_data({"topology": "dgx-h100", "training": {
        "model": "gpt3-13b", "strategy": {"overlap_grad_reduce": False}, "parallel": {"pp": 2}}}, "s")
    _, training, _ = resolve_scenario(spec)
    assert (training.strategy.kind, training.strategy.overlap_grad_reduce) == ("ddp", False)


def test_complete_training_is_idempotent_and_keeps_accumulation():
    """Completing twice changes nothing; a stated grad_accum gets no global batch beside it."""
    model, topology = load_model("llama2-7b"), load_preset("dgx-h100", nodes=2)
    once = complete_training(TrainingSpec(model="llama2-7b", grad_accum=4), model, topology)
    assert complete_training(once, model, topology) == once
    assert (once.grad_accum, once.global_batch, once.seq_len) == (4, None, 4096)


def test_unstated_strategy_that_does_not_suit_the_layout_names_the_field():
    """Every default is validated with the layout, as a stated value is (a zero2 with PP is refused)."""
    with pytest.raises(Exception, match="zero2"):
        override(None, options(model="gpt3-13b", strategy="zero2", pp=2))


def test_plan_resolves_the_job_as_predict_does():
    """plan without --seq-len: the model's context too (the shared complete_training)."""
    topology, training, _, _ = _job(None, "gpt3-175b", "dgx-a100", 128, ("1536", None), None, None)
    _, _, predicted, _ = override(None, options(model="gpt3-175b", topology="dgx-a100", nodes=128,
                                                 global_batch=1536))
    assert training.seq_len == predicted.seq_len == 2048
    assert topology.nodes == 128


def test_predict_json_echoes_a_scenario_that_predicts_the_same_step(tmp_path: Path):
    """`predict --json` carries `scenario`, every field resolved (seq_len, micro_batch, global_batch, the strategy,
    the topology and the model inline); fed back as a scenario file it predicts the same step."""
    first = run("predict", "--model", "gpt2-xl", "--topology", "dgx-h100", "--nodes", "1", "--global-batch", "16",
                "--json")
    assert first.returncode == 0, first.stderr
    p = json.loads(first.stdout)
    scenario = p["scenario"]
    assert (scenario["training"]["seq_len"], scenario["training"]["micro_batch"]) == (1024, 1)
    assert scenario["training"]["global_batch"] == 16 and scenario["training"]["strategy"]["kind"] == "fsdp"
    assert scenario["training"]["model"]["name"] == "gpt2-xl" and scenario["topology"]["gpu"] == "H100-SXM5-80GB"
    path = tmp_path / "echo.yaml"
    path.write_text(yaml.safe_dump(scenario))
    again = run("predict", str(path), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["step_time_s"] == pytest.approx(p["step_time_s"], rel=1e-9)


def test_predict_table_header_shows_the_resolved_job():
    """The table's header: sequence, micro-batch x micro-batches, global batch, recompute, precision, and the
    framework whose defaults filled the job (none named here: clustersim's own, said so)."""
    out = run("predict", "--model", "gpt2-xl", "--topology", "dgx-h100", "--nodes", "1", "--global-batch", "32",
              "--recompute", "recompute-activations")
    assert out.returncode == 0, out.stderr
    header = " ".join(out.stdout.split())
    assert "(dgx-h100), no framework sequence 1,024, micro-batch 1 x 4, global batch 32, recompute selective, bf16" \
        in header
    named = run("predict", "--model", "gpt2-xl", "--topology", "dgx-h100", "--nodes", "1", "--framework", "nemo")
    assert named.returncode == 0, named.stderr
    assert "(dgx-h100), nemo sequence" in " ".join(named.stdout.split())
