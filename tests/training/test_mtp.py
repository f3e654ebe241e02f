"""Multi-token prediction (TrainingSpec.mtp_layers): each module is one more block of the model's last kind and one
more pass through the output layer and loss, on the last pipeline stage or where a layout's m puts it; checked by
hand against the model's own rates and Megatron-LM's FLOP count, by metamorphic placement, and from the command line
and a published case."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from simulator.cli.app import app
from simulator.core.errors import ConfigError
from simulator.training.compute import ComputeModel
from simulator.training.predict import predict_step
from tests.training.test_pipeline_layout import CASE as LLAMA_CASE
from tests.training.test_recompute_modules import mapped_case
from topologies.hardware import gpu_spec
from topologies.presets import load_preset
from workloads.model import transformer
from workloads.presets import load_model
from workloads.spec import ParallelSpec, StrategySpec, TrainingSpec

DEEPSEEK = load_model("deepseek-v3")
S = 4096


def test_an_mtp_module_is_a_block_and_an_output_layer_by_hand():
    """FLOPs a token: one more of the last (mixture) block and one more output projection, three times the forward,
    as Megatron-LM's num_floating_point_operations counts them (MTP layers as layers, logits x (mtp + 1)); one more
    block of parameters; the compute of a micro-step one more block and one more head."""
    plain, mtp = transformer(DEEPSEEK), transformer(DEEPSEEK, 1)
    moe_block = plain.blocks[-1][0]
    by_hand = 3 * (moe_block.layer_forward_flops(1, S) + plain.head_forward_flops(1))
    assert mtp.model_flops_per_token(S) - plain.model_flops_per_token(S) == pytest.approx(by_hand, rel=1e-12)
    assert mtp.total_params - plain.total_params == moe_block.params_per_layer
    compute = ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16")
    layer = compute.layer(moe_block, 1, S, "none")
    head_f, head_b = compute.head(plain, 1, S)
    added = compute.micro_step_s(mtp, 1, S, "none") - compute.micro_step_s(plain, 1, S, "none")
    assert added == pytest.approx(layer.forward_s + layer.backward_s + head_f + head_b, rel=1e-9)


def _predict(parallel: ParallelSpec, mtp_layers: int, nodes: int = 32) -> tuple[float, float]:
    training = TrainingSpec(model=DEEPSEEK, strategy=StrategySpec(kind="zero1"), micro_batch=1, global_batch=256,
                            seq_len=S, mtp_layers=mtp_layers, parallel=parallel)
    step = predict_step(load_preset("dgx-h100", nodes=nodes), training, DEEPSEEK)
    return step.step_time_s, step.memory.total_bytes


def test_the_mtp_module_goes_on_the_last_chunk_or_where_m_says():
    """Metamorphic: without a layout the module runs on the last chunk, as a layout naming it there does, to the
    last bit; placed on a chunk of its own (m|L) the step changes; MTP costs time, and memory where the stage
    holding it is the fullest."""
    even = dict(pp=8, ep=32)
    default = _predict(ParallelSpec(**even, pipeline_schedule="interleaved", virtual_stages=4), 1)
    layout = "Et|(tt|)*29,t|tmL"  # the even split's chunks (1, 2 x 29, 1, 1) with m beside the loss
    assert _predict(ParallelSpec(**even, pipeline_layout=layout), 1) == default
    assert _predict(ParallelSpec(**even, pipeline_layout="Ettt|(tt|)*28,tt|m|L"), 1) != default
    without = _predict(ParallelSpec(**even, pipeline_schedule="interleaved", virtual_stages=4), 0)
    assert default[0] > without[0]
    assert _predict(ParallelSpec(ep=8), 1, nodes=1)[1] > _predict(ParallelSpec(ep=8), 0, nodes=1)[1]


def test_a_layout_must_hold_the_jobs_mtp_modules():
    with pytest.raises(ConfigError, match=r"holds 1 MTP modules \(m\); the job's mtp_layers is 0"):
        _predict(ParallelSpec(pp=8, ep=32, pipeline_layout="Et|(tt|)*30mL"), 0)
    with pytest.raises(ConfigError, match=r"holds 0 MTP modules \(m\); the job's mtp_layers is 1"):
        _predict(ParallelSpec(pp=8, ep=32, pipeline_layout="Et|(tt|)*30L"), 1)


def test_the_command_line_takes_and_shows_them():
    runner = CliRunner()
    args = ["predict", "--model", "deepseek-v3", "--topology", "dgx-h100", "--nodes", "32", "--pp", "8", "--ep", "32",
            "--global-batch", "256", "--mtp-layers", "1"]
    shown = runner.invoke(app, args)
    assert shown.exit_code == 0, shown.output
    assert "bf16, 1 MTP" in shown.stdout
    assert json.loads(runner.invoke(app, [*args, "--json"]).stdout)["scenario"]["training"]["mtp_layers"] == 1


def _mapped(**training: Any) -> Any:
    case = json.loads(json.dumps(LLAMA_CASE))
    case["model"].update(layers=32)
    return mapped_case(case, **training)


def test_a_case_places_them_by_its_layout():
    """A layout's m gives the MTP modules where the case does not state them (flagged)."""
    mapped = _mapped(pp_layout="Et*8|t*8|t*8|t*8mL")
    assert mapped.skipped is None and mapped.training.mtp_layers == 1
    assert any("MTP layers not stated" in flag for flag in mapped.defaults)
