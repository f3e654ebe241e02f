"""A running sweep, as a real process: it stops on SIGINT or SIGTERM with its workers (130, 143), at once on a
second signal, and leaves no process behind; two sweeps on one output: one runs, the other is refused."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

# a small model on 1-8 nodes, 4 x 4 x 4 x 4 x 3 = 768 scenarios: minutes on two workers, so a sweep is still
# running when it is signalled
BASE = {"topology": "dgx-h100", "training": {
    "model": {"name": "small", "layers": 2, "hidden": 512, "heads": 8, "vocab": 32000, "max_seq_len": 1024},
    "seq_len": 1024, "micro_batch": 1, "global_batch": 64, "strategy": {"kind": "fsdp"}}}
LONG_AXES = {"nodes": [1, 2, 4, 8], "inter_node.nic_gbps": [100, 200, 400, 800], "training.micro_batch": [1, 2, 4, 8],
             "training.strategy.kind": ["fsdp", "ddp", "zero1", "zero2"], "training.seq_len": [256, 512, 1024]}
HANG_S = 120  # a guard against a hung sweep, not a measurement (benchmarks/bench_sweep_stop.py times the stop)


def _group(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group `pgid`, read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # gone meanwhile
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def _group_ends(pgid: int) -> list[int]:
    """The processes of the group left once it has had HANG_S to end (an orphan worker would stay)."""
    deadline = time.monotonic() + HANG_S
    while _group(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _group(pgid)


def _start(sweep_file: Path, out: Path) -> subprocess.Popen[str]:
    """`clustersim sweep` in a session of its own: its process group holds it, its workers and helpers."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.Popen([sys.executable, "-m", "simulator.cli.app", "sweep", str(sweep_file), "-o", str(out),
                             "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)


def _rows(out: Path) -> list[list[str]]:
    with out.open(newline="") as handle:
        return list(csv.reader(handle))


def _running(sweep: subprocess.Popen[str], out: Path, rows_before: int = 1) -> None:
    """Wait until the sweep has written a row (its workers are busy) to the `rows_before` the file had."""
    deadline = time.monotonic() + HANG_S
    while not (out.exists() and len(_rows(out)) > rows_before):
        assert sweep.poll() is None and time.monotonic() < deadline, "the sweep ended or wrote nothing"
        time.sleep(0.1)


@pytest.fixture
def long_sweep(tmp_path: Path) -> Path:
    sweep_file = tmp_path / "long.yaml"
    sweep_file.write_text(yaml.safe_dump({"base": BASE, "axes": LONG_AXES}, sort_keys=False))
    return sweep_file


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_sweep_and_its_workers(long_sweep: Path, tmp_path: Path, signum: int, code: int) -> None:
    """SIGINT (SIGTERM) to a running sweep: exit code 130 (143), a line saying how to resume, every row
    written whole, and nothing of its process group (workers, the resource tracker) left."""
    out = tmp_path / "results.csv"
    sweep = _start(long_sweep, out)
    _running(sweep, out)
    sweep.send_signal(signum)
    _, stderr = sweep.communicate(timeout=HANG_S)
    assert sweep.returncode == code, stderr
    assert f"stopped by {signal.Signals(signum).name}" in stderr and "run the same command again to resume" in stderr
    assert _group_ends(sweep.pid) == []
    rows = _rows(out)
    assert rows[0][0] == "scenario_hash" and all(len(row) == len(rows[0]) for row in rows)
    assert 1 < len(rows) < len(LONG_AXES["nodes"]) * 4 * 4 * 4 * 3 and not (tmp_path / "results.csv.lock").exists()


def test_a_second_signal_ends_the_sweep_at_once(long_sweep: Path, tmp_path: Path) -> None:
    """Two SIGINTs in a row: the sweep ends with 130 without its cleanup, and its workers go with it; the lock it
    leaves is stale and the next sweep takes it over and resumes."""
    out = tmp_path / "results.csv"
    sweep = _start(long_sweep, out)
    _running(sweep, out)
    sweep.send_signal(signal.SIGINT)
    sweep.send_signal(signal.SIGINT)
    sweep.communicate(timeout=HANG_S)
    assert sweep.returncode == 130
    assert _group_ends(sweep.pid) == []
    written = {row[0] for row in _rows(out)[1:]}
    again = _start(long_sweep, out)
    _running(again, out, 1 + len(written))  # the lock it left was taken over: the resumed sweep writes
    again.send_signal(signal.SIGINT)
    again.communicate(timeout=HANG_S)
    hashes = [row[0] for row in _rows(out)[1:]]
    assert len(hashes) == len(set(hashes)) and written < set(hashes)


def test_two_sweeps_on_one_output_one_runs_the_other_is_refused(long_sweep: Path, tmp_path: Path) -> None:
    """Two sweeps started together on one CSV: one runs, the other exits 2 naming the first's pid; the file has
    one header and no scenario twice."""
    out = tmp_path / "results.csv"
    sweeps = [_start(long_sweep, out), _start(long_sweep, out)]
    deadline = time.monotonic() + HANG_S
    while all(sweep.poll() is None for sweep in sweeps):
        assert time.monotonic() < deadline, "neither sweep was refused"
        time.sleep(0.1)
    refused = next(sweep for sweep in sweeps if sweep.poll() is not None)
    running = next(sweep for sweep in sweeps if sweep is not refused)
    _, stderr = refused.communicate()
    assert refused.returncode == 2, stderr
    assert f"is being written by another sweep (pid {running.pid} on " in stderr and stderr.count("\n") == 1
    _running(running, out)
    running.send_signal(signal.SIGINT)
    _, running_stderr = running.communicate(timeout=HANG_S)
    assert running.returncode == 130, running_stderr
    rows = _rows(out)
    hashes = [row[0] for row in rows]
    assert hashes.count("scenario_hash") == 1 and len(hashes) == len(set(hashes))
