"""`validate-training`: the JSON contract, the table, --source, bad input (with a fake predictor)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from simulator.cli import validate_training
from simulator.collectives.nccl_setup import DEFAULT_NCCL
from simulator.core.errors import ConfigError
from simulator.training.prediction import MemoryBreakdown, StepPrediction

SHARED_CASES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "training" / "cases.yaml"


SELECTIONS: list[str] = []  # the NCCL selection each fake prediction was asked for


def fake_predict_step(topology, training, model, nccl=DEFAULT_NCCL, attention_scale=1.0) -> StepPrediction:
    """100 tokens/s/GPU per layer, 6 GFLOP per token, peak 1000 TFLOP/s."""
    SELECTIONS.append(nccl.selection)
    n_gpus = topology.gpus_per_node * topology.nodes
    n_dp = n_gpus // (training.parallel.tp * training.parallel.pp * training.parallel.cp)
    accum = training.global_batch // (training.micro_batch * n_dp) if training.global_batch else \
        training.grad_accum or 1
    tokens = training.micro_batch * accum * n_dp * (training.seq_len or model.max_seq_len)
    step = tokens / (n_gpus * 100.0 * model.layers)
    return StepPrediction(step_time_s=step, compute_s=step, exposed_comm_s=0.0, idle_breakdown_s={},
                          tokens_per_step=tokens, n_gpus=n_gpus, model_flops_per_step=6e9 * tokens,
                          peak_tflops=1000.0, memory=MemoryBreakdown(1.0, 0.0, 0.0, 0.0, 0.0, 0.0),
                          memory_capacity_bytes=2.0)


@pytest.fixture
def app(monkeypatch) -> typer.Typer:
    """A throwaway app with only this command, predicting with the fake."""
    monkeypatch.setattr(validate_training, "predict_step", fake_predict_step)
    throwaway = typer.Typer()
    validate_training.register(throwaway)
    throwaway.command("noop")(lambda: None)  # two commands, so the command name is required as in clustersim
    return throwaway


def _cases_file(tmp_path: Path) -> Path:
    def entry(case_id: str, layers: int, gpus: int, published: float, strategy: str = "fsdp") -> dict:
        return {
            "id": case_id,
            "model": {"name": "MPT-test", "layers": layers, "hidden": 1024, "heads": 8, "ffn": 4096,
                      "seq_len": 2048, "vocab": 50368},
            "training": {"framework": "Composer/LLM Foundry", "strategy": [strategy], "micro_batch": 4,
                         "global_batch": 4 * gpus, "precision": "amp_bf16", "activation_checkpointing": False},
            "cluster": {"gpu": "h100_80gb", "num_gpus": gpus},
            "metrics": {"throughput_tokens_per_s_per_GPU": published},
            "note": "",
        }

    cases = [entry("alpha-a", 10, 8, 1000.0), entry("alpha-b", 10, 16, 800.0), entry("beta-a", 20, 8, 2500.0),
             {**entry("beta-offload", 20, 8, 900.0), "training": {"strategy": ["zero3"], "zero_stage": 3,
                                                                  "offload": "CPU"}}]
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump(cases))
    return path


def test_json_contract(app, tmp_path):
    """--json: cases [{id, metric, published, predicted, abs_pct_error, skipped, defaults}], overall
    median, lookup and change figures, coverage; published is the source's number as written."""
    result = CliRunner().invoke(app, ["validate-training", str(_cases_file(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    by_id = {c["id"]: c for c in data["cases"]}
    assert list(by_id) == ["alpha-a", "alpha-b", "beta-a", "beta-offload"]
    for row in data["cases"]:
        assert {"id", "metric", "published", "predicted", "abs_pct_error", "skipped", "defaults"} <= set(row)
    assert by_id["alpha-a"]["metric"] == "throughput_tokens_per_s_per_GPU"
    assert (by_id["alpha-a"]["published"], by_id["alpha-a"]["predicted"], by_id["alpha-a"]["abs_pct_error"]) == \
        (1000.0, 1000.0, 0.0)
    assert (by_id["alpha-b"]["abs_pct_error"], by_id["beta-a"]["abs_pct_error"]) == (25.0, 20.0)
    assert by_id["beta-offload"]["skipped"] == "ZeRO-Offload (CPU) is not expressible"
    assert by_id["beta-offload"]["predicted"] is None and by_id["alpha-a"]["skipped"] is None
    assert data["median_abs_pct_error"] == 20.0
    assert (data["coverage"], data["change_pairs"]) == (0.75, 1)  # the offload case is in scope, not expressed
    assert data["pairs"][0]["change"] == "GPUs 8 -> 16"
    assert set(data["sources"]) == {"alpha", "beta"}


def test_source_filter_and_table(app, tmp_path):
    """--source keeps the cases whose id starts with the prefix; the table names cases and the summary."""
    result = CliRunner().invoke(app, ["validate-training", str(_cases_file(tmp_path)), "--source", "beta"])
    assert result.exit_code == 0, result.output
    assert "beta-a" in result.output and "alpha-a" not in result.output
    assert "not expressible" in result.output and "ALL" in result.output


def test_nccl_selection_reaches_every_step(app, tmp_path):
    """--nccl-selection nccl prices every case's collectives by NCCL's tuner (the default: the model's fastest
    pair), with --crossval too; another word is a ConfigError naming the flag."""
    runner = CliRunner()
    for flags, chosen in (((), "model"), (("--nccl-selection", "nccl"), "nccl"),
                          (("--nccl-selection", "nccl", "--crossval", "source"), "nccl")):
        SELECTIONS.clear()
        result = runner.invoke(app, ["validate-training", str(_cases_file(tmp_path)), "--json", *flags])
        assert result.exit_code == 0, result.output
        assert SELECTIONS and set(SELECTIONS) == {chosen}
    bad = runner.invoke(app, ["validate-training", str(_cases_file(tmp_path)), "--nccl-selection", "best"])
    assert isinstance(bad.exception, ConfigError) and "--nccl-selection" in str(bad.exception)


def test_bad_input_raises_config_errors(app, tmp_path):
    """A missing file and an unknown --source are ConfigErrors (the main app exits 2 on them)."""
    runner = CliRunner()
    missing = runner.invoke(app, ["validate-training", str(tmp_path / "nope.yaml")])
    assert isinstance(missing.exception, ConfigError) and "not found" in str(missing.exception)
    unknown = runner.invoke(app, ["validate-training", str(_cases_file(tmp_path)), "--source", "gamma"])
    assert isinstance(unknown.exception, ConfigError) and "gamma" in str(unknown.exception)


def test_malformed_cases_are_skipped_with_their_reasons(app, tmp_path):
    """A case with a field of the wrong type and one whose published metric is no throughput, beside good ones:
    both are reported as skipped with the reason, the others predicted; --strict refuses the file naming the
    first; a file of malformed cases only is refused."""
    path = _cases_file(tmp_path)
    cases = yaml.safe_load(path.read_text())
    cases.append({**cases[0], "id": "alpha-typo", "training": {**cases[0]["training"], "micro_batch": "four"}})
    cases.append({**cases[0], "id": "alpha-zero", "metrics": {"throughput_tokens_per_s_per_GPU": 0}})
    path.write_text(yaml.safe_dump(cases))
    result = CliRunner().invoke(app, ["validate-training", str(path), "--json"])
    assert result.exit_code == 0, result.output
    by_id = {c["id"]: c for c in json.loads(result.output)["cases"]}
    assert "training.micro_batch" in by_id["alpha-typo"]["skipped"]
    assert "metrics.throughput_tokens_per_s_per_GPU" in by_id["alpha-zero"]["skipped"]
    assert by_id["alpha-a"]["predicted"] is not None
    strict = CliRunner().invoke(app, ["validate-training", str(path), "--strict"])
    assert isinstance(strict.exception, ConfigError) and "alpha-typo" in str(strict.exception)
    path.write_text(yaml.safe_dump(cases[-2:]))
    nothing = CliRunner().invoke(app, ["validate-training", str(path)])
    assert isinstance(nothing.exception, ConfigError) and "no case could be read" in str(nothing.exception)


@pytest.mark.skipif(not SHARED_CASES.exists(), reason="shared data not checked out next to the repo")
def test_shared_cases_json_with_fake_predictor(app):
    """Every shared case appears once in the JSON, predicted or skipped with a reason."""
    result = CliRunner().invoke(app, ["validate-training", str(SHARED_CASES), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert len(data["cases"]) == len(yaml.safe_load(SHARED_CASES.read_text()))
    assert all((c["predicted"] is None) == (c["skipped"] is not None) for c in data["cases"])
    assert data["expressed"] > 0 and data["median_abs_pct_error"] is not None
