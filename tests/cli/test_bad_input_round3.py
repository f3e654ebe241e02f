"""Bad input to the CLI found by an audit of every command: each is refused with one line naming what was
wrong (exit 2, no traceback), and an output file comes whole or not at all."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.calibration.profile import CalibrationError, profile_from_dict
from simulator.cli import common
from simulator.core.errors import ConfigError
from simulator.core.yaml_text import load_yaml_text
from simulator.scenario import scenario_from_data
from simulator.sweep.run import _cell

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
COMPUTE_PROFILE = Path(__file__).resolve().parents[1] / "calibration" / "fixtures" / "compute_h100_example.yaml"


def run(*args: str, cwd: Path | None = None, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulator.cli.app", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, cwd=cwd)


def refused(out: subprocess.CompletedProcess[str], needle: str) -> bool:
    return out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path, monkeypatch) -> None:
    """write_text renames a finished temporary file over the target: when the rename fails (a full disk fails
    the write the same way) the old file is as it was and no temporary remains."""
    target = tmp_path / "report.html"
    target.write_text("old")

    def fail(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(common.os, "replace", fail)
    with pytest.raises(ConfigError, match="cannot write report .*report.html: No space left on device"):
        common.write_text(target, "new", "report")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_written_files_get_the_usual_permissions(tmp_path: Path) -> None:
    """The temporary file's 0600 is not what the user gets: the file has the mode a plain open() gives."""
    target = tmp_path / "out.json"
    common.write_text(target, "{}", "trace")
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_device_is_written_not_replaced() -> None:
    """--report /dev/null (a device) is written as it is: no temporary file is renamed over it."""
    common.write_text(Path("/dev/null"), "<html/>", "report")
    assert Path("/dev/null").is_char_device()


def test_yaml_nested_too_deeply_is_a_config_error() -> None:
    """3,000 levels of nesting blew the parser's recursion (a RecursionError traceback)."""
    text = "training: " + "{a: " * 3000 + "x" + "}" * 3000
    with pytest.raises(ConfigError, match="s.yaml: nested too deeply"):
        load_yaml_text(text, "s.yaml")


def test_a_date_in_a_sweep_axis_is_written_as_text() -> None:
    """YAML reads 2024-01-01 as a date; the results cell had raised 'not JSON serializable'."""
    assert _cell({"when": datetime.date(2024, 1, 1)}) == '{"when":"2024-01-01"}'


@pytest.mark.parametrize(("args", "needle"), [
    (("predict", "--nodes", "100000000"), "less than or equal to 32768"),  # had run for minutes, gigabytes deep
    (("collective", "--nodes", "10000000"), "less than or equal to 32768"),
    (("predict", "--trace-gpus", "0,1"), "--trace-gpus picks the GPUs of --trace"),  # was silently ignored
])
def test_bad_options_are_refused(args: tuple[str, ...], needle: str) -> None:
    assert refused(run(*args), needle)


@pytest.mark.parametrize(("body", "needle"), [
    ("topology: {name: x, gpu: H100-SXM5-80GB, gpus_per_node: 8, nodes: 64, intra_node: nvswitch-nvlink4,"
     " inter_node: {transport: ib, nics_per_node: 8, nic_gbps: 400},"
     " fabric: {kind: rail_optimized, oversubscription: .inf}}\ntraining: {model: llama2-7b}\n",
     "fabric.oversubscription: Input should be a finite number"),  # was a ZeroDivisionError
    ("topology: dgx-h100\nnodes: 1\ntraining: {model: llama2-7b, micro_batch: 1, global_batch: 64,"
     " strategy: {kind: zero2, zero_bucket_elements: 10000}}\n",
     "zero_bucket_elements 10,000: the parameters would be all-gathered in 673,842 buckets"),  # ran for hours
    ("topology: dgx-h100\nnodes: 1\ntraining: {model: llama2-7b}\nstragglers: {slowdown: 1.2, gpus: 100}\n",
     "stragglers.gpus 100: the cluster has 8 GPUs"),
])
def test_bad_scenarios_are_refused(tmp_path: Path, body: str, needle: str) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(body)
    assert refused(run("predict", str(scenario)), needle)


def test_a_report_that_cannot_be_written_takes_the_trace_with_it(tmp_path: Path, monkeypatch) -> None:
    """predict --trace T --report R where R fails at writing time: exit 2, and T is not left behind."""
    from typer.testing import CliRunner

    from simulator.cli import predict as predict_cli
    from simulator.cli.app import app

    real = predict_cli.write_text

    def report_fails(path: Path, text: str, what: str) -> None:
        if what == "report":
            raise ConfigError(f"cannot write report {path}: Read-only file system")
        real(path, text, what)

    monkeypatch.setattr(predict_cli, "write_text", report_fails)
    trace, report = tmp_path / "t.json", tmp_path / "r.html"
    result = CliRunner().invoke(app, ["predict", "--trace", str(trace), "--report", str(report)])
    assert isinstance(result.exception, ConfigError) and not trace.exists() and not report.exists()


def test_outputs_are_checked_before_the_work(tmp_path: Path) -> None:
    """compare --report and sweep -o .parquet into a missing folder: refused before any prediction (not
    after running every scenario of the sweep)."""
    base = str(EXAMPLES / "base.yaml")
    assert refused(run("compare", base, str(EXAMPLES / "roce-200g.yaml"), "--report", "nodir/c.html", cwd=tmp_path),
                   "nodir")
    out = run("sweep", str(EXAMPLES / "sweep-small.yaml"), "-o", "nodir/s.parquet", cwd=tmp_path)
    assert refused(out, "no directory") and "done" not in out.stdout


def test_a_full_standard_output_is_an_error_not_a_traceback() -> None:
    """predict --json > /dev/full: exit 2, 'standard output: No space left on device'."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        out = subprocess.run([sys.executable, "-m", "simulator.cli.app", "predict", "--json"], stdout=full,
                             stderr=subprocess.PIPE, text=True)
    assert refused(out, "standard output: No space left on device")


def test_compute_only_and_empty_profiles() -> None:
    """A compute-only profile (benchmarks/gpu_calibration.py's) calibrates predict's compute and leaves its
    collectives at the prior (it had asked for --force-calibration, given or not); collective, which has
    nothing to take from it, says so; a profile with nothing in it, or two sections for one cluster, is refused."""
    assert run("predict", "--calibration", str(COMPUTE_PROFILE), "--json").returncode == 0
    assert refused(run("collective", "--calibration", str(COMPUTE_PROFILE)), "holds no collective fit")
    with pytest.raises(CalibrationError, match="holds nothing to apply"):
        profile_from_dict({"schema_version": 1, "sections": []}, "p.yaml")
    section = {"hardware": {"gpu": "H100-SXM5-80GB", "intra_node": "nvswitch-nvlink4", "transport": "ib"},
               "parameters": {"net_efficiency": {"value": 0.9, "prior": 0.96, "bounds": [0.05, 1.0]}}}
    with pytest.raises(CalibrationError, match="two sections fitted on the same hardware"):
        profile_from_dict({"schema_version": 1, "sections": [section, section]}, "p.yaml")


def test_a_scenario_that_is_not_a_mapping_says_so() -> None:
    """A scenario written as a list named pydantic's class ('value: ... instance of ScenarioSpec')."""
    with pytest.raises(ConfigError, match="s.yaml: expected a mapping of fields, got list"):
        scenario_from_data([{"topology": "dgx-h100"}], "s.yaml")
