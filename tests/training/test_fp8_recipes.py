"""fp8 scaling recipes (TrainingSpec.fp8_recipe): per-tensor current scaling reads each tensor once more for its
amax before the cast, except where Transformer Engine's norm and activation kernels compute the amax as they
write (simulator.training.compute); the other recipes find their scales inside the cast."""

from __future__ import annotations

import copy

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from simulator.scenario import with_framework
from simulator.training.compute import FP8_AMAX_BYTES, ComputeModel
from simulator.training.job_warnings import job_warnings
from simulator.validation.training_cases import map_case, parse_cases
from topologies.hardware import gpu_spec
from workloads.model import transformer
from workloads.spec import ModelSpec, TrainingSpec

H100 = gpu_spec("H100-SXM5-80GB")
MODEL = ModelSpec(name="m", layers=4, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, gated_mlp=True,
                  vocab=32000, max_seq_len=4096)
BLOCK = transformer(MODEL).blocks[0][0]


def _job(recipe: str = "delayed", precision: str = "fp8", framework: str | None = None) -> TrainingSpec:
    return with_framework(TrainingSpec(model=MODEL, seq_len=4096, micro_batch=1, precision=precision,
                                       fp8_recipe=recipe, framework=framework))


def _layer(recipe: str, precision: str = "fp8", tokens: int = 4096, tp: int = 1):
    return ComputeModel.for_job(H100, _job(recipe, precision)).layer(BLOCK, tokens // 4096, 4096, "none", tp=tp)


def test_current_scaling_reads_the_unfused_tensors_once_more_by_hand():
    """Hand-computed for one Llama-like block (h 4096, 8 KV heads of 128, gated MLP 14,336), 4,096 tokens, no TP:
    forward the attention output (4,096 x 4,096) and every weight element (qkv 4096 x 6144, attn_out 4096 x 4096,
    mlp_up 4096 x 28672, mlp_down 14336 x 4096) pay FP8_AMAX_BYTES more; the norm-fed qkv / mlp_up inputs and the
    activation-fed mlp_down input do not. Backward the output gradients of qkv (6,144 wide), attn_out (4,096) and
    mlp_down (4,096) pay it; mlp_up's, which the activation's backward writes, does not."""
    tokens, h = 4096, 4096
    weights = h * 6144 + h * h + h * 28672 + 14336 * h
    forward_bytes = (tokens * h + weights) * FP8_AMAX_BYTES
    backward_bytes = tokens * (6144 + h + h) * FP8_AMAX_BYTES
    hbm = ComputeModel.for_job(H100, _job()).hbm_Bps
    delayed, current = _layer("delayed"), _layer("tensorwise")
    assert current.forward_s - delayed.forward_s == pytest.approx(forward_bytes / hbm, rel=1e-9)
    assert current.backward_s - delayed.backward_s == pytest.approx(backward_bytes / hbm, rel=1e-9)


def test_a_mixture_of_experts_pays_the_amax_pass_on_its_expert_inputs_and_gradients():
    """Hand-computed for a block of 16 experts, 2 routed a token (h 1,024, gated experts 1,024 wide, 4,096 tokens):
    the experts run outside TE's LayerNormMLP, so only qkv's input is spared: forward the attention output, the
    router's, both expert GEMMs' inputs (8,192 routed rows) and every weight; backward every output gradient."""
    moe = ModelSpec(name="moe", layers=1, hidden=1024, heads=8, kv_heads=8, vocab=8000, experts=16,
                    experts_per_token=2, expert_ffn_hidden=1024, ffn_hidden=4096, gated_mlp=True)
    block = transformer(moe).blocks[0][0]
    gemms = block.sharded_layer_gemms(4096, 1)
    assert [name for name, *_ in gemms] == ["qkv", "attn_out", "router", "mlp_up", "mlp_down"]
    expected_forward = sum(m * k for name, m, n, k in gemms if name != "qkv") + sum(k * n for _, m, n, k in gemms)
    expected_backward = sum(m * n for _, m, n, k in gemms)
    assert block.spec.moe
    delayed = ComputeModel.for_job(H100, _job())._cast_bytes(gemms, block.spec.moe)
    current = ComputeModel.for_job(H100, _job("tensorwise"))._cast_bytes(gemms, block.spec.moe)
    assert current[0] - delayed[0] == pytest.approx(expected_forward * FP8_AMAX_BYTES, rel=1e-12)
    assert current[1] - delayed[1] == pytest.approx(expected_backward * FP8_AMAX_BYTES, rel=1e-12)


@pytest.mark.parametrize("recipe", ["mxfp8", "blockwise"])
def test_block_scaled_recipes_cost_what_delayed_scaling_does(recipe):
    """MXFP8 and blockwise scales are found inside the cast kernel, as delayed scaling's amax is."""
    assert _layer(recipe) == _layer("delayed")


@settings(max_examples=30, deadline=None)
@given(recipe=st.sampled_from(["delayed", "tensorwise", "mxfp8", "blockwise"]),
       micro_batch=st.integers(1, 4), tp=st.sampled_from([1, 2, 4, 8]))
def test_the_recipe_moves_only_fp8_jobs_and_current_scaling_is_never_faster(recipe, micro_batch, tp):
    tokens = 4096 * micro_batch
    assert _layer(recipe, "bf16", tokens, tp) == _layer("delayed", "bf16", tokens, tp)
    assert _layer("tensorwise", "fp8", tokens, tp).total_s >= _layer(recipe, "fp8", tokens, tp).total_s


@pytest.mark.parametrize(("written", "read"), [
    ("delayed", "delayed"), ("tensorwise", "tensorwise"), ("cs", "tensorwise"), ("ds", "delayed"),
    ("Float8CurrentScaling", "tensorwise"), ("per-tensor current scaling", "tensorwise"), ("MXFP8", "mxfp8"),
    ("ss", "blockwise"), ("Float8BlockScaling", "blockwise"), ("fp8cs", "tensorwise"), ("fp8mx", "mxfp8")])
def test_recipe_names_of_megatron_nemo_and_transformer_engine_are_read(written, read):
    assert _job(written).fp8_recipe == read


def test_an_unknown_recipe_names_the_field_and_the_choices():
    with pytest.raises(ValidationError) as err:
        _job("hybrid")
    assert "fp8_recipe" in str(err.value) and "tensorwise" in str(err.value)


@pytest.mark.parametrize(("framework", "recipe"), [("fsdp2", "tensorwise"), ("megatron-core", "delayed"),
                                                   ("nemo", "delayed"), (None, "delayed")])
def test_framework_defaults(framework, recipe):
    """torchao's Float8Linear (torchtitan) scales dynamically from the current amax; Megatron-Core's --fp8-recipe
    defaults to delayed. A stated recipe wins."""
    assert with_framework(TrainingSpec(model=MODEL, precision="fp8", framework=framework)).fp8_recipe == recipe
    assert with_framework(TrainingSpec(model=MODEL, precision="fp8", framework=framework,
                                       fp8_recipe="mxfp8")).fp8_recipe == "mxfp8"


CASE = {"id": "c", "model": {"name": "LLAMA3-70B", "seq_len": 8192},
        "training": {"framework": "NeMo 25.04 (Megatron-Core)", "strategy": ["tp", "pp", "dp"], "tp": 4, "pp": 4,
                     "micro_batch": 1, "global_batch": 128, "precision": "FP8"},
        "cluster": {"gpu": "H100 (DGX-H100)", "num_gpus": 64, "gpus_per_node": 8},
        "metrics": {"model_TFLOP_per_sec_per_GPU": 700}}


def _mapped(**training: object):
    entry = copy.deepcopy(CASE)
    entry["training"].update(training)
    return map_case(parse_cases(yaml.safe_dump([entry]), "cases.yaml")[0])


@pytest.mark.parametrize(("training", "recipe"), [
    ({}, "delayed"), ({"fp8_recipe": "current scaling"}, "tensorwise"), ({"fp8_recipe": "cs"}, "tensorwise"),
    ({"precision": "FP8, per-tensor current scaling"}, "tensorwise"), ({"precision": "mxfp8"}, "mxfp8"),
    ({"precision": "FP8 current-scaling"}, "tensorwise"), ({"precision": "fp8_cs"}, "tensorwise"),
    ({"precision": "FP8-MX"}, "mxfp8"), ({"precision": "fp8 (blockwise)"}, "blockwise"),
    ({"fp8_recipe": "fp8cs"}, "tensorwise")])
def test_a_case_states_its_recipe_by_field_or_in_its_precision(training, recipe):
    m = _mapped(**training)
    assert m.training.precision == "fp8" and m.training.fp8_recipe == recipe


def test_an_fp8_case_without_a_recipe_says_which_it_takes():
    assert any(d.startswith("fp8 recipe not stated") for d in _mapped().defaults)
    assert not any(d.startswith("fp8 recipe") for d in _mapped(fp8_recipe="cs").defaults)
    assert not any(d.startswith("fp8 recipe") for d in _mapped(precision="bf16").defaults)


def test_a_case_with_an_unknown_recipe_is_set_aside_naming_it():
    m = _mapped(fp8_recipe="hybrid-e5m2")
    assert m.training is None and "fp8_recipe 'hybrid-e5m2'" in m.skipped


def test_a_recipe_on_a_job_not_in_fp8_is_flagged_and_changes_nothing():
    job = TrainingSpec(model=MODEL, precision="bf16", fp8_recipe="tensorwise")
    assert any("fp8_recipe tensorwise" in w and "bf16" in w for w in job_warnings(job, MODEL))
    assert not any("fp8_recipe" in w for w in job_warnings(_job("tensorwise"), MODEL))
    assert _layer("tensorwise", "bf16") == _layer("delayed", "bf16")
