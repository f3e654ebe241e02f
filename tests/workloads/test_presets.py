"""Model presets and the resolution of a preset name, model YAML file or config.json path."""

from __future__ import annotations

from importlib import resources

import pytest

from simulator.core.errors import ConfigError
from workloads.model import transformer
from workloads.presets import list_models, load_model, model_from_yaml_text, resolve_model

EXPECTED = {"bert-large", "bloom-176b", "deepseek-v3", "gemma-7b", "gpt2-xl", "grok1-314b", "gpt3-13b", "gpt3-175b",
            "gpt3-20b",
            "gpt3-5b", "llama2-13b", "llama2-70b", "llama2-7b", "llama3-405b", "llama3-70b", "llama3-8b", "llama3.2-1b",
            "llama3.2-3b", "llama4-scout-17b-16e", "mistral-7b", "mixtral-8x22b", "mixtral-8x7b", "mpt-30b", "mpt-70b",
            "mpt-7b", "nemotron3-22b", "nemotron3-8b", "nemotron4-15b", "nemotron4-340b", "opt-175b",
            "qwen2.5-72b", "qwen2.5-7b", "qwen3-235b-a22b", "qwen3-30b-a3b"}


def test_list_models_names_every_preset_with_its_size():
    """list_models lists every preset file, sorted, each with a summary starting with its parameter count."""
    models = list_models()
    assert [name for name, _ in models] == sorted(EXPECTED)
    assert dict(models)["llama2-7b"].startswith("6.74B params: 32 layers x 4096")
    assert dict(models)["bert-large"].startswith("334M params")
    # BLOOM's published size: 176,247M parameters (BLOOM paper, Table 3)
    assert dict(models)["bloom-176b"].startswith("176.25B params: 70 layers x 14336")
    assert dict(models)["mixtral-8x7b"].startswith("46.70B params (12.9B active): 32 layers x 4096, 32 heads (8 kv), "
                                                   "8 experts (top-2)")


def test_every_preset_names_itself_and_its_source():
    """Each preset's name is its file name and it carries a source."""
    for name in EXPECTED:
        spec = load_model(name)
        assert spec.name == name and spec.source


def test_every_preset_file_cites_sources_in_comments():
    """Each preset YAML has a comment on each shape line (the figure's source)."""
    folder = resources.files("workloads").joinpath("presets")
    for name in EXPECTED:
        text = folder.joinpath(f"{name}.yaml").read_text(encoding="utf-8")
        for line in text.splitlines():
            if line.split(":")[0] in ("layers", "hidden", "heads", "vocab"):
                assert "#" in line, f"{name}: {line}"


def test_unknown_preset_lists_the_names():
    """An unknown preset name is refused with the available names."""
    with pytest.raises(ConfigError, match="model preset 'llama9' unknown; available: bert-large, bloom-176b, "
                       "deepseek-v3, gemma-7b, gpt2-xl"):
        load_model("llama9")


def test_hidden_not_multiple_of_heads_is_named():
    """A model whose hidden size is not a multiple of its heads is refused, naming hidden and heads."""
    with pytest.raises(ConfigError, match=r"my.yaml: model: hidden \(1000\) must be a multiple of heads \(3\)"):
        model_from_yaml_text("name: m\nlayers: 2\nhidden: 1000\nheads: 3\nvocab: 10\n", "my.yaml")


def test_unknown_field_and_non_mapping_are_named():
    """A misspelled field is named; a YAML list is not a model."""
    with pytest.raises(ConfigError, match="my.yaml: layer: Extra inputs are not permitted"):
        model_from_yaml_text("name: m\nlayer: 2\nlayers: 2\nhidden: 8\nheads: 2\nvocab: 10\n", "my.yaml")
    with pytest.raises(ConfigError, match="expected a mapping of model fields, got list"):
        model_from_yaml_text("- 1\n", "my.yaml")


def test_gated_mlp_without_ffn_hidden_is_refused():
    """A gated MLP has no standard width, so ffn_hidden must be given."""
    spec = model_from_yaml_text("name: g\nlayers: 1\nhidden: 8\nheads: 2\nvocab: 10\ngated_mlp: true\n", "g.yaml")
    with pytest.raises(ConfigError, match="model g: ffn_hidden is required when gated_mlp is true"):
        transformer(spec)
    moe = spec.model_copy(update={"experts": 4, "experts_per_token": 2, "expert_ffn_hidden": 4})
    with pytest.raises(ConfigError, match="for a mixture of experts, a dense block's MLP width"):
        transformer(moe)  # expert_ffn_hidden given: the message says what ffn_hidden is for


def test_resolve_model_accepts_name_yaml_json_and_folder(tmp_path, llama2_70b_config):
    """resolve_model takes a preset name, a model YAML file, a config.json, or a folder holding one."""
    assert resolve_model("mpt-70b") == load_model("mpt-70b")
    (tmp_path / "m.yaml").write_text("name: m\nlayers: 2\nhidden: 8\nheads: 2\nvocab: 10\n")
    assert resolve_model(str(tmp_path / "m.yaml")).hidden == 8
    (tmp_path / "config.json").write_text(llama2_70b_config)
    assert resolve_model(str(tmp_path / "config.json")).kv_heads == 8
    assert resolve_model(str(tmp_path)).name == "meta-llama/Llama-2-70b-hf"


def test_resolve_model_unknown_name_or_missing_file(tmp_path):
    """An unknown name lists the presets; a missing file is named."""
    with pytest.raises(ConfigError, match="available: bert-large"):
        resolve_model("nope")
    with pytest.raises(ConfigError, match="cannot read model file"):
        resolve_model(str(tmp_path / "missing.yaml"))

