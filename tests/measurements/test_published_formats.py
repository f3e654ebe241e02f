"""Logs in the layouts they are published in (fixtures/published_manifest.yaml): a busbw-only table,
an abridged device list, and a file holding several independent runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.core.errors import ConfigError, LogParseError
from simulator.measurements.dataset import measured_log, parse_entry_log
from simulator.measurements.manifest import Manifest, log_path, parse_manifest
from simulator.measurements.nccl_tests import parse_log

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
    with pytest.raises(ConfigError, match="lists 4 ranks but the cluster stated for it has 1 node"):
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
    """`run: 0` sets the entry aside naming the field; the other entries load."""
    manifest = parse_manifest(MANIFEST.read_text().replace("run: 2", "run: 0"), "m.yaml", FIXTURES)
    [(file, reason)] = manifest.rejected
    assert "field 'run'" in reason and file.startswith("nccl_tests_two_runs")
    assert manifest.entries


def test_validate_reads_every_published_layout(tmp_path):
    """`validate` over the fixture manifest exits 0 with a row per log and the abridged-list warning;
    without `run:` the two-run file is skipped, naming the file and the cause, and the other logs are reported;
    with --strict it exits 2 with one line naming them."""
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
    out = subprocess.run([*cmd, str(broken), "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    [skipped] = report["skipped"]
    assert skipped["file"].startswith("nccl_tests_two_runs") and "several independent runs" in skipped["reason"]
    assert "several independent runs" in out.stderr
    assert len(report["logs"]) == len(parse_manifest(MANIFEST.read_text(), MANIFEST.name, FIXTURES).entries) - 1
    out = subprocess.run([*cmd, str(broken), "--strict"], capture_output=True, text=True)
    assert out.returncode == 2
    errors = [line for line in out.stderr.strip().splitlines() if not line.startswith("warning:")]
    assert len(errors) == 1 and "several independent runs" in errors[0]


def _tool_table(tool: str, times_us: tuple[float, float], starting_line: bool) -> str:
    """One tool's output as a script that runs several tools into one file leaves it: nccl-tests 2.16+'s
    'Collective test starting' line (else the shell prompt with the command), the header, two rows, the footer."""
    lead = f"# Collective test starting: {tool}_perf\n" if starting_line else f"$ ./{tool}_perf -b 1M -e 4M -f 4\n"
    rows = "".join(f"{size:>12} {size // 4:>13}     float     sum      -1 {t:>8.2f}   10.00   10.00      0 "
                   f"{t:>8.2f}   10.00   10.00      0\n" for size, t in zip((1048576, 4194304), times_us, strict=True))
    return (lead + "#       size         count      type   redop    root     time   algbw   busbw #wrong     time"
            "   algbw   busbw #wrong\n" + rows + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 10.0\n#\n")


@pytest.mark.parametrize("starting_line", [True, False])
def test_several_tools_in_one_file_take_the_entrys_table(starting_line: bool):
    """A file holding all_reduce_perf's, all_gather_perf's and alltoall_perf's tables in turn: the entry's
    collective picks its own table, whatever its place; a collective the file has no table of, or a file whose
    tables are not told apart, is an error naming the tools and `run:`."""
    text = "".join(_tool_table(tool, times, starting_line) for tool, times in
                   (("all_reduce", (30.0, 50.0)), ("all_gather", (20.0, 40.0)), ("alltoall", (60.0, 90.0))))
    for collective, first in (("all_reduce", 30.0), ("all_gather", 20.0), ("alltoall", 60.0)):
        log = parse_log(text, "three.txt", "nccl-tests", collective=collective)
        assert (log.collective, log.rows[0].time_us, len(log.rows)) == (collective, first, 2)
    with pytest.raises(LogParseError, match=r"several tools \(all_reduce, all_gather, alltoall\), none of them "
                                            r"reduce_scatter.*'run:' field \(1-3\)"):
        parse_log(text, "three.txt", "nccl-tests", collective="reduce_scatter")
    assert parse_log(text, "three.txt", "nccl-tests", run=2, collective="alltoall").rows[0].time_us == 20.0


def test_a_several_tools_file_is_an_entry_per_collective(tmp_path):
    """`validate` over a manifest listing one three-tool file twice, for all_reduce and for alltoall: each entry
    is predicted against its own tool's rows."""
    text = "".join(_tool_table(tool, times, True) for tool, times in
                   (("all_reduce", (30.0, 50.0)), ("all_gather", (20.0, 40.0)), ("alltoall", (60.0, 90.0))))
    (tmp_path / "three.txt").write_text(text)
    entry = ("- file: three.txt\n  collective: {}\n  gpu: H100-SXM5-80GB\n  gpus_per_node: 8\n  nodes: 1\n"
             "  intra_node: nvswitch-nvlink4\n")
    (tmp_path / "manifest.yaml").write_text(entry.format("all_reduce") + entry.format("alltoall"))
    out = subprocess.run([sys.executable, "-m", "simulator.cli.app", "validate", "--manifest",
                          str(tmp_path / "manifest.yaml"), "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    logs = json.loads(out.stdout)["logs"]
    assert [(log["collective"], log["rows"][0]["measured_time_us"]) for log in logs] == [
        ("all_reduce", 30.0), ("alltoall", 60.0)]
