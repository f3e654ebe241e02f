"""`Scenario`: built from keyword arguments, data or a file, presets by name, immutable, overrides by `replace`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simulator import ConfigError, Scenario, predict

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_default_is_the_embedded_scenario():
    """`Scenario()`: Llama-2-7B, FSDP, 4 x DGX H100, global batch 256 (simulator.scenario.DEFAULT_SCENARIO)."""
    s = Scenario()
    assert (s.model.name, s.topology.name, s.nodes, s.n_gpus) == ("llama2-7b", "dgx-h100", 4, 32)
    assert (s.training.strategy.kind, s.training.global_batch) == ("fsdp", 256)


def test_a_model_alone_keeps_only_the_cluster():
    """With a model and no file, the job's fields come from the model: its sequence, micro-batch 1, no
    accumulation (docs/scenarios.md); with TP the strategy is ddp."""
    s = Scenario(model="llama2-13b", tp=2)
    assert s.training.seq_len == 4096 and s.training.micro_batch == 1
    assert s.training.global_batch == 16  # 32 GPUs / TP 2, one sequence each
    assert s.training.strategy.kind == "ddp"


def test_presets_by_name_and_with_fields_replaced():
    """A topology preset with some fields replaced, another GPU preset, a model preset."""
    s = Scenario(model="llama3-8b", topology={"preset": "dgx-h100", "inter_node": {"nic_gbps": 200}}, nodes=2,
                 gpu="H200-SXM-141GB")
    assert s.topology.inter_node is not None and s.topology.inter_node.nic_gbps == 200
    assert s.topology.gpu == "H200-SXM-141GB" and s.nodes == 2
    assert s.model.name == "llama3-8b"



def test_fewer_gpus_per_node_take_the_nics_of_the_gpus_used():
    """`gpus_per_node` 4 on a DGX H100 (a 400 Gb/s NIC per GPU): 4 NICs, as NCCL sends each GPU's traffic through
    its own. NICs stated together with the count, in the same topology mapping, are kept."""
    half = Scenario(topology="dgx-h100", nodes=4, gpus_per_node=4)
    assert half.topology.inter_node is not None and half.topology.inter_node.nics_per_node == 4
    stated = Scenario(topology={"preset": "dgx-h100", "gpus_per_node": 4, "inter_node": {"nics_per_node": 8}}, nodes=4)
    assert stated.topology.inter_node is not None and stated.topology.inter_node.nics_per_node == 8

def test_replace_returns_a_new_scenario_and_leaves_the_old_one():
    """`replace(nodes=16)` changes the copy only; nested mappings merge key by key."""
    base = Scenario(model="llama2-7b", training={"precision": "bf16", "strategy": {"kind": "ddp"}})
    bigger = base.replace(nodes=16, training={"strategy": {"bucket_bytes": 5 * 2**20}})
    assert (base.nodes, bigger.nodes) == (4, 16)
    assert bigger.training.strategy.kind == "ddp" and bigger.training.strategy.bucket_bytes == 5 * 2**20


def test_a_scenario_is_immutable():
    """Setting an attribute raises; `replace` is the way to change one."""
    with pytest.raises(AttributeError, match="replace"):
        Scenario().nodes = 8  # type: ignore[misc]


def test_from_yaml_and_from_dict_agree(tmp_path):
    """A scenario file and its data give the same scenario; its echo is itself a scenario that resolves the same."""
    path = EXAMPLES / "base.yaml"
    from_file = Scenario.from_yaml(path)
    assert from_file == Scenario.from_dict(yaml.safe_load(path.read_text()))
    echo = tmp_path / "echo.yaml"
    echo.write_text(yaml.safe_dump(from_file.to_dict()))
    assert Scenario.from_yaml(echo).to_dict() == from_file.to_dict()


def test_replace_on_a_file_is_the_cli_option_on_the_file():
    """`from_yaml(...).replace(strategy="zero2")` keeps the file's job and changes only the strategy's kind."""
    s = Scenario.from_yaml(EXAMPLES / "base.yaml").replace(strategy="zero2")
    assert s.training.strategy.kind == "zero2" and s.training.global_batch == 512 and s.nodes == 8


@pytest.mark.parametrize(("options", "needle"), [
    ({"nodes": 0}, "nodes"),
    ({"model": "no-such-model"}, "no-such-model"),
    ({"topology": "no-such-cluster"}, "no-such-cluster"),
    ({"micro_batch": -1}, "micro_batch"),
    ({"stragglers": [{"slowdown": 0.5}]}, "slowdown"),
    ({"strategy": "zero9"}, "strategy"),
])
def test_a_bad_option_is_one_line_naming_it(options, needle):
    """A bad value raises ConfigError when the scenario is resolved: one line naming the field."""
    with pytest.raises(ConfigError) as caught:
        Scenario(**options).resolve()
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_a_bad_file_is_one_line_naming_it(tmp_path):
    """A missing file and a wrong field: ConfigError naming the file (and the field)."""
    with pytest.raises(ConfigError, match="missing.yaml"):
        Scenario.from_yaml(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("topology: dgx-h100\ntraining: {model: llama2-7b, micro_bach: 2}\n")
    with pytest.raises(ConfigError) as caught:
        Scenario.from_yaml(bad)
    assert "micro_bach" in str(caught.value) and "\n" not in str(caught.value)


def test_an_unknown_option_to_replace_is_a_type_error():
    """`replace` takes the keyword arguments of Scenario, as the constructor does."""
    with pytest.raises(TypeError, match="nodez"):
        Scenario().replace(nodez=2)


def test_the_hsdp_shard_group_as_an_option_or_a_strategy_field():
    """shard_group_gpus=16 is strategy.shard_group_gpus, given beside the strategy or in it."""
    job = {"model": "llama3-70b", "nodes": 16, "tp": 2, "sequence_parallel": True, "global_batch": 256}
    option = Scenario(**job, strategy="hsdp", shard_group_gpus=16)
    field = Scenario(**job, strategy={"kind": "hsdp", "shard_group_gpus": 16})
    assert option.training.strategy.shard_group_gpus == field.training.strategy.shard_group_gpus == 16
    assert predict(option).step_time_s == predict(field).step_time_s


def test_a_new_strategy_kind_leaves_the_old_ones_group_behind():
    """A scenario's HSDP shard group belongs to its strategy: another kind given over it runs without (ZeRO-2 has
    none; ZeRO-1's optimizer group is another setting) unless a group is given with it. A group given as an
    option beside a kind that has none is refused, naming the field."""
    base = Scenario.from_dict({"topology": {"preset": "dgx-h100", "nodes": 2},
                               "training": {"model": "llama2-7b", "global_batch": 32,
                                            "strategy": {"kind": "hsdp", "shard_group_gpus": 8}}})
    assert base.training.strategy.shard_group_gpus == 8
    assert base.replace(strategy="zero2").training.strategy.shard_group_gpus is None
    assert base.replace(strategy="zero1").training.strategy.shard_group_gpus is None
    grouped = base.replace(strategy="zero1", shard_group_gpus=4).training.strategy
    assert (grouped.kind, grouped.shard_group_gpus) == ("zero1", 4)
    with pytest.raises(ConfigError, match="shard_group_gpus is HSDP's shard group .* kind is zero2"):
        _ = base.replace(strategy="zero2", shard_group_gpus=4).training


def test_the_memory_fraction_as_an_option_or_a_training_field():
    """memory_fraction=0.94 is training.memory_fraction, given as an option or in `training`; it bounds what the
    job may hold (94% of the GPU plus the CUDA context and NCCL's buffers beside it)."""
    job = {"model": "llama3-70b", "nodes": 16, "framework": "maxtext", "recompute": "save_qkv_proj",
           "micro_batch": 2, "global_batch": 256}
    option, field = Scenario(**job, memory_fraction=0.94), Scenario(**job, training={"memory_fraction": 0.94})
    assert option.training.memory_fraction == field.training.memory_fraction == 0.94
    assert predict(option).memory_capacity_bytes == predict(field).memory_capacity_bytes < 80 * 2**30
    assert predict(option.replace(memory_fraction=0.75)).fits_in_memory is False
