"""A model's pre-training sequence length (the context a job that states none runs at) and Megatron-LM's
recomputation flags as activation_checkpointing values."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from simulator.core.errors import ConfigError
from workloads.presets import load_model, model_from_yaml_text
from workloads.spec import TrainingSpec


@pytest.mark.parametrize(("name", "max_len", "train_len"), [
    ("gpt3-175b", 2048, 2048),        # Brown et al. 2020, section 2.1: n_ctx 2048
    ("llama2-70b", 4096, 4096),       # Touvron et al. 2023, Table 1
    ("llama3-70b", 8192, 8192),       # config max_position_embeddings 8192
    ("llama3-405b", 131072, 8192),    # Grattafiori et al. 2024, 3.4.1: 8,192-token sequences
    ("qwen3-235b-a22b", 32768, 4096),  # Qwen3 report 3.2: stages S1 and S2 at 4,096 tokens
    ("mpt-30b", 8192, 2048),          # model card: trained at 2048, adapted to 8192
])
def test_presets_carry_their_training_context(name: str, max_len: int, train_len: int):
    """max_seq_len is what the model was built or extended for; training_context the pre-training's."""
    model = load_model(name)
    assert (model.max_seq_len, model.training_context) == (max_len, train_len)


def test_training_context_defaults_to_the_maximum():
    """A model stating no train_seq_len trains at its max_seq_len (a config.json says nothing else)."""
    text = "name: m\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nmax_seq_len: 512\n"
    assert model_from_yaml_text(text, "m.yaml").training_context == 512


def test_training_context_beyond_the_maximum_is_refused():
    """train_seq_len > max_seq_len names both (positions beyond the table do not exist)."""
    text = "name: m\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nmax_seq_len: 512\ntrain_seq_len: 1024\n"
    with pytest.raises(ConfigError, match="train_seq_len.*1024.*max_seq_len.*512"):
        model_from_yaml_text(text, "m.yaml")


@pytest.mark.parametrize(("given", "meant"), [
    ("recompute-activations", "selective"), ("--recompute-activations", "selective"),
    ("recompute-granularity full", "full"), ("--recompute-granularity=full", "full"),
    ("recompute_granularity selective", "selective"), ("checkpoint-activations", "full"),
    ("full", "full"), ("none", "none"),
])
def test_megatron_flag_names_are_checkpointing_values(given: str, meant: str):
    """Megatron-LM's --recompute-activations means selective recomputation, --recompute-granularity full (and
    the older --checkpoint-activations) full recomputation (megatron/training/arguments.py)."""
    assert TrainingSpec(model="m", activation_checkpointing=given).activation_checkpointing == meant


def test_unknown_checkpointing_is_refused():
    """A value neither ours nor Megatron's: the field and the valid values."""
    with pytest.raises(ValidationError, match="activation_checkpointing"):
        TrainingSpec(model="m", activation_checkpointing="recompute-granularity partial")


def test_cli_recompute_refuses_an_unknown_value_in_one_line():
    """--recompute sometimes exits 2 with one line naming the field (a Megatron name runs: see
    tests/cli/test_scenario_defaults.py)."""
    bad = subprocess.run([sys.executable, "-m", "simulator.cli.app", "predict", "--recompute", "sometimes"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "activation_checkpointing" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
