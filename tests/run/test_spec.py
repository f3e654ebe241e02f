"""The run spec: token counts with suffixes, and the inputs it refuses."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from simulator.core.errors import ConfigError
from simulator.run.params import save_seconds
from simulator.run.spec import CheckpointSpec, FailureRates, RunSpec, parse_tokens
from topologies.presets import load_preset
from workloads.presets import load_model
from workloads.spec import TrainingSpec


@pytest.mark.parametrize(("text", "tokens"), [("15T", 15e12), ("15t", 15e12), ("300B", 300e9), ("2G", 2e9),
                                              ("1.5e12", 1.5e12), ("1000", 1000.0), ("4.5M", 4.5e6), ("2K", 2e3)])
def test_token_counts_take_decimal_suffixes(text, tokens):
    assert parse_tokens(text) == pytest.approx(tokens)


@pytest.mark.parametrize("text", ["-5", "0", "abc", "15X", "", "inf", "nan", "1e400"])
def test_bad_token_counts_are_refused(text):
    with pytest.raises(ConfigError, match="--train-tokens"):
        parse_tokens(text)


def test_rates_must_be_positive():
    with pytest.raises(ValidationError):
        FailureRates(node_mtbf_h=-1.0)
    with pytest.raises(ValidationError):
        CheckpointSpec(interval_s=-5.0)


def test_async_is_spelled_as_in_yaml():
    """`async: true` in a scenario sets the asynchronous save."""
    assert RunSpec.model_validate({"train_tokens": 1e12, "checkpoint": {"async": True}}).checkpoint.async_save


def test_an_interval_shorter_than_a_save_is_refused():
    """Saving 5.67 TB from 4 nodes at 1 GB/s takes 1,417 s: an interval of 600 s cannot be kept."""
    run = RunSpec(train_tokens=1e12, checkpoint=CheckpointSpec(interval_s=600.0))
    with pytest.raises(ConfigError, match="shorter than a save"):
        save_seconds(run, load_preset("dgx-h100", nodes=4), TrainingSpec(model="llama3-405b"),
                     load_model("llama3-405b"))


def test_async_save_blocks_only_for_the_host_copy():
    """Async: each GPU's share over host_copy_GBps; sync: each node's share over write_GBps."""
    topology, training, model = load_preset("dgx-h100", nodes=16), TrainingSpec(model="llama3-70b"), \
        load_model("llama3-70b")
    size, save, block = save_seconds(RunSpec(train_tokens=1e12), topology, training, model)
    assert block == save == pytest.approx(size / 16 / 1e9)
    _, save_async, block_async = save_seconds(
        RunSpec.model_validate({"train_tokens": 1e12, "checkpoint": {"async": True}}), topology, training, model)
    assert save_async == save and block_async == pytest.approx(size / 128 / 25e9)
