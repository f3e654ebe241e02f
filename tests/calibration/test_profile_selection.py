"""A calibration profile remembers whose choice of algorithm and protocol its fit priced the measured rows with
(NCCL's tuner's by default, the pair that ran), and predictions with the profile take the same choice unless they
state one: fitted parameters price the pairs they were fitted on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import simulator as cs
from simulator.calibration.profile import profile_from_dict
from simulator.cli.app import app
from simulator.core.errors import CalibrationError
from simulator.measurements.dataset import HardwareKey
from tests.calibration.test_profile_release import profile_at_prior

A100 = HardwareKey("A100-SXM4-80GB", "nvswitch-nvlink3", "ib")
JOB = {"model": "llama3-8b", "topology": "dgx-a100", "nodes": 4, "tp": 8, "global_batch": 32}


def _profile(tmp_path: Path, selection: str) -> Path:
    """A DGX A100 / InfiniBand section at the prior (nothing fitted), fitted with `selection`."""
    return profile_at_prior(tmp_path / f"profile-{selection}.yaml", A100, "dgx-a100", selection=selection)


def _rows(*flags: str) -> list[tuple[str, str, float]]:
    result = CliRunner().invoke(app, ["collective", "--topology", "dgx-a100", "--nodes", "4", "-b", "64K", "-e", "64M",
                                      "-f", "4", "--json", *flags])
    assert result.exit_code == 0, result.output
    return [(r["algo"], r["proto"], r["time_us"]) for r in json.loads(result.stdout)["rows"]]


def test_the_collective_command_takes_the_profiles_selection_unless_told(tmp_path: Path):
    """`collective --calibration` with a profile fitted on NCCL's choices prints what `--selection nccl` prints
    (the profile holds the prior here, so only the choice differs), with one fitted on the model's own choices
    what the default prints; a stated --selection wins over the profile's. The two choices differ somewhere on a
    4-node DGX A100 sweep, or the test would not tell them apart."""
    nccl, model = _profile(tmp_path, "nccl"), _profile(tmp_path, "model")
    assert _rows("--selection", "nccl") != _rows()
    assert _rows("--calibration", str(nccl)) == _rows("--selection", "nccl")
    assert _rows("--calibration", str(model)) == _rows()
    assert _rows("--calibration", str(nccl), "--selection", "model") == _rows()
    api = cs.collective("dgx-a100", 4, min_bytes="64K", max_bytes="64M", factor=4, calibration=nccl)
    assert [(r.algo, r.proto, round(r.time_us, 3)) for r in api.rows] == _rows("--selection", "nccl")


def test_a_calibrated_step_takes_the_profiles_selection_unless_the_job_states_one(tmp_path: Path):
    """predict with a profile fitted on NCCL's choices: the step of the job stating nccl_selection nccl with a
    profile fitted on the model's; a job stating 'model' keeps it. The echoed scenario and the calibration note
    say which choice priced the step."""
    nccl, model = _profile(tmp_path, "nccl"), _profile(tmp_path, "model")
    taken = cs.predict(cs.Scenario(**JOB), calibration=nccl)
    assert taken.step_time_s == cs.predict(cs.Scenario(**JOB, nccl_selection="nccl"), calibration=model).step_time_s
    assert taken.step_time_s != cs.predict(cs.Scenario(**JOB), calibration=model).step_time_s  # the choices differ
    assert taken.scenario["nccl_selection"] == "nccl"
    assert "NCCL's tuner's choices, as its fit" in taken.calibration
    stated = cs.predict(cs.Scenario(**JOB, nccl_selection="model"), calibration=nccl)
    assert stated.step_time_s == cs.predict(cs.Scenario(**JOB), calibration=model).step_time_s
    assert stated.scenario["nccl_selection"] == "model"
    assert cs.predict(cs.Scenario(**JOB)).scenario["nccl_selection"] == "model"


def test_a_profile_without_the_field_was_fitted_on_the_models_choices_and_a_bad_one_is_refused(tmp_path: Path):
    """Profiles written before the field existed were fitted with the model's own choice: they read as 'model'.
    Another word is refused, naming the section's field."""
    data = yaml.safe_load(_profile(tmp_path, "nccl").read_text())
    assert profile_from_dict(data, "p.yaml").sections[0].selection == "nccl"
    del data["sections"][0]["selection"]
    assert profile_from_dict(data, "p.yaml").sections[0].selection == "model"
    data["sections"][0]["selection"] = "fastest"
    with pytest.raises(CalibrationError, match=r"sections\[0\]\.selection: 'fastest'"):
        profile_from_dict(data, "p.yaml")


def test_a_stated_selection_other_than_the_fits_is_warned_of(tmp_path: Path):
    """Stating the selection the fit did not use is allowed, with a warning on stderr naming both (its parameters
    then price pairs they were not fitted on); stating the fit's own, or nothing, warns of nothing."""
    nccl = str(_profile(tmp_path, "nccl"))
    runner = CliRunner()
    base = ["collective", "--topology", "dgx-a100", "--nodes", "4", "-b", "1M", "-e", "1M", "--calibration", nccl]
    other = runner.invoke(app, [*base, "--selection", "model"])
    assert other.exit_code == 0, other.output
    assert "--selection model: the calibration profile was fitted with selection nccl" in other.stderr
    for flags in ([], ["--selection", "nccl"]):
        same = runner.invoke(app, [*base, *flags])
        assert same.exit_code == 0 and "warning" not in same.stderr, same.output
    job = runner.invoke(app, ["predict", "--model", "llama3-8b", "--topology", "dgx-a100", "--nodes", "4",
                              "--calibration", nccl, "--nccl-selection", "model"])
    assert job.exit_code == 0, job.output
    assert "the job's nccl_selection model: the calibration profile was fitted with selection nccl" in \
        " ".join(job.stderr.split())


def test_compare_lists_the_selection_each_scenario_ran(tmp_path: Path):
    """compare with a profile fitted on NCCL's choices: a scenario stating nccl_selection nccl changes nothing of
    one stating none (both ran NCCL's choices), one stating 'model' changes the selection, as it changes the step."""
    nccl = _profile(tmp_path, "nccl")
    base, same, other = (cs.Scenario(**JOB, **extra) for extra in ({}, {"nccl_selection": "nccl"},
                                                                    {"nccl_selection": "model"}))
    comparison = cs.compare(base, same, other, calibration=nccl)
    assert comparison.differences[1] == ()
    assert comparison.differences[2] == ("nccl_selection: nccl -> model",)
    assert comparison.predictions[2].step_time_s != comparison.predictions[0].step_time_s
