"""Activation memory: Korthikanti et al. 2022 Table 2 by hand on a small case, and its invariants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.core.errors import ConfigError
from workloads.model import transformer
from workloads.spec import ModelSpec

# s=4, b=2, h=8, a=2: s b h = 64 and 5 a s / h = 5
SMALL = transformer(ModelSpec(name="small", layers=3, hidden=8, heads=2, vocab=10))


@pytest.mark.parametrize(("checkpointing", "tp", "sp", "expected"), [
    ("none", 1, False, 64 * (34 + 5)),             # s b h (34 + 5 a s / h)
    ("none", 2, False, 64 * (10 + 12 + 2.5)),      # s b h (10 + 24/t + 5 a s / (h t))
    ("none", 2, True, 64 / 2 * (34 + 5)),          # s b h / t (34 + 5 a s / h)
    ("selective", 1, False, 64 * 34),              # s b h 34
    ("selective", 2, False, 64 * (10 + 12)),       # s b h (10 + 24/t)
    ("selective", 2, True, 64 * 34 / 2),           # s b h 34 / t
    ("full", 1, False, 2 * 64),                    # 2 s b h
    ("full", 2, True, 2 * 64 / 2),                 # 2 s b h / t (input sharded along the sequence)
])
def test_activation_bytes_per_layer_by_hand(checkpointing, tp, sp, expected):
    """Each Table 2 row, evaluated by hand for s=4, b=2, h=8, a=2."""
    assert SMALL.activation_bytes_per_layer(2, 4, checkpointing, tp, sp) == pytest.approx(expected)


def test_moe_activation_bytes_by_hand():
    """A mixture of experts (4 experts, top-2, f_e = f = 32 = 4 h) keeps the dense block's bytes plus the wider
    intermediate, 16 s b h ((k + S) f_e - f) / (4 h) = 16 x 64 x 1, and the k routed input copies, 2 k s b h."""
    moe = transformer(ModelSpec(name="m", layers=3, hidden=8, heads=2, vocab=10, experts=4, experts_per_token=2))
    dense = SMALL.activation_bytes_per_layer(2, 4, "selective")
    assert moe.activation_bytes_per_layer(2, 4, "selective") == pytest.approx(dense + 16 * 64 + 4 * 64)
    assert moe.activation_bytes_per_layer(2, 4, "full") == SMALL.activation_bytes_per_layer(2, 4, "full")


def test_layers_activation_bytes_is_layers_times_one():
    """All blocks on one GPU keep L times one block's activations."""
    assert SMALL.layers_activation_bytes(2, 4, "none") == 3 * 64 * 39


def test_embedding_and_output_activation_bytes_by_hand():
    """Embedding dropout mask s b h = 64; output 4 s b h + 4 s b V = 256 + 320, logits / t with TP."""
    assert SMALL.embedding_activation_bytes(2, 4) == 64
    assert SMALL.output_activation_bytes(2, 4) == 576
    assert SMALL.output_activation_bytes(2, 4, tp=2) == 256 + 160


def test_unknown_checkpointing_is_a_config_error():
    """A checkpointing mode other than none/selective/full is refused, naming the field."""
    with pytest.raises(ConfigError, match="activation_checkpointing"):
        SMALL.activation_bytes_per_layer(1, 4, "some")  # type: ignore[arg-type]


@given(s=st.integers(1, 8192), b=st.integers(1, 16), heads=st.sampled_from([1, 8, 32]),
       head_dim=st.sampled_from([64, 128]), t=st.sampled_from([1, 2, 4, 8]))
def test_recomputation_and_parallelism_only_save_memory(s, b, heads, head_dim, t):
    """full <= selective <= none; sequence parallelism never adds; at t=1 the TP forms equal the plain one."""
    model = transformer(ModelSpec(name="m", layers=1, hidden=heads * head_dim, heads=heads, vocab=10))
    for sp in (False, True):
        full, selective, none = (model.activation_bytes_per_layer(b, s, c, t, sp)
                                 for c in ("full", "selective", "none"))
        assert full <= selective <= none
    for c in ("none", "selective", "full"):
        assert model.activation_bytes_per_layer(b, s, c, t, True) <= model.activation_bytes_per_layer(b, s, c, t, False)
        assert model.activation_bytes_per_layer(b, s, c, 1, False) == pytest.approx(
            model.activation_bytes_per_layer(b, s, c, 1, True))
