"""FLOPs: Narayanan et al. 2021 eq. 3 and the 6N + 12 L h s rule, GEMM shapes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workloads.model import transformer
from workloads.presets import load_model
from workloads.spec import ModelSpec


def test_gpt3_175b_model_flops_per_token_by_hand():
    """GPT-3 175B at s=2048: 6 (96 x 12 h^2 + h V) + 12 x 96 x h x 2048 with h=12288, V=50257 = 1.0764e12."""
    h, layers, vocab, s = 12288, 96, 50257, 2048
    by_hand = 6 * (layers * 12 * h**2 + h * vocab) + 12 * layers * h * s
    model = transformer(load_model("gpt3-175b"))
    assert model.model_flops_per_token(s) == pytest.approx(by_hand, rel=1e-12)
    assert by_hand == pytest.approx(1.0764e12, rel=1e-4)


def test_full_recomputation_is_narayanan_eq3():
    """With full recomputation, B s tokens cost 96 B s L h^2 (1 + s/(6h) + V/(16 L h)) (Narayanan et al. 2021 eq. 3)."""
    model = transformer(load_model("gpt3-175b"))
    h, layers, vocab, s, batch = 12288, 96, 50257, 2048, 1536
    eq3 = 96 * batch * s * layers * h**2 * (1 + s / (6 * h) + vocab / (16 * layers * h))
    assert model.hardware_flops_per_token(s, "full") * batch * s == pytest.approx(eq3, rel=1e-12)


def test_selective_recomputation_adds_the_attention_forward():
    """Selective recomputation adds one forward of Q K^T and attention x V: 4 L h s per token."""
    model = transformer(load_model("llama2-7b"))
    extra = model.hardware_flops_per_token(4096, "selective") - model.model_flops_per_token(4096)
    assert extra == pytest.approx(4 * 32 * 4096 * 4096)
    assert model.hardware_flops_per_token(4096, "none") == model.model_flops_per_token(4096)


def test_head_forward_flops():
    """The output projection costs 2 h V per token (Llama-2-7B: 2 x 4096 x 32000)."""
    assert transformer(load_model("llama2-7b")).head_forward_flops(3) == 3 * 2 * 4096 * 32000


def test_gqa_gated_gemm_shapes():
    """Llama-2-70B: fused qkv n = h + 2 x 8 x 128 = 10240, gate+up fused n = 2 x 28672, down k = 28672."""
    gemms = transformer(load_model("llama2-70b")).layer_gemms(4096)
    assert gemms == [("qkv", 4096, 10240, 8192), ("attn_out", 4096, 8192, 8192),
                     ("mlp_up", 4096, 57344, 8192), ("mlp_down", 4096, 8192, 28672)]


def test_moe_gemm_shapes_and_groups():
    """Mixtral 8x7B on 4096 tokens: the router n = 8 experts; each token goes to 2 experts, so the routed
    gate+up GEMM has 8192 rows, n = 2 x 14336, and its rows split into 8 expert GEMMs."""
    model = transformer(load_model("mixtral-8x7b"))
    gemms = model.layer_gemms(4096)
    assert gemms[2:] == [("router", 4096, 8, 4096), ("mlp_up", 8192, 28672, 4096), ("mlp_down", 8192, 4096, 14336)]
    assert (model.gemm_experts("mlp_up"), model.gemm_experts("mlp_down"), model.gemm_experts("qkv")) == (8, 8, 1)
    # forward FLOPs per token: twice the active matrices (qkv 4096 x 6144, attn_out 4096^2, router, 2 experts)
    active = 4096 * 6144 + 4096 * 4096 + 4096 * 8 + 2 * 3 * 4096 * 14336
    assert model.layer_forward_flops(1, 1) == 2 * active + 4 * 4096


@given(
    layers=st.integers(1, 4), heads=st.sampled_from([1, 2, 4, 8]), head_dim=st.sampled_from([8, 16, 64]),
    groups=st.sampled_from([1, 2, 4]), ffn=st.integers(1, 512), gated=st.booleans(), bias=st.booleans(),
    tokens=st.integers(1, 4096), seq_len=st.integers(1, 4096),
)
def test_layer_flops_are_the_gemms_plus_attention(layers, heads, head_dim, groups, ffn, gated, bias, tokens, seq_len):
    """For any shape, the layer forward is sum(2 m n k) over its GEMMs plus 4 tokens s h, and the
    GEMMs multiply exactly the weight matrices (params less biases and norms)."""
    kv = max(1, heads // groups)
    spec = ModelSpec(name="m", layers=layers, hidden=heads * head_dim, heads=heads, kv_heads=kv,
                     ffn_hidden=ffn, gated_mlp=gated, bias=bias, vocab=100)
    model = transformer(spec)
    gemm_flops = sum(2 * m * n * k for _, m, n, k in model.layer_gemms(tokens))
    assert model.layer_forward_flops(tokens, seq_len) == gemm_flops + 4 * tokens * seq_len * spec.hidden
    weights = model.attention_params_per_layer + model.mlp_params_per_layer
    biases = (2 * spec.hidden + 2 * model.kv_dim + (2 if gated else 1) * ffn + spec.hidden) if bias else 0
    assert model.matmul_params_per_layer == weights - biases
