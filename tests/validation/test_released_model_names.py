"""Released models named without their shape, as published runs write them, resolve to the model preset of that
release and size, and never to another size or family."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from simulator.validation.training_cases import MappedCase, _released_preset, map_case, parse_cases

# A Megatron-Core run over 256 H100 naming its model only (hand-made in the cases' schema).
_RUN: dict[str, Any] = {
    "id": "user-named-model-256gpu",
    "training": {"framework": "Megatron-Core", "strategy": ["tp", "pp", "dp"], "tp": 8, "pp": 4, "micro_batch": 1,
                 "global_batch": 256, "precision": "bf16"},
    "cluster": {"gpu": "H100 80GB", "gpus_per_node": 8, "num_gpus": 256},
    "metrics": {"tokens_per_s_per_GPU": 1000},
}


def _map_named(model: dict[str, Any]) -> MappedCase:
    """The run above with `model` as its model section, mapped."""
    return map_case(parse_cases(yaml.safe_dump([{**_RUN, "model": model}]), "test")[0])

NAMES = [
    ("LLAMA2-7B", "llama2-7b"),
    ("Llama-2 70B", "llama2-70b"),
    ("LLaMA 2 7B", "llama2-7b"),
    ("meta-llama/Llama-2-7b-hf", "llama2-7b"),
    ("Llama-2-70b-chat-hf", "llama2-70b"),
    ("Llama_2_13B", "llama2-13b"),
    ("Meta-Llama-3-8B", "llama3-8b"),
    ("meta-llama/Meta-Llama-3-70B-Instruct", "llama3-70b"),
    ("Meta Llama 3 8B", "llama3-8b"),
    ("Llama 3.1 8B", "llama3-8b"),
    ("Llama 3.1 70B", "llama3-70b"),
    ("llama3.1-405b", "llama3-405b"),
    ("Llama-3.1-405B-Instruct", "llama3-405b"),
    ("Llama 3.3 70B", "llama3-70b"),
    ("Llama 3.2 1B", "llama3.2-1b"),
    ("meta-llama/Llama-3.2-3B-Instruct", "llama3.2-3b"),
    ("Mistral 7B", "mistral-7b"),
    ("mistralai/Mistral-7B-v0.1", "mistral-7b"),
    ("Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
    ("Qwen2.5-72B", "qwen2.5-72b"),
    ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
    ("Qwen-2.5 7B", "qwen2.5-7b"),
    ("Gemma 7B", "gemma-7b"),
    ("google/gemma-7b-it", "gemma-7b"),
    ("OPT-175B", "opt-175b"),
    ("GPT-3 175B", "gpt3-175b"),
    ("MPT-7b", "mpt-7b"),
    # NVIDIA NeMo's performance tables (_NEMO_TABLE_NAMES: the recipe each row ran names the generation).
    ("GPT3-5B", "gpt3-5b"),
    ("GPT3-20B", "gpt3-20b"),
    ("Nemotron-8B", "nemotron3-8b"),
    ("Nemotron-22B", "nemotron3-22b"),
    ("Nemotron-15B", "nemotron4-15b"),
    ("Nemotron-340B", "nemotron4-340b"),
    ("LLAMA4-Scout-LLM", "llama4-scout-17b-16e"),
    ("BLOOM-176B", "bloom-176b"),
    ("bigscience/bloom-176b", "bloom-176b"),
    ("meta-llama/Llama-4-Scout-17B-16E", "llama4-scout-17b-16e"),
    # Another size, family or release, and names of no released model: no preset.
    ("Llama 3.2 8B", None),       # no such size: never llama3-8b
    ("Llama 2 8B", None),         # never llama3-8b nor llama2-7b
    ("Llama 3 7B", None),         # never llama2-7b
    ("Code Llama 7B", None),      # vocabulary 32016: not llama2-7b
    ("Llama-2-7B-32K", None),
    ("Mistral 7B v0.3", None),    # vocabulary 32768: not v0.1
    ("Qwen2 72B", None),          # never qwen2.5-72b
    ("Qwen2.5 14B", None),
    ("Gemma 2 9B", None),
    ("Falcon-40B", None),         # parallel attention and MLP: not expressible as a preset
    ("OPT-66B", None),
    ("MPT-1b", None),
    ("GPT 70B", None),
    ("Nemotron-9B", None),        # no NeMo table names it: never nemotron3-8b
    ("Nemotron-4B", None),        # Nemotron-3 4B has no preset
    ("Nemotron-H-8B", None),      # a hybrid Mamba model, not Nemotron-3 8B
    ("LLAMA4-Maverick-LLM", None),  # interleaved dense and MoE blocks: no preset
    ("1.2B (largest trainable with data parallelism alone)", None),
    ("", None),
]


@pytest.mark.parametrize(("name", "preset"), NAMES, ids=[n or "empty" for n, _ in NAMES])
def test_released_model_name_resolves_to_its_preset_only(name, preset):
    """Case, spaces, dashes and underscores, vendor prefixes, a family's version ('Llama 3.1', 'LLaMA 2') and
    suffixes of the same shapes (-hf, -instruct, -chat, -it, v0.1) are read; sizes and families are not guessed."""
    found = _released_preset(name)
    assert (found.name if found is not None else None) == preset


def test_llama31_case_takes_llama3_shapes_and_says_so():
    """A run of 'Llama 3.1 70B' without its shape takes the llama3-70b preset, and the flag names the preset, its
    config and that Llama 3.1 has Llama 3's shapes."""
    mapped = _map_named({"name": "Llama 3.1 70B", "seq_len": 4096})
    assert mapped.skipped is None, mapped.skipped
    assert mapped.model is not None and (mapped.model.layers, mapped.model.hidden) == (80, 8192)
    assert ("model shape not stated: the released model's public config (model preset llama3-70b, "
            "meta-llama/Meta-Llama-3-70B config.json; Llama 3.1 has Llama 3's shapes)") in mapped.defaults


def test_nemo_table_name_takes_its_recipes_model_and_says_so():
    """A run of NeMo's 'Nemotron-8B' takes the nemotron3-8b preset (Nemotron3Config8B: squared-ReLU MLP, vocabulary
    256000), and the flag names the preset and the NeMo recipe that says which model the row ran."""
    mapped = _map_named({"name": "Nemotron-8B", "seq_len": 4096})
    assert mapped.skipped is None, mapped.skipped
    assert mapped.model is not None
    assert (mapped.model.layers, mapped.model.hidden, mapped.model.gated_mlp, mapped.model.vocab) == (
        32, 4096, False, 256000)
    assert any("model preset nemotron3-8b" in d and "NeMo's Nemotron-8B is Nemotron-3 8B (pretrain_nemotron3_8b.py)"
               in d for d in mapped.defaults)


def test_unknown_release_is_skipped_naming_the_missing_shape():
    """A released model without a preset (Falcon-40B) and without its shape or size is skipped, naming what is
    missing (the size in its name is not taken for a GPT shape: its architecture is its own)."""
    mapped = _map_named({"name": "Falcon-40B"})
    assert mapped.skipped == ("model shape not stated: layers, hidden, heads (nor a size in params, e.g. '18B', to "
                              "derive them)")


@pytest.mark.parametrize(("model", "expected", "filled"), [
    ({"name": "Llama 3.1 8B", "layers": 32, "hidden": 4096, "heads": 32}, (14336, 8, 128256), "kv_heads, ffn, vocab"),
    ({"name": "Llama 3.1 8B", "layers": 32, "hidden": 4096, "heads": 32, "vocab": "128K"}, (14336, 8, 128000),
     "kv_heads, ffn"),
    ({"name": "Grok 1 314B", "layers": 64}, (32768, 8, 131072), "hidden, heads, kv_heads, ffn, vocab"),
])
def test_a_released_model_named_with_part_of_its_shape_takes_the_rest(model, expected, filled):
    """Part of the shape stated, agreeing with the released model's layers, hidden size and heads: the rest
    (FFN width, vocabulary, KV heads, the family's block) from its preset, flagged; what is stated wins."""
    m = _map_named(model)
    assert m.skipped is None, m.skipped
    assert (m.model.ffn_hidden, m.model.kv_heads, m.model.vocab) == expected
    assert any(d.startswith(f"{filled} not stated: the released model's") for d in m.defaults), m.defaults


def test_a_shape_that_disagrees_with_the_named_release_is_not_completed_from_it():
    """A stated hidden size other than the release's: the name is not that model; the missing vocabulary is
    then a reason to skip, not a value to borrow."""
    m = _map_named({"name": "Llama 3.1 8B", "layers": 32, "hidden": 5120, "heads": 32})
    assert m.skipped == "model shape not stated: vocab"
