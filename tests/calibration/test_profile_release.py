"""A calibration profile remembers the NCCL release of the logs it was fitted on, and a prediction with the
profile runs that release unless it states its own (the algorithms a release offers change what the fitted
parameters describe: no NVLS before 2.17)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import simulator as cs
from simulator.calibration.profile import (
    CalibrationProfile,
    FittedParam,
    HardwareCalibration,
    LogResidual,
    profile_to_dict,
)
from simulator.cli.app import app
from simulator.collectives.comm import comm_view
from simulator.collectives.params import PARAMS, prior_params
from simulator.measurements.dataset import HardwareKey
from topologies.build import build_representative
from topologies.presets import load_preset

H100 = HardwareKey("H100-SXM5-80GB", "nvswitch-nvlink4", "ib")
JOB = {"model": "llama3-70b", "topology": "dgx-h100", "nodes": 2, "tp": 8, "global_batch": 16}


def profile_at_prior(path: Path, hardware: HardwareKey, preset: str, releases: tuple[str | None, ...] = (),
                     selection: str = "model") -> Path:
    """A profile of one section at the prior of `preset` on 2 nodes (nothing fitted), its logs run on `releases`
    and fitted with `selection`, written to `path`."""
    prior = prior_params(comm_view(build_representative(load_preset(preset, nodes=2))))
    params = tuple(FittedParam(name, getattr(prior, name), getattr(prior, name), PARAMS[name].lower,
                               PARAMS[name].upper, fitted=False) for name in PARAMS)
    residuals = tuple(LogResidual(f"log{i}.txt", 10, 5.0, 5.0, release) for i, release in enumerate(releases))
    profile = CalibrationProfile("0.1.0", "2026-12-05T00:00:00+00:00",
                                 (HardwareCalibration(hardware, params, residuals, "test", selection),))
    path.write_text(yaml.safe_dump(profile_to_dict(profile), sort_keys=False))
    return path


def _profile(tmp_path: Path, *releases: str | None) -> Path:
    """An H100 / InfiniBand section at the prior (nothing fitted), its logs run on `releases`."""
    return profile_at_prior(tmp_path / f"profile-{'-'.join(map(str, releases))}.yaml", H100, "dgx-h100", releases)


def test_a_calibrated_step_runs_the_profile_release_unless_the_job_states_one(tmp_path: Path):
    """H100 TP 8 with a profile fitted on NCCL 2.16 logs: the step of a job stating 2.16 with a profile that
    states nothing (no NVLS; slower than the newest release); a job stating 2.27 runs 2.27 whatever its
    profile's logs ran; the prediction names the release it took."""
    old, unstated = _profile(tmp_path, "2.16.5", None), _profile(tmp_path, None)
    taken = cs.predict(cs.Scenario(**JOB), calibration=old)
    assert taken.step_time_s == cs.predict(cs.Scenario(**JOB, nccl_version="2.16"), calibration=unstated).step_time_s
    assert taken.step_time_s > cs.predict(cs.Scenario(**JOB), calibration=unstated).step_time_s
    assert "NCCL 2.16, its logs' release" in taken.calibration
    stated = cs.predict(cs.Scenario(**JOB, nccl_version="2.27"), calibration=old)
    assert stated.step_time_s == cs.predict(cs.Scenario(**JOB), calibration=unstated).step_time_s
    assert "its logs' release" not in stated.calibration


def test_the_collective_command_and_api_take_the_profile_release(tmp_path: Path):
    """`collective --calibration` (and the API's `collective`) price an H100 all_reduce on the profile's
    release where --nccl-version is not given: NVLS-tree on the newest, not on 2.16; the API's nccl_version and
    selection give the command's numbers."""
    old = _profile(tmp_path, "2.16.5")
    runner = CliRunner()

    def command(*flags: str) -> list[dict[str, object]]:
        result = runner.invoke(app, ["collective", "--topology", "dgx-h100", "--nodes", "2", "-b", "1G", "-e", "1G",
                                     "--json", *flags])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)["rows"]

    assert command()[0]["algo"] == "nvls_tree"
    assert command("--calibration", str(old))[0]["algo"] != "nvls_tree"
    assert command("--calibration", str(old), "--nccl-version", "2.27")[0]["algo"] == "nvls_tree"
    api = cs.collective("dgx-h100", 2, min_bytes="1G", max_bytes="1G", calibration=old)
    assert api.rows[0].algo == command("--calibration", str(old))[0]["algo"]
    for flags, kwargs in ((("--nccl-version", "2.8", "--selection", "nccl"), {"nccl_version": "2.8",
                                                                               "selection": "nccl"}),
                          (("--nccl-version", "2.18"), {"nccl_version": "2.18"})):
        row = cs.collective("dgx-h100", 2, min_bytes="1G", max_bytes="1G", **kwargs).rows[0]
        assert (row.algo, row.time_us) == pytest.approx((command(*flags)[0]["algo"], command(*flags)[0]["time_us"]),
                                                        rel=1e-6)


def test_compare_predicts_every_scenario_with_the_profile(tmp_path: Path):
    """`compare --calibration` (and the API's `compare`): each scenario's step is `predict`'s with the profile
    (here its logs' NCCL 2.16 against a scenario stating 2.27); a scenario of other hardware is an error naming
    its file, unless --force-calibration."""
    old = _profile(tmp_path, "2.16.5")
    base, newer, a100 = (tmp_path / name for name in ("base.yaml", "newer.yaml", "a100.yaml"))
    job = {"topology": "dgx-h100", "nodes": 2, "training": {"model": "llama3-70b", "global_batch": 16,
                                                             "parallel": {"tp": 8}}}
    base.write_text(json.dumps(job))
    newer.write_text(json.dumps({**job, "nccl_version": "2.27"}))
    a100.write_text(json.dumps({**job, "topology": "dgx-a100"}))
    runner = CliRunner()
    result = runner.invoke(app, ["compare", str(base), str(newer), "--calibration", str(old), "--json"])
    assert result.exit_code == 0, result.output
    steps = [s["step_time_s"] for s in json.loads(result.output)["scenarios"]]
    assert steps == [cs.predict(path, calibration=old).step_time_s for path in (base, newer)]
    assert steps[0] > steps[1]  # 2.16 (the profile's logs) has no NVLS; the stated 2.27 does
    api = cs.compare(base, newer, calibration=old)
    assert [p.step_time_s for p in api.predictions] == steps
    other = runner.invoke(app, ["compare", str(base), str(a100), "--calibration", str(old)])
    assert other.exit_code != 0 and str(a100) in str(other.exception)
    forced = runner.invoke(app, ["compare", str(base), str(a100), "--calibration", str(old), "--force-calibration"])
    assert forced.exit_code == 0, forced.output
