"""JAX rematerialisation policies as MaxText names them (workloads.remat): what each re-runs and keeps, by hand
for Llama 3 70B, their order, how they are read, and the step and memory they give."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from simulator.core.errors import ConfigError
from simulator.scenario import complete_training, with_framework
from simulator.training.compute import ComputeModel
from simulator.training.predict import predict_step
from topologies.hardware import gpu_spec
from topologies.presets import load_preset
from workloads.model import transformer
from workloads.presets import load_model
from workloads.remat import REMAT_POLICIES, policy_name, recomputed_gemms
from workloads.spec import Checkpointing, ParallelSpec, StrategySpec, TrainingSpec

LLAMA3_70B = load_model("llama3-70b")  # h 8192, 64 heads, 8 kv heads of 128, f 28672 gated, 80 layers
H, Q, KV, F, LAYERS = 8192, 8192, 1024, 28672, 80

# MaxText's configs/base.yml: "fastest to slowest" and "HBM usage highest to lowest", then jax.checkpoint's default
LADDER = ["minimal_with_context", "minimal", "save_dot_with_context_except_mlp", "save_dot_except_mlp",
          "save_qkv_proj", "nothing_saveable"]


def test_the_spec_names_every_policy():
    """The Checkpointing literal and the policy table list the same JAX policies."""
    assert set(Checkpointing.__args__) == {"none", "selective", "full", "op", *REMAT_POLICIES}


def test_what_each_policy_re_runs():
    """A matmul whose output backward needs is re-run unless kept; the down projection never is."""
    assert recomputed_gemms("nothing_saveable") == ("qkv", "attn_out", "mlp_up")
    assert recomputed_gemms("save_qkv_proj") == ("attn_out", "mlp_up")
    assert recomputed_gemms("save_out_proj") == ("qkv", "mlp_up")
    assert recomputed_gemms("save_dot_except_mlp") == recomputed_gemms("save_dot_except_mlpwi") == ("mlp_up",)
    assert recomputed_gemms("minimal") == recomputed_gemms("minimal_with_context") == ()


def test_save_qkv_proj_flops_by_hand():
    """Llama 3 70B under save_qkv_proj re-runs the output projection (2 h q), the MLP's gate and up (2 x 2 h f)
    and attention's forward (2 x 2 s q) per token and layer; nothing_saveable adds the qkv matmul (2 h (q + 2
    kv)), and is full recomputation less the down projection (2 f h)."""
    model, s = transformer(LLAMA3_70B), 8192
    base = model.model_flops_per_token(s)
    by_hand = LAYERS * (2 * H * Q + 2 * 2 * H * F + 2 * 2 * s * Q)
    assert model.hardware_flops_per_token(s, "save_qkv_proj") - base == pytest.approx(by_hand, rel=1e-12)
    nothing = model.hardware_flops_per_token(s, "nothing_saveable") - base
    assert nothing - by_hand == pytest.approx(LAYERS * 2 * H * (Q + 2 * KV), rel=1e-12)
    full = model.hardware_flops_per_token(s, "full") - base
    assert full - nothing == pytest.approx(LAYERS * 2 * F * H, rel=1e-12)
    assert model.hardware_flops_per_token(s, "minimal_with_context") == base


def test_kept_bytes_by_hand():
    """save_qkv_proj keeps the block input and q, k, v: 2 bytes x (h + q + 2 kv) a token; minimal_with_context
    adds the output projection's h, the MLP's 2 f and attention's output with its fp32 log-sum-exp."""
    model, s, b = transformer(LLAMA3_70B), 8192, 2
    qkv = model.activation_bytes_per_layer(b, s, "save_qkv_proj")
    assert qkv == pytest.approx(s * b * 2 * (H + Q + 2 * KV))
    most = model.activation_bytes_per_layer(b, s, "minimal_with_context")
    assert most - qkv == pytest.approx(s * b * (2 * (H + 2 * F + Q) + 4 * 64))
    assert model.activation_bytes_per_layer(b, s, "nothing_saveable") == model.activation_bytes_per_layer(b, s, "full")


def test_the_ladder_trades_memory_for_recomputation():
    """Down MaxText's list, each policy recomputes no less and keeps no more than the one before it, and
    nothing_saveable recomputes less than full (not the down projection) while keeping the same."""
    model = transformer(LLAMA3_70B)
    compute = ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16", attention_kernel="cudnn")
    recompute = [compute.layer(model, 2, 8192, policy).recompute_s for policy in LADDER]
    kept = [model.activation_bytes_per_layer(2, 8192, policy) for policy in LADDER]
    assert recompute == sorted(recompute) and len(set(recompute)) == len(recompute)
    assert kept == sorted(kept, reverse=True) and len(set(kept)) == len(kept)
    full = compute.layer(model, 2, 8192, "full").recompute_s
    assert full - recompute[-1] == pytest.approx(compute.gemms_s(model, 2, 8192)["mlp_down"], rel=1e-9)


@pytest.mark.parametrize(("written", "read"), [
    ("save_qkv_proj", "save_qkv_proj"), ("remat_policy=full", "nothing_saveable"),
    ("remat_policy save_qkv_proj", "save_qkv_proj"), ("minimal_flash", "minimal_with_context"),
    ("Remat_Policy: minimal", "minimal"), ("full", "full"),
])
def test_maxtexts_spellings_are_read(written, read):
    assert TrainingSpec(model="llama3-70b", activation_checkpointing=written).activation_checkpointing == read


def test_an_unknown_policy_names_the_choices():
    assert policy_name("remat_policy=save_everything") is None
    with pytest.raises(ValidationError, match="save_qkv_proj"):
        TrainingSpec(model="llama3-70b", activation_checkpointing="remat_policy=save_everything")


def test_maxtext_recomputes_by_its_default_policy():
    """MaxText's base.yml remat_policy 'full' is jax.checkpoint without a policy: nothing_saveable, unless the
    job states its own."""
    assert with_framework(TrainingSpec(model="llama3-70b", framework="maxtext")).activation_checkpointing == \
        "nothing_saveable"
    stated = TrainingSpec(model="llama3-70b", framework="maxtext", activation_checkpointing="minimal")
    assert with_framework(stated).activation_checkpointing == "minimal"


def test_a_mixture_takes_nothing_saveable_only():
    """A mixture of experts' tensors are named otherwise in MaxText: the named policies are refused with the
    choices left; nothing_saveable re-runs every matmul but the down projections."""
    mixtral = transformer(load_model("mixtral-8x7b"))
    with pytest.raises(ConfigError, match="dense blocks without MLA; use nothing_saveable, selective or full"):
        mixtral.remat_recomputed_gemms("save_qkv_proj")
    names = mixtral.remat_recomputed_gemms("nothing_saveable")
    assert "mlp_down" not in names and {"qkv", "attn_out", "mlp_up"} <= set(names)


def predict(checkpointing: str, parallel: ParallelSpec | None = None, nodes: int = 2):
    model = load_model("llama2-7b")
    topology = load_preset("dgx-h100", nodes=nodes)
    training = TrainingSpec(model=model.name, seq_len=4096, micro_batch=2, global_batch=64,
                            activation_checkpointing=checkpointing, parallel=parallel or ParallelSpec(),
                            strategy=StrategySpec(kind="fsdp" if parallel is None else "zero1"))
    return predict_step(topology, complete_training(training, model, topology), model)


@pytest.mark.parametrize("parallel", [None, ParallelSpec(tp=2, sequence_parallel=True),
                                      ParallelSpec(tp=2, pp=2, cp=2, sequence_parallel=True)],
                         ids=["fsdp", "tp-sp", "tp-pp-cp"])
def test_a_policys_step_lies_between_none_and_full(parallel):
    """Under FSDP, TP with sequence parallelism and a TP x PP x CP pipeline, save_qkv_proj's step is slower than
    no recomputation and faster than full; its memory lies between theirs."""
    none, policy, full = (predict(c, parallel) for c in ("none", "save_qkv_proj", "full"))
    assert none.step_time_s < policy.step_time_s < full.step_time_s
    assert full.memory.activations_bytes < policy.memory.activations_bytes < none.memory.activations_bytes
