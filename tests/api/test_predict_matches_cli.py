"""`predict(Scenario(...)).to_dict()` is `clustersim predict --json` for the same scenario, number for number."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator import Scenario, predict, scale
from simulator.cli.app import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def cli_json(*args: str) -> dict:
    out = CliRunner().invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_the_embedded_scenario():
    """No arguments on either side: the embedded Llama-2-7B FSDP job on 4 DGX H100."""
    assert predict(Scenario()).to_dict() == cli_json("predict")


def test_a_3d_tensor_and_pipeline_parallel_job():
    """TP 2 x PP 2 x DP 4 with sequence parallelism, the interleaved schedule and ZeRO-1, as options."""
    options = dict(model="llama2-13b", nodes=2, tp=2, pp=2, sequence_parallel=True, pipeline_schedule="interleaved",
                   virtual_stages=2, strategy="zero1", micro_batch=1, global_batch=32, seq_len=2048)
    cli = cli_json("predict", "--model", "llama2-13b", "--nodes", "2", "--tp", "2", "--pp", "2",
                   "--sequence-parallel", "--schedule", "interleaved", "--virtual-stages", "2", "--strategy",
                   "zero1", "--micro-batch", "1", "--global-batch", "32", "--seq-len", "2048")
    assert predict(Scenario(**options)).to_dict() == cli


def test_a_scenario_file_with_a_straggler_and_an_override():
    """examples/straggler.yaml with fewer nodes: `Scenario.from_yaml(...).replace(nodes=2)` is `FILE --nodes 2`."""
    path = EXAMPLES / "straggler.yaml"
    api = predict(Scenario.from_yaml(path).replace(nodes=2, global_batch=64)).to_dict()
    assert api == cli_json("predict", str(path), "--nodes", "2", "--global-batch", "64")
    assert api["idle_breakdown_s"]["straggler_wait"] > 0.0


def test_a_placed_straggler_given_as_data_is_the_straggler_flag():
    """`stragglers=[{device, slowdown}]` predicts what `--straggler DEVICE=SLOWDOWN` does."""
    scenario = Scenario(model="llama2-7b", nodes=2, micro_batch=1, seq_len=2048,
                        stragglers=[{"device": "s1/gpu3", "slowdown": 1.2}])
    cli = cli_json("predict", "--model", "llama2-7b", "--nodes", "2", "--micro-batch", "1", "--seq-len", "2048",
                   "--straggler", "s1/gpu3=1.2")
    assert predict(scenario).to_dict() == cli


def test_scale_is_clustersim_scale():
    """`scale(scenario, nodes=[1, 2])` gives the rows of `clustersim scale --nodes 1,2 --json`."""
    scenario = Scenario(model="llama2-7b", micro_batch=1, seq_len=2048)
    assert scale(scenario, nodes=[1, 2]).to_dict() == cli_json("scale", "--model", "llama2-7b", "--micro-batch", "1",
                                                               "--seq-len", "2048", "--nodes", "1,2")


@pytest.mark.parametrize("price", [2.5, None])
def test_the_planning_figures(price):
    """train_tokens and usd_per_gpu_hour give the planning figures `--usd-per-gpu-hour` gives for 1e12 tokens."""
    p = predict(Scenario(model="llama2-7b", nodes=1, seq_len=1024), usd_per_gpu_hour=price)
    assert p.time_to_train_s == pytest.approx(1e12 / p.tokens_per_s)
    assert p.gpu_hours == pytest.approx(p.time_to_train_s * p.n_gpus / 3600)
    assert p.cost_usd == (None if price is None else pytest.approx(p.gpu_hours * price))
