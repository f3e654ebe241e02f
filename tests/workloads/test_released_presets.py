"""The presets of released models named in published runs (Mistral 7B, Qwen2.5, Gemma 7B, Llama 3.2, OPT-175B):
their shapes against the published counts and their pre-training context."""

from __future__ import annotations

import pytest

from workloads.model import transformer
from workloads.presets import load_model


def test_gemma_7b_blocks_are_the_papers_to_the_parameter():
    """Gemma 7B's blocks (heads of 256 apart from hidden / heads, GeGLU of 24,576, RMSNorm) count exactly Table 2's
    7,751,248,896 non-embedding parameters; its one tied embedding is 256,000 x 3,072 (no output matrix)."""
    model = transformer(load_model("gemma-7b"))
    assert model.total_params - model.embedding_params == 7_751_248_896
    assert (model.embedding_params, model.output_params) == (256_000 * 3072, 0)


def test_opt_175b_has_gpt3_175b_blocks_and_its_own_vocabulary():
    """OPT-175B was sized as GPT-3 175B (96 x 12288, 96 heads, MLP 4h, biases, learned positions, tied): the
    same blocks; only the vocabulary differs (50,272 against 50,257): 15 x 12,288 parameters apart."""
    opt, gpt3 = transformer(load_model("opt-175b")), transformer(load_model("gpt3-175b"))
    assert opt.params_per_layer == gpt3.params_per_layer
    assert opt.total_params - gpt3.total_params == 15 * 12288


@pytest.mark.parametrize(("preset", "context"), [("mistral-7b", 8192), ("qwen2.5-7b", 4096), ("qwen2.5-72b", 4096),
                                                 ("gemma-7b", 8192), ("llama3.2-1b", 8192), ("llama3.2-3b", 8192),
                                                 ("opt-175b", 2048)])
def test_a_job_without_a_sequence_length_runs_at_the_pre_training_context(preset, context):
    """Each preset's training context is its main pre-training's sequence length, not its longest context."""
    assert load_model(preset).training_context == context


def test_llama32_ties_its_embeddings():
    """Llama 3.2 1B and 3B share the input embedding with the output layer: no output matrix."""
    for preset in ("llama3.2-1b", "llama3.2-3b"):
        assert transformer(load_model(preset)).output_params == 0
