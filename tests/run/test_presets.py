"""Failure presets: the Llama 3 derivation, its components against the fabric clustersim builds, and the
published fleet figures the llama3 rates are checked against."""

from __future__ import annotations

import pytest

from simulator.core.errors import ConfigError
from simulator.run.params import checkpoint_bytes, component_counts
from simulator.run.presets import fleet_cases, load_failures, predicted_per_day, preset_names
from topologies.presets import load_preset
from workloads.presets import load_model
from workloads.spec import TrainingSpec


def test_llama3_rates_come_from_table_5():
    """268 GPU, 46 host, 7 NIC, 35 switch/cable and 63 software interruptions in 54 days on 16,384 GPUs."""
    rates = load_failures("llama3").mtbf_h()
    hours = 54 * 24
    assert rates["gpu"] == pytest.approx(16384 * hours / 268)
    assert rates["node"] == pytest.approx(2048 * hours / 46)
    assert rates["nic"] == pytest.approx(16384 * hours / 7)
    assert rates["link"] == pytest.approx(32768 * hours / 35)
    assert rates["software"] == pytest.approx(2048 * hours / 63)


def test_llama3_components_are_those_of_2048_dgx_h100():
    """The preset's component counts are what clustersim builds for 2,048 DGX H100, so the preset gives
    back 419 interruptions in 54 days on that cluster."""
    counts = component_counts(load_preset("dgx-h100", nodes=2048))
    assert {k: counts[k] for k in ("gpu", "node", "nic", "link")} == {"gpu": 16384, "node": 2048, "nic": 16384,
                                                                       "link": 32768}
    rates = load_failures("llama3").mtbf_h()
    assert sum(counts[k] / mtbf for k, mtbf in rates.items()) * 54 * 24 == pytest.approx(419)


def test_unknown_preset_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="unknown preset 'nope'.*llama3"):
        load_failures("nope")
    assert {"llama3", "rsc1", "rsc2", "none"} <= set(preset_names())


@pytest.mark.parametrize(("case", "low", "high"), [
    ("rsc1", 0.5, 0.7),  # RSC-1 fails 1.7x as often per node-day as the Llama 3 job
    ("rsc2", 1.5, 1.8),  # RSC-2 0.6x as often
    ("bloom-176b", 0.4, 0.7),  # BLOOM's new cluster: 1-2 GPU failures a week, twice the H100 fleet's GPU rate
    ("opt-175b", 0.2, 0.35),  # OPT-175B's 105 restarts in two months: 3.6x
])
def test_published_fleets_predicted_from_the_llama3_rates(case, low, high):
    """What the llama3 rates predict for each published fleet, as a ratio to its published rate (the
    bands are those docs/time-to-train.md explains)."""
    found = {c.id: c for c in fleet_cases()}[case]
    assert low <= predicted_per_day(load_failures("llama3"), found) / found.per_day <= high


def test_checkpoint_bytes_are_weights_and_adam_states():
    """Mixed-precision Adam: 2 bytes of weights and 12 of fp32 master weights and moments per parameter."""
    model = load_model("llama3-405b")
    size = checkpoint_bytes(model, TrainingSpec(model="llama3-405b"))
    assert size / 14 == pytest.approx(405e9, rel=0.01)
