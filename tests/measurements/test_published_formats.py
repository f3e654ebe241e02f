"""Logs in the layouts they are published in (fixtures/published_manifest.yaml): a busbw-only table,
an abridged device list, and a file holding several independent runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from simulator.core.errors import ConfigError, LogParseError
from simulator.measurements.dataset import measured_log, parse_entry_log
from simulator.measurements.manifest import Manifest, log_path, parse_manifest

FIXTURES = Path(__file__).parent / "fixtures"
MANIFEST = FIXTURES / "published_manifest.yaml"


def _manifest() -> Manifest:
    return parse_manifest(MANIFEST.read_text(), MANIFEST.name, FIXTURES)


def _entry(file: str):
    return next(entry for entry in _manifest().entries if entry.file == file)


def _parsed(file: str, **changes):
    entry = _entry(file).model_copy(update=changes)
    return entry, parse_entry_log(entry, log_path(_manifest(), entry).read_text(), file)


def test_busbw_only_table_takes_time_from_the_manifest():
    """all_reduce over 2 x 8 = 16 ranks: algbw = busbw / (2 x 15/16), time = size / algbw.
    32 MiB at 118.62 GB/s busbw: algbw 63.264 GB/s, time 33554432 / 63.264e3 = 530.39 us."""
    _, log = _parsed("torch_busbw_all_reduce_2x8.md")
    first = log.rows[0]
    assert first.size_bytes == 32 * 1024**2 and first.busbw_GBps == 118.62
    assert first.algbw_GBps == pytest.approx(118.62 / 1.875)
    assert first.time_us == pytest.approx(530.39, abs=0.01)
    assert len(log.rows) == 6


def test_abridged_device_list_is_a_warning():
    """Ranks 0-3 listed of 16: a warning naming both counts; the entry's 16 ranks are predicted."""
    entry, log = _parsed("nccl_tests_abridged_devices_2x8.txt")
    assert log.nranks == 4
    with pytest.warns(UserWarning, match="names 4 ranks.* = 16; taken as an abridged list"):
        measured = measured_log(entry, log)
    assert measured.view.n_ranks == 16


def test_more_ranks_listed_than_the_entry_is_an_error():
    """A device list longer than the entry's ranks is a real mismatch, not an abridgement."""
    entry, log = _parsed("nccl_tests_abridged_devices_2x8.txt", nodes=1, gpus_per_node=2)
    with pytest.raises(ConfigError, match="lists 4 ranks but its manifest entry describes 1 node"):
        measured_log(entry, log)


def test_run_field_takes_one_of_two_runs():
    """`run: 2` takes the second host's table (1 MiB in 31.0 us); `run: 1` the first (30.1 us)."""
    _, second = _parsed("nccl_tests_two_runs_no_mpi_1x8.txt")
    _, first = _parsed("nccl_tests_two_runs_no_mpi_1x8.txt", run=1)
    assert (first.rows[0].time_us, second.rows[0].time_us) == (30.1, 31.0)
    assert len(first.rows) == len(second.rows) == 5


def test_two_runs_without_run_name_the_cause():
    """Without `run:` the file is an error at the second table's header naming MPI=1 and `run:`."""
    with pytest.raises(LogParseError, match="2 result tables.*MPI=1.*'run:' field \\(1-2\\)") as info:
        _parsed("nccl_tests_two_runs_no_mpi_1x8.txt", run=None)
    assert info.value.line_no == 39  # the second host's column header


def test_manifest_run_must_be_a_positive_integer():
    """`run: 0` is refused naming the field."""
    text = MANIFEST.read_text().replace("run: 2", "run: 0")
    with pytest.raises(ConfigError, match="field 'run'"):
        parse_manifest(text, "m.yaml", FIXTURES)


def test_validate_reads_every_published_layout(tmp_path):
    """`validate` over the fixture manifest exits 0 with a row per log and the abridged-list warning;
    without `run:` it exits 2 with one line naming the file and the cause."""
    cmd = [sys.executable, "-m", "simulator.cli.app", "validate", "--manifest"]
    out = subprocess.run([*cmd, str(MANIFEST)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "abridged" in out.stderr
    for name in ("torch_busbw_all_reduce_2x8.md", "nccl_tests_abridged_devices_2x8.txt"):
        assert name[:20] in out.stdout
    broken = tmp_path / "manifest.yaml"
    broken.write_text(MANIFEST.read_text().replace("  run: 2\n", ""))
    for fixture in FIXTURES.glob("*_[12]x8.*"):
        (tmp_path / fixture.name).write_text(fixture.read_text())
    out = subprocess.run([*cmd, str(broken)], capture_output=True, text=True)
    assert out.returncode == 2
    errors = [line for line in out.stderr.strip().splitlines() if not line.startswith("warning:")]
    assert len(errors) == 1 and "several independent runs" in errors[0]
