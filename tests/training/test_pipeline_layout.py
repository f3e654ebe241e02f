"""Megatron-Core's custom pipeline layout (ParallelSpec.pipeline_layout): the grammar and its errors, the chunks it
sets, that a layout equal to a split predicts exactly what the split does, an uneven layout's step by hand, and how
the command line, the Python API, the planner and a published case give it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from simulator.cli.app import app
from simulator.core.errors import ConfigError
from simulator.network.flows import FlowClass, Resource
from simulator.training.compute import ComputeModel
from simulator.training.pipeline import plan_pipeline
from simulator.training.predict import predict_step
from simulator.training.timeline import simulate_plan
from tests.training.test_recompute_modules import mapped_case
from topologies.hardware import gpu_spec
from topologies.presets import load_preset
from workloads.model import transformer
from workloads.pipeline_layout import layout_counts
from workloads.presets import load_model
from workloads.spec import ModelSpec, ParallelSpec, StrategySpec, TrainingSpec

DSV3_LAYOUT = "Et|(tt|)*30L"  # Megatron-LM's DeepSeek-V3 GB200 write-up: pp 8 x 4 chunks of 61 layers


def test_letters_repeats_and_commas():
    """(...)*n repeats a group, t*n a letter, commas are cosmetic; the embedding and the loss hold no layer."""
    assert layout_counts(DSV3_LAYOUT) == [1] + [2] * 30 + [0]
    assert layout_counts("Et*3|(tt|)*29,t|L") == [3] + [2] * 29 + [1, 0]
    assert layout_counts("EtttL") == [3]


@pytest.mark.parametrize(("layout", "message"), [
    ("Et|tx|L", "'x' not understood"),
    ("tE|tL", "the embedding E must open the first chunk"),
    ("Et|tt", "the loss L must close the last chunk"),
    ("Et|L|tL", "the loss L must close the last chunk, once"),
    ("Et|(tt|*3L", "not understood"),
    ("Et|mt|L", "the MTP modules m come after every transformer layer t"),
    ("Et|t|L", "3 chunks, which do not divide over pp 2"),
])
def test_a_bad_layout_is_refused_saying_why(layout: str, message: str):
    with pytest.raises(ValidationError, match=message):
        ParallelSpec(pp=2, pipeline_layout=layout)


def test_the_layout_sets_the_chunks_and_the_schedule():
    """Its chunks / pp are the virtual stages (interleaved above one), as Megatron-Core derives them; stated ones
    must agree; it replaces pipeline_split."""
    par = ParallelSpec(pp=8, pipeline_layout=DSV3_LAYOUT)
    assert (par.virtual_stages, par.pipeline_schedule) == (4, "interleaved")
    assert ParallelSpec(pp=2, pipeline_layout="Et*10|t*6L").pipeline_schedule == "1f1b"
    with pytest.raises(ValidationError, match="32 chunks, not pp 8 x virtual_stages 2"):
        ParallelSpec(pp=8, virtual_stages=2, pipeline_schedule="interleaved", pipeline_layout=DSV3_LAYOUT)
    with pytest.raises(ValidationError, match="leave pipeline_split out"):
        ParallelSpec(pp=8, pipeline_layout=DSV3_LAYOUT, pipeline_split="embedding_and_loss")


def _step(parallel: ParallelSpec, model: str = "llama3-8b", nodes: int = 2) -> tuple[float, float]:
    spec = load_model(model)
    training = TrainingSpec(model=spec, strategy=StrategySpec(kind="zero1"), micro_batch=1, global_batch=64,
                            seq_len=4096, parallel=parallel)
    step = predict_step(load_preset("dgx-h100", nodes=nodes), training, spec)
    return step.step_time_s, step.memory.total_bytes


@pytest.mark.parametrize(("split", "layout"), [
    ({}, "Etttt|(tttt|)*6ttttL"),  # 32 layers over 8 chunks, 4 each
    ({"pipeline_split": "embedding_and_loss"}, "Ettt|(tttt|)*6tttL"),  # 30 + 2 places, 4 each
])
def test_a_layout_equal_to_a_split_predicts_the_same(split: dict[str, Any], layout: str):
    """Metamorphic: the layout naming the split's own chunks gives the same step and memory, to the last bit."""
    layers = 32 if not split else 30
    spec = load_model("llama3-8b").model_copy(update={"layers": layers, "name": f"llama3-{layers}l"})

    def step(**fields: Any) -> tuple[float, float]:
        training = TrainingSpec(model=spec, strategy=StrategySpec(kind="zero1"), micro_batch=1, global_batch=64,
                                seq_len=4096, parallel=ParallelSpec(tp=2, pp=4, **fields))
        result = predict_step(load_preset("dgx-h100", nodes=2), training, spec)
        return result.step_time_s, result.memory.total_bytes

    assert step(pipeline_schedule="interleaved", virtual_stages=2, **split) == step(pipeline_layout=layout)


UNIFORM = ModelSpec(name="uniform", layers=16, hidden=1024, heads=16, vocab=8, max_seq_len=1024)


def _free(task: Any) -> FlowClass:
    return FlowClass(task.name, 0.0, (), rate_cap_Bps=1e30)


def test_an_uneven_layout_by_hand():
    """16 equal layers (a negligible embedding and loss), 2 stages, 1F1B, 4 micro-batches, communication free; f a
    layer's forward, 2f its backward. Even (8 | 8): stage 0 runs F0 F1, waits for B0 until 32f (F0 F0' B0' on stage
    1), then B0 F2 B1 F3 B2, waits for stage 1's F3 B3 until 104f, ends B3 at 120f. With 10 | 6 it waits for B0
    until 28f and runs on to 128f: 128 / 120, within 1% (the optimizer step)."""
    compute = ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16")

    def step(layout: str | None) -> float:
        training = TrainingSpec(model=UNIFORM, micro_batch=1, grad_accum=4, optimizer="sgd",
                                strategy=StrategySpec(kind="ddp"), parallel=ParallelSpec(pp=2, pipeline_layout=layout))
        plan = plan_pipeline(transformer(UNIFORM), training, compute, 1024, 4, 1, 1)
        return simulate_plan(plan, [Resource("link", 1e9)], _free).step_time_s

    assert step("Et*10|t*6L") / step(None) == pytest.approx(128 / 120, rel=0.01)


def test_moving_layers_onto_the_busiest_stage_never_helps():
    """Metamorphic: from the even split, each layer moved from the first stage to the last, which also runs Llama 3's
    output layer over 128,256 words (about two layers' work), lengthens the step."""
    times = [_step(ParallelSpec(pp=4, pipeline_layout=f"Et*{8 - k}|t*8|t*8|t*{8 + k}L"))[0] for k in range(4)]
    assert times == sorted(times) and times[0] < times[-1]


def test_the_layout_must_hold_the_models_layers():
    with pytest.raises(ConfigError, match="holds 31 transformer layers \\(t\\); the model has 32"):
        _step(ParallelSpec(pp=4, pipeline_layout="Et*8|t*8|t*8|t*7L"))


def test_memory_follows_the_layout():
    """The stage holding the most layers sets the memory per GPU: twelve layers on the first stage hold more than
    eight."""
    assert _step(ParallelSpec(pp=4, pipeline_layout="Et*12|t*8|t*8|t*4L"))[1] > _step(ParallelSpec(pp=4))[1]


def test_the_command_line_echoes_the_layout_and_refuses_a_bad_one():
    runner = CliRunner()
    args = ["predict", "--model", "deepseek-v3", "--topology", "dgx-h100", "--nodes", "32", "--pp", "8", "--ep", "32",
            "--global-batch", "256", "--pipeline-layout", DSV3_LAYOUT]
    shown = runner.invoke(app, args)
    assert shown.exit_code == 0, shown.output
    assert f"PP8 (interleaved x4, layout {DSV3_LAYOUT})" in shown.stdout
    parallel = json.loads(runner.invoke(app, [*args, "--json"]).stdout)["scenario"]["training"]["parallel"]
    assert (parallel["pipeline_layout"], parallel["virtual_stages"]) == (DSV3_LAYOUT, 4)
    wrong = runner.invoke(app, [*args[:-1], "Et|(tt|)*29,t|L"])
    assert wrong.exit_code != 0 and "holds 60 transformer layers (t); the model has 61" in str(wrong.exception)


def test_the_python_api_and_the_planner():
    """Scenario(pipeline_layout=...) as the flag; the planner splits the layers itself for the pipelines it tries."""
    import simulator as cs
    base = cs.Scenario(model="llama3-8b", nodes=2, pp=4, seq_len=4096, global_batch=64,
                       pipeline_layout="Et*7|t*8|t*8|t*9L")
    assert cs.predict(base).scenario["training"]["parallel"]["pipeline_layout"] == "Et*7|t*8|t*8|t*9L"
    assert cs.predict(base).step_time_s > cs.predict(base.replace(pipeline_layout="Et*8|t*8|t*8|t*8L")).step_time_s
    found = cs.plan(base, tp=[1], pp=[2, 4], strategies=["zero1"], recompute=["selective"], top=4)
    assert found.layouts and not found.refused
    for layout in found.layouts:
        assert cs.predict(layout.scenario).scenario["training"]["parallel"]["pipeline_layout"] is None


CASE: dict[str, Any] = {
    "id": "user-llama3-pp4",
    "model": {"name": "Llama 3 8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336,
              "vocab": 128256, "seq_len": 4096},
    "training": {"framework": "Megatron-Core", "strategy": ["pp", "dp"], "pp": 4, "micro_batch": 1,
                 "global_batch": 64, "precision": "bf16"},
    "cluster": {"gpu": "H100 80GB", "gpus_per_node": 8, "num_gpus": 16},
    "metrics": {"tokens_per_s_per_GPU": 1000},
}


def _mapped(**training: Any) -> Any:
    return mapped_case(CASE, **training)


@pytest.mark.parametrize("key", ["pipeline_layout", "pp_layout", "pipeline_model_parallel_layout"])
def test_a_case_states_its_layout(key: str):
    mapped = _mapped(**{key: "Et*7|(t*8|)*2t*9L"})
    assert mapped.skipped is None, mapped.skipped
    assert mapped.training.parallel.pipeline_layout == "Et*7|(t*8|)*2t*9L"


@pytest.mark.parametrize(("fields", "counts"), [
    ({"decoder_first_pipeline_num_layers": 5, "decoder_last_pipeline_num_layers": 9}, [5, 9, 9, 9]),
    ({"num_layers_in_last_pipeline_stage": 5}, [9, 9, 9, 5]),
    ({"decoder_first_pipeline_num_layers": 2, "vp": 2}, [1, 5, 5, 5, 1, 5, 5, 5]),
])
def test_a_cases_uneven_first_and_last_stages(fields: dict[str, Any], counts: list[int]):
    """Megatron-Core's uneven split (transformer_layer.py get_transformer_layer_offset): the first and last stages
    hold what is stated, the others the rest evenly, each stage's layers split evenly over its chunks."""
    mapped = _mapped(**fields)
    assert mapped.skipped is None, mapped.skipped
    assert layout_counts(mapped.training.parallel.pipeline_layout) == counts


def test_uneven_stages_that_do_not_divide_and_unread_split_keys_are_refused():
    assert "do not divide evenly" in str(_mapped(decoder_first_pipeline_num_layers=6).skipped)
    mapped = _mapped(pipeline_stage_layout="Et*8|t*8|t*8|t*8L")
    assert "training.pipeline_stage_layout: not a field this tool reads" in str(mapped.skipped)
