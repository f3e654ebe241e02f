"""A job's NCCL (the scenario's nccl_env, nccl_version and nccl_selection): every collective of the step is
priced with it, from every entry point, and the release changes what the step can use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import simulator.collectives.nccl_setup as nccl_setup_module
from simulator import Scenario, plan, predict
from simulator.cli.app import app
from simulator.core.errors import ConfigError
from simulator.scenario import scenario_from_data
from simulator.sweep.run import evaluate
from simulator.sweep.spec import expand, sweep_from_data

JOB = {"topology": "dgx-h100", "nodes": 2, "training": {"model": "llama3-8b", "global_batch": 32,
                                                       "parallel": {"tp": 2}}}
SETUP = {"nccl_version": "2.16.5", "nccl_selection": "nccl", "nccl_env": {"NCCL_PROTO": "^LL"}}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every collective priced for a training step, by the arguments it was priced with."""
    seen: list[dict[str, Any]] = []
    original = nccl_setup_module.predict_collective

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(nccl_setup_module, "predict_collective", recording)
    return seen


def _all_with_the_setup(calls: list[dict[str, Any]]) -> None:
    assert calls, "no collective was priced"
    assert {(c["nccl_release"], c["selection"], tuple(sorted(c["env"].items()))) for c in calls} == {
        ((2, 16), "nccl", (("NCCL_PROTO", "^LL"),))}


def test_the_api_prices_every_collective_with_the_scenario_nccl(calls: list[dict[str, Any]]):
    predict(Scenario.from_dict({**JOB, **SETUP}))
    _all_with_the_setup(calls)


def test_plan_prices_every_collective_with_the_scenario_nccl(calls: list[dict[str, Any]]):
    """The search's closed-form estimate and its simulations alike (the plan used to drop the scenario's NCCL
    environment)."""
    plan(Scenario.from_dict({**JOB, **SETUP}), tp=[1, 2], pp=[1], micro_batches=[1], strategies=["fsdp"],
         recompute=["none"], workers=1)
    _all_with_the_setup(calls)


def test_a_sweep_prices_every_collective_with_the_base_nccl(calls: list[dict[str, Any]]):
    """Each point as a sweep worker evaluates it (simulator.sweep.run.evaluate)."""
    for point in expand(sweep_from_data({"base": {**JOB, **SETUP}, "axes": {"nodes": [1, 2]}}, "sweep")):
        assert evaluate(point)["error"] is None
    _all_with_the_setup(calls)


@pytest.mark.parametrize("command", [
    ["predict"], ["scale", "--nodes", "1,2"], ["compare"],
    ["plan", "--tp", "2", "--pp", "1", "--micro-batch", "1", "--strategy", "fsdp", "--recompute", "none",
     "--workers", "1"]])
def test_the_commands_price_every_collective_with_the_scenario_nccl(command: list[str], calls: list[dict[str, Any]],
                                                                    tmp_path: Path):
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps({**JOB, **SETUP}))
    files = [str(path), str(path)] if command == ["compare"] else [str(path)]
    result = CliRunner().invoke(app, [command[0], *files, *command[1:]])
    assert result.exit_code == 0, result.output
    _all_with_the_setup(calls)


@pytest.mark.parametrize("command", [["predict"], ["scale", "--nodes", "1,2"],
                                     ["plan", "--tp", "2", "--pp", "1", "--micro-batch", "1", "--strategy", "fsdp",
                                      "--recompute", "none", "--workers", "1"]])
def test_the_flags_set_what_the_scenario_fields_set(command: list[str], calls: list[dict[str, Any]], tmp_path: Path):
    """--nccl-version, --nccl-selection and --nccl-env over a scenario file: a variable the flag gives replaces
    the scenario's."""
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps({**JOB, "nccl_env": {"NCCL_PROTO": "Simple"}}))
    result = CliRunner().invoke(app, [command[0], str(path), *command[1:], "--nccl-version", "2.16.5",
                                      "--nccl-selection", "nccl", "--nccl-env", "NCCL_PROTO=^LL"])
    assert result.exit_code == 0, result.output
    _all_with_the_setup(calls)


def test_predict_echoes_and_shows_the_job_nccl():
    """JSON: the scenario as predicted carries the release and the selection; the table's header names them."""
    runner = CliRunner()
    shown = runner.invoke(app, ["predict", "--model", "llama3-8b", "--nccl-version", "2.18", "--nccl-selection",
                                "nccl", "--nccl-env", "NCCL_NVLS_ENABLE=0"], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    assert "NCCL 2.18, NCCL's tuner's choices, NCCL_NVLS_ENABLE=0" in " ".join(shown.output.split())  # it wraps
    echoed = json.loads(runner.invoke(app, ["predict", "--model", "llama3-8b", "--nccl-version", "2.18",
                                            "--json"]).output)["scenario"]
    assert (echoed["nccl_version"], echoed["nccl_selection"]) == ("2.18", "model")
    default = json.loads(runner.invoke(app, ["predict", "--json"]).output)["scenario"]
    assert (default["nccl_version"], default["nccl_selection"]) == (None, "model")


def test_a_release_before_nvls_runs_a_tensor_parallel_job_as_nvls_disabled():
    """NVLS arrived in NCCL 2.17: on 2.16 an H100 job's TP all-reduces run as on the newest release with
    NCCL_NVLS_ENABLE=0 (the same step), slower than on 2.17, which runs as the newest (nothing the job's
    collectives use changed since). On A100 (no NVLink SHARP) the release changes nothing here."""
    job = {"model": "llama3-70b", "topology": "dgx-h100", "nodes": 8, "tp": 8, "framework": "megatron-core"}
    old = predict(Scenario(**job, nccl_version="2.16")).step_time_s
    disabled = predict(Scenario(**job, nccl_env={"NCCL_NVLS_ENABLE": "0"})).step_time_s
    newest = predict(Scenario(**job)).step_time_s
    assert old == disabled
    assert predict(Scenario(**job, nccl_version="2.17")).step_time_s == newest < old
    a100 = {**job, "topology": "dgx-a100"}
    assert predict(Scenario(**a100, nccl_version="2.8")).step_time_s == predict(Scenario(**a100)).step_time_s


def test_nccl_selection_changes_the_step_where_the_tuner_chooses_otherwise():
    """The same job priced by the model's choices and by NCCL's tuner's: both positive, not the same step (the
    tuner's choices run with the handshakes NCCL overlaps, simulator.collectives.cost)."""
    job = {"model": "llama3-70b", "topology": "dgx-a100", "nodes": 8, "tp": 8, "framework": "megatron-core"}
    model, tuner = (predict(Scenario(**job, nccl_selection=s)).step_time_s for s in ("model", "nccl"))
    assert 0 < tuner != model > 0


@pytest.mark.parametrize(("field", "value", "message"), [
    ("nccl_version", "3.1", "nccl_version: expected an NCCL 2.x release such as 2.27 or 2.18.6, got '3.1'"),
    ("nccl_version", "latest", "nccl_version: expected an NCCL 2.x release"),
    ("nccl_selection", "fastest", "nccl_selection: Input should be 'model' or 'nccl'")])
def test_a_bad_nccl_field_names_itself(field: str, value: str, message: str):
    with pytest.raises(ConfigError, match=message):
        scenario_from_data({**JOB, field: value}, "job.yaml")
    with pytest.raises(ConfigError, match=field):
        predict(Scenario(model="llama3-8b", **{field: value}))


@pytest.mark.parametrize(("flag", "value"), [("--nccl-version", "two"), ("--nccl-selection", "fastest"),
                                           ("--nccl-env", "NCCL_ALGO")])
def test_a_bad_nccl_flag_names_itself(flag: str, value: str):
    result = subprocess.run([sys.executable, "-m", "simulator.cli.app", "predict", flag, value], capture_output=True,
                            text=True)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {flag}: ")


def test_a_sweep_varies_the_release_and_keeps_the_hashes_of_scenarios_without_one():
    """nccl_version as an axis: two releases are two points, each predicted with its own; a release or a
    selection adds to a point's hash, so scenarios that state neither keep theirs (results written before
    resume them)."""
    def points(data: dict[str, Any]) -> list[Any]:
        return expand(sweep_from_data(data, "sweep"))

    releases = points({"base": {**JOB, "topology": "dgx-h100", "nodes": 1, "training": {
        "model": "llama3-70b", "global_batch": 8, "parallel": {"tp": 8}}}, "axes": {"nccl_version": ["2.16", "2.27"]}})
    assert [p.nccl.release for p in releases] == [(2, 16), (2, 27)]
    assert len({p.scenario_hash for p in releases}) == 2
    steps = [evaluate(p)["step_time_s"] for p in releases]
    assert steps[0] > steps[1]  # no NVLS before 2.17
    plain = points({"base": JOB, "axes": {"nodes": [2]}})[0]
    stated = points({"base": {**JOB, "nccl_selection": "model"}, "axes": {"nodes": [2]}})[0]
    assert plain.scenario_hash == stated.scenario_hash
    assert points({"base": {**JOB, "nccl_selection": "nccl"}, "axes": {"nodes": [2]}})[0].scenario_hash != \
        plain.scenario_hash
