"""Megatron-Core's recompute modules (TrainingSpec.recompute_modules): what each re-runs, by hand from the compute
model's own rates, that naming more modules is never faster, that the default is core_attn, that moe re-runs the
expert all-to-alls, and how a spec, the command line and a published case give them."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from simulator.cli.app import app
from simulator.scenario_overrides import apply_options
from simulator.training.compute import ACTIVATION_BYTES, MOE_ACTIVATION_BYTES, MOE_PERMUTE_BYTES, ComputeModel
from simulator.training.predict import predict_step
from simulator.validation.training_cases import map_case, parse_cases
from topologies.hardware import gpu_spec
from topologies.presets import load_preset
from workloads.model import transformer
from workloads.presets import load_model
from workloads.spec import ParallelSpec, StrategySpec, TrainingSpec

H100 = gpu_spec("H100-SXM5-80GB")
LLAMA = transformer(load_model("llama3-8b"))  # dense: h 4096, f 14336 gated
QWEN_SPEC = load_model("qwen3-30b-a3b")
QWEN = transformer(QWEN_SPEC)  # 128 experts of 768, top-8, no shared experts
B, S = 1, 4096
TOKENS = B * S


def _recompute_s(model: Any, modules: tuple[str, ...], tp: int = 1, sp: bool = False) -> float:
    compute = ComputeModel(H100, "bf16", recompute_modules=modules)
    return compute.layer(model, B, S, "selective", tp, sp).recompute_s


def _gemms(model: Any) -> dict[str, float]:
    return ComputeModel(H100, "bf16").gemms_s(model, B, S, 1, 1, 1, None)


def test_layernorm_re_runs_the_norms_bytes():
    """layernorm re-runs the two norms: 8 of the fused block's 40 element-wise bytes a token and hidden unit
    (compute.py NORM_SHARE), at the GPU's memory rate; under sequence parallelism each TP rank its 1 / tp."""
    hbm = ComputeModel(H100, "bf16").hbm_Bps
    by_hand = TOKENS * 4096 * 8.0 / hbm
    assert _recompute_s(LLAMA, ("layernorm",)) == pytest.approx(by_hand, rel=1e-9)
    assert _recompute_s(LLAMA, ("layernorm",), tp=4, sp=True) == pytest.approx(by_hand / 4, rel=1e-9)


def test_mlp_re_runs_a_dense_blocks_mlp():
    """mlp re-runs the dense MLP's two matmuls and its activation (4 bytes an intermediate element)."""
    gemms, hbm = _gemms(LLAMA), ComputeModel(H100, "bf16").hbm_Bps
    by_hand = gemms["mlp_up"] + gemms["mlp_down"] + MOE_ACTIVATION_BYTES * TOKENS * 14336 / hbm
    assert _recompute_s(LLAMA, ("mlp",)) == pytest.approx(by_hand, rel=1e-9)


def test_moe_modules_by_hand():
    """moe_act re-runs the routed experts' activation over k x tokens rows of 768; moe the router, the routed
    experts' matmuls, the permutation (2 x 2 bytes and 4 a routed copy, a token and hidden unit) and that
    activation."""
    gemms, hbm = _gemms(QWEN), ComputeModel(H100, "bf16").hbm_Bps
    act = MOE_ACTIVATION_BYTES * TOKENS * 8 * 768 / hbm
    assert _recompute_s(QWEN, ("moe_act",)) == pytest.approx(act, rel=1e-9)
    permute = TOKENS * 2048 * (2 * ACTIVATION_BYTES + 8 * MOE_PERMUTE_BYTES) / hbm
    by_hand = gemms["router"] + gemms["mlp_up"] + gemms["mlp_down"] + permute + act
    assert _recompute_s(QWEN, ("moe",)) == pytest.approx(by_hand, rel=1e-9)


def test_mla_up_proj_re_runs_the_up_projections():
    """DeepSeek-V3's query (1,536 to 128 x 192) and key-value (512 to 128 x 256) up projections; nothing on a block
    without MLA."""
    deepseek = transformer(load_model("deepseek-v3"))
    gemms = _gemms(deepseek)
    assert _recompute_s(deepseek, ("mla_up_proj",)) == pytest.approx(gemms["q_up"] + gemms["kv_up"], rel=1e-9)
    flops = 2 * TOKENS * (128 * 192 * 1536 + 128 * 256 * 512)
    assert flops / (gemms["q_up"] + gemms["kv_up"]) < H100.bf16_tflops * 1e12  # no faster than the peak
    assert _recompute_s(LLAMA, ("mla_up_proj",)) == 0.0


def test_a_module_the_block_lacks_re_runs_nothing():
    """As in Megatron-Core, mlp applies to dense blocks and moe, moe_act, shared_experts to mixtures' only."""
    assert _recompute_s(QWEN, ("mlp",)) == 0.0
    assert _recompute_s(LLAMA, ("moe", "moe_act", "shared_experts")) == 0.0
    assert _recompute_s(QWEN, ("shared_experts",)) == 0.0  # Qwen3 has none


def test_the_default_is_core_attn():
    """Without modules selective re-runs the attention core, as Megatron-Core's default does."""
    for model in (LLAMA, QWEN):
        plain = ComputeModel(H100, "bf16").layer(model, B, S, "selective").recompute_s
        assert plain == _recompute_s(model, ("core_attn",)) > 0.0


MODULES = ("core_attn", "layernorm", "moe_act", "moe")


@pytest.mark.parametrize("more", [m for m in itertools.combinations(MODULES, 2)])
def test_naming_more_modules_is_never_faster(more: tuple[str, str]):
    """A step re-running a superset of modules takes at least as long (each module's re-run adds time)."""
    topology = load_preset("dgx-h100", nodes=1)

    def step(modules: tuple[str, ...]) -> float:
        training = TrainingSpec(model="qwen3-30b-a3b", strategy=StrategySpec(kind="ddp"), micro_batch=1, seq_len=S,
                                activation_checkpointing="selective", recompute_modules=modules,
                                parallel=ParallelSpec(ep=8))
        return predict_step(topology, training, QWEN_SPEC).step_time_s

    assert step(more[:1]) <= step(more) + 1e-12
    assert step(more[1:]) <= step(more) + 1e-12


def test_moe_re_runs_the_expert_all_to_alls():
    """Re-running the mixture layer re-runs its dispatch and combine: the step's expert all-to-all time grows by
    half (a forward and a backward pass's, then one more forward's)."""
    topology = load_preset("dgx-h100", nodes=2)

    def comm(modules: tuple[str, ...]) -> float:
        training = TrainingSpec(model="qwen3-30b-a3b", strategy=StrategySpec(kind="ddp"), micro_batch=1, seq_len=S,
                                activation_checkpointing="selective", recompute_modules=modules,
                                parallel=ParallelSpec(ep=16))
        return predict_step(topology, training, QWEN_SPEC).comm_by_collective_s["ep_comm"]

    assert comm(("moe",)) == pytest.approx(1.5 * comm(("moe_act",)), rel=1e-6)


@pytest.mark.parametrize(("fields", "message"), [
    ({"activation_checkpointing": "full", "recompute_modules": ["moe_act"]}, "needs activation_checkpointing"),
    ({"activation_checkpointing": "selective", "recompute_modules": ["attention"]}, "unknown recompute module"),
    ({"activation_checkpointing": "selective", "recompute_modules": []}, "recompute_modules is empty"),
])
def test_bad_modules_are_refused_by_name(fields: dict[str, Any], message: str):
    with pytest.raises(ValidationError, match=message):
        TrainingSpec(model="qwen3-30b-a3b", **fields)


def test_modules_as_written():
    """Megatron's space-separated flag value, commas or a list: the same modules, in order, without repeats."""
    for written in ("moe_act layernorm", "moe_act,layernorm", ["moe_act", "layernorm", "moe_act"]):
        spec = TrainingSpec(model="qwen3-30b-a3b", activation_checkpointing="selective", recompute_modules=written)
        assert spec.recompute_modules == ("moe_act", "layernorm")


def test_the_command_line_echoes_the_modules_and_recompute_replaces_them():
    runner = CliRunner()
    args = ["predict", "--model", "qwen3-30b-a3b", "--nodes", "1", "--recompute", "selective", "--recompute-modules",
            "moe_act layernorm", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["scenario"]["training"]["recompute_modules"] == ["moe_act", "layernorm"]
    wrong = runner.invoke(app, [*args[:-3], "--recompute-modules", "attn"])
    assert wrong.exit_code != 0 and "unknown recompute module 'attn'" in str(wrong.exception)
    spec, *_ = apply_options(None, {"model": "qwen3-30b-a3b", "recompute": "selective", "recompute_modules": "moe"})
    _, _, training, _ = apply_options(spec, {"recompute": "full"})
    assert (training.activation_checkpointing, training.recompute_modules) == ("full", None)


CASE: dict[str, Any] = {
    "id": "user-qwen3-ep8",
    "model": {"name": "Qwen3-30B-A3B", "layers": 48, "hidden": 2048, "heads": 32, "kv_heads": 4, "head_dim": 128,
              "ffn": 768, "vocab": 151936, "seq_len": 4096, "num_experts": 128, "experts_per_token": 8},
    "training": {"framework": "Megatron-Core", "strategy": ["ep", "dp"], "ep": 8, "micro_batch": 1,
                 "global_batch": 64, "precision": "bf16", "activation_checkpointing": "selective"},
    "cluster": {"gpu": "H100 80GB", "gpus_per_node": 8, "num_gpus": 16},
    "metrics": {"tokens_per_s_per_GPU": 1000},
}


def mapped_case(base: dict[str, Any], **training: Any) -> Any:
    """`base`, a published case's entry, with these training fields, as the case reader maps it."""
    entry = json.loads(json.dumps(base))
    entry["training"].update(training)
    return map_case(parse_cases(yaml.safe_dump([entry]), "test")[0])


def _mapped(**training: Any) -> Any:
    return mapped_case(CASE, **training)


@pytest.mark.parametrize(("training", "modules"), [
    ({}, None),
    ({"activation_checkpointing": "selective (--recompute-modules moe_act layernorm)"}, ("moe_act", "layernorm")),
    ({"activation_checkpointing": "selective (the norms and the MoE activation)"}, ("moe_act", "layernorm")),
    ({"recompute_modules": "layernorm moe"}, ("layernorm", "moe")),
    ({"activation_checkpointing": "recompute-activations"}, None),
])
def test_a_cases_modules(training: dict[str, Any], modules: tuple[str, ...] | None):
    """Stated as a field, as Megatron's flag in the checkpointing text, or in its words (flagged; in Megatron-Core's
    order); plain selective is Megatron-Core's default."""
    mapped = _mapped(**training)
    assert mapped.skipped is None, mapped.skipped
    assert mapped.training.activation_checkpointing == "selective"
    assert mapped.training.recompute_modules == modules
    assert any("recompute modules read" in flag for flag in mapped.defaults) == ("activation_checkpointing" in training
                                                                                 and modules is not None)


def test_a_case_naming_mla_up_proj_in_its_words():
    """DeepSeek-V3's baseline as Megatron-LM's write-up gives it: 'up_proj' is the MLA up projection."""
    mapped = _mapped(activation_checkpointing="selective (--recompute-modules mlp up_proj: the dense layers' MLP and "
                                              "the MLA up projection)")
    assert mapped.skipped is None and mapped.training.recompute_modules == ("mla_up_proj", "mlp")


def test_the_python_api_takes_the_modules():
    """Scenario(recompute_modules=...) as the command line's flag; replacing them changes the step."""
    import simulator as cs
    light = cs.Scenario(model="qwen3-30b-a3b", nodes=1, ep=8, recompute="selective",
                        recompute_modules=["moe_act", "layernorm"])
    assert cs.predict(light).scenario["training"]["recompute_modules"] == ["moe_act", "layernorm"]
    assert cs.predict(light.replace(recompute_modules="moe")).step_time_s > cs.predict(light).step_time_s


def test_the_planner_drops_the_modules_with_other_recomputation():
    """A scenario's modules name what selective re-runs: the layouts the planner tries with none or full
    recomputation run without them (and are not refused for carrying them)."""
    import simulator as cs
    base = cs.Scenario(model="qwen3-30b-a3b", nodes=2, ep=8, seq_len=2048, strategy="zero1", recompute="selective",
                       recompute_modules="moe")
    found = cs.plan(base, ep=[8], tp=[1], pp=[1], recompute=["none", "full"], top=10)
    assert {layout.recompute for layout in found.layouts} == {"none", "full"} and not found.refused
    for layout in found.layouts:
        assert cs.predict(layout.scenario).scenario["training"]["recompute_modules"] is None


def _kept(model: Any, modules: tuple[str, ...], tp: int = 1, sp: bool = False) -> float:
    return model.activation_bytes_per_layer(B, S, "selective", tp, sp, recompute_modules=modules)


def test_the_modules_drop_their_outputs_by_hand():
    """What each module drops from a layer's kept activations (Korthikanti et al.'s terms, workloads.model):
    layernorm the two norms' outputs, 2 x 2 B x h a token (over tp only under sequence parallelism); mlp a dense
    MLP's two intermediates, 16 s b h / tp; moe_act the routed experts' activation output, 2 B x k x f_e a token;
    moe every routed and shared intermediate (4 B x k x f_e) and the k routed copies (2 B x k x h); mla_up_proj
    MLA's queries, keys and values at their widths."""
    sbh = TOKENS * 4096
    default = ("core_attn",)
    assert _kept(LLAMA, default) - _kept(LLAMA, ("core_attn", "layernorm")) == pytest.approx(4 * sbh, rel=1e-12)
    assert _kept(LLAMA, default, 4, True) - _kept(LLAMA, ("core_attn", "layernorm"), 4, True) == \
        pytest.approx(sbh, rel=1e-12)
    assert _kept(LLAMA, default, 2) - _kept(LLAMA, ("core_attn", "mlp"), 2) == pytest.approx(8 * sbh, rel=1e-12)
    assert _kept(QWEN, default) - _kept(QWEN, ("core_attn", "moe_act")) == pytest.approx(2 * TOKENS * 8 * 768,
                                                                                          rel=1e-12)
    assert _kept(QWEN, default) - _kept(QWEN, ("core_attn", "moe")) == \
        pytest.approx(4 * TOKENS * 8 * 768 + 2 * 8 * TOKENS * 2048, rel=1e-12)
    deepseek = transformer(load_model("deepseek-v3"))
    qkv = 2 * TOKENS * (128 * 192 + 128 * 192 + 128 * 128)
    assert _kept(deepseek, default) - _kept(deepseek, ("core_attn", "mla_up_proj")) == pytest.approx(qkv, rel=1e-12)
    assert _kept(LLAMA, ("moe", "moe_act", "shared_experts", "mla_up_proj", "core_attn")) == _kept(LLAMA, default)


def test_without_core_attn_the_scores_are_kept():
    """Modules that leave attention alone keep its score tensors (5 a s / h of s b h) where the kernel stores them."""
    scores = TOKENS * 4096 * 5 * 32 * S / 4096
    assert _kept(LLAMA, ("layernorm",)) - _kept(LLAMA, ("core_attn", "layernorm")) == pytest.approx(scores, rel=1e-12)


@pytest.mark.parametrize("more", [m for m in itertools.combinations(MODULES, 2)])
def test_naming_more_modules_never_holds_more(more: tuple[str, str]):
    """Metamorphic, on the whole job's memory per GPU (flash attention: no scores either way): a superset of modules
    holds no more, and moe or moe_act holds less than core_attn alone."""
    topology = load_preset("dgx-h100", nodes=1)

    def memory(modules: tuple[str, ...]) -> float:
        training = TrainingSpec(model="qwen3-30b-a3b", strategy=StrategySpec(kind="ddp"), micro_batch=1, seq_len=S,
                                activation_checkpointing="selective", recompute_modules=modules,
                                parallel=ParallelSpec(ep=8))
        return predict_step(topology, training, QWEN_SPEC).memory.activations_bytes

    assert memory(more) <= min(memory(more[:1]), memory(more[1:])) + 1e-6
    if {"moe", "moe_act"} & set(more):
        assert memory(more) < memory(("core_attn",))
