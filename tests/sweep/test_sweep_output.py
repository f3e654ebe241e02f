"""A sweep's output and size: one writer per output (the lock), cells a spreadsheet shows as text, a cap on the
scenarios with an estimate, and scenarios resolved as they are handed out."""

from __future__ import annotations

import csv
import fcntl
import itertools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from simulator.cli import sweep as sweep_command
from simulator.cli.output_lock import OutputLock, lock_path
from simulator.cli.sweep_results import csv_cell
from simulator.core.errors import ConfigError
from simulator.sweep import Scenario, count_points, iter_scenarios, point_at, run_sweep, sweep_from_data
from simulator.sweep import spec as spec_module
from simulator.sweep.run import WINDOW_PER_WORKER

BASE = {"topology": "dgx-h100", "training": {
    "model": {"name": "tiny", "layers": 4, "hidden": 1024, "heads": 8, "vocab": 32000, "max_seq_len": 1024},
    "seq_len": 1024, "micro_batch": 1, "global_batch": 64, "strategy": {"kind": "fsdp"}}}


def _app() -> sweep_command.typer.Typer:
    app = sweep_command.typer.Typer()

    @app.callback()
    def _group() -> None:
        """Make `sweep` a subcommand, as in the clustersim app."""

    sweep_command.register(app)
    return app


def _sweep_file(tmp_path: Path, **body: object) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"base": BASE, **body}, sort_keys=False))
    return path


def test_a_held_lock_refuses_naming_its_holder(tmp_path: Path) -> None:
    """While another writer holds results.csv.lock, taking it is a ConfigError naming that writer's pid, host and
    start, and the lock file is left as it was."""
    out = tmp_path / "results.csv"
    holder = json.dumps({"pid": 4242, "host": "node7", "started": "2026-01-01 00:00:00 UTC"})
    lock_path(out).write_text(holder)
    with lock_path(out).open() as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another open file: conflicts even within this process
        with pytest.raises(ConfigError, match=r"being written by another sweep \(pid 4242 on node7, since 2026"), \
                OutputLock(out, "sweep"):
            pass
    assert lock_path(out).read_text() == holder


def test_a_holder_that_has_not_yet_written_its_name_is_waited_for(tmp_path: Path) -> None:
    """A writer locks first and writes its name after: one refused in between waits for the name instead of
    reporting a writer with none."""
    out = tmp_path / "results.csv"
    holder = json.dumps({"pid": 4343, "host": "node8", "started": "2026-01-01 00:00:00 UTC"}) + "\n"
    lock_path(out).write_text("")
    with lock_path(out).open("r+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        late = threading.Timer(0.2, lambda: (held.write(holder), held.flush()))
        late.start()
        with pytest.raises(ConfigError, match=r"another sweep \(pid 4343 on node8, since 2026"), \
                OutputLock(out, "sweep"):
            pass
        late.join()


def test_a_stale_lock_is_taken_over_and_removed_after(tmp_path: Path) -> None:
    """A lock file no one holds (its writer died) is taken over: it then names this process, and is removed when
    the writer is done."""
    out = tmp_path / "results.csv"
    lock_path(out).write_text(json.dumps({"pid": 999_999_999, "host": "gone", "started": "then"}))
    with OutputLock(out, "sweep"):
        assert json.loads(lock_path(out).read_text())["pid"] == os.getpid()
    assert not lock_path(out).exists()


def test_a_second_sweep_on_a_locked_output_exits_2_naming_the_holder(tmp_path: Path) -> None:
    """clustersim sweep on an output whose lock is held: exit code 2, one line naming the holder; nothing written."""
    out = tmp_path / "results.csv"
    sweep_file = _sweep_file(tmp_path, axes={"nodes": [1]})
    with OutputLock(out, "sweep"):
        result = subprocess.run([sys.executable, "-m", "simulator.cli.app", "sweep", str(sweep_file), "-o", str(out)],
                                capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"is being written by another sweep (pid {os.getpid()} on " in result.stderr
    assert not out.exists()


@pytest.mark.parametrize(("value", "cell"), [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"), ("+cmd", "'+cmd"), ("-x", "'-x"),
    ("@SUM(A1)", "'@SUM(A1)"),
    ("\tx", "'\tx"), ("\rx", "'\rx"), ("-", "'-"), ("-1.5", "-1.5"), ("+3", "+3"), ("-2e-3", "-2e-3"), ("ib", "ib"),
    (-3, -3), (-0.5, -0.5), (None, None), (True, True),
])
def test_csv_cells_that_could_start_a_formula_are_text(value: object, cell: object) -> None:
    """OWASP's rule: text beginning with =, +, -, @, tab or CR gets a leading single quote; numbers, signed ones
    included (as numbers or as their text), stay as they are."""
    assert csv_cell(value) == cell


def test_a_sweep_writes_formula_like_values_as_text(tmp_path: Path) -> None:
    """Axis values that would run as formulas in a spreadsheet come out of the CSV quoted as text."""
    names = ["=1+2", "@SUM(A1)", "-x", "+x", "\tx"]
    sweep_file = _sweep_file(tmp_path, scenarios=[{"training.model": name} for name in names])
    out = tmp_path / "results.csv"
    result = CliRunner().invoke(_app(), ["sweep", str(sweep_file), "-o", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    with out.open(newline="") as handle:
        cells = sorted(row["training.model"] for row in csv.DictReader(handle))
    assert cells == sorted("'" + name for name in names)


def test_a_sweep_over_the_cap_states_its_size_and_needs_yes(tmp_path: Path) -> None:
    """3 scenarios with --max-scenarios 2: refused before anything runs, naming the count, an estimated time and
    --yes; with --yes the size is stated and the sweep runs."""
    sweep_file = _sweep_file(tmp_path, axes={"nodes": [1, 2, 4]})
    out = tmp_path / "results.csv"
    refused = CliRunner().invoke(_app(), ["sweep", str(sweep_file), "-o", str(out), "--max-scenarios", "2"])
    assert isinstance(refused.exception, ConfigError)
    message = str(refused.exception)
    assert "3 scenarios, about " in message and "--max-scenarios 2" in message and "--yes" in message
    assert not out.exists()
    ran = CliRunner().invoke(_app(), ["sweep", str(sweep_file), "-o", str(out), "--max-scenarios", "2", "--yes",
                                      "--workers", "1"])
    assert ran.exit_code == 0, ran.output
    assert "3 scenarios, about " in ran.output and "3 done (0 failed)" in ran.output


@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.sampled_from(["product", "zip"]))
def test_points_are_counted_and_indexed_without_enumerating(lengths: list[int], mode: str) -> None:
    """count_points and point_at agree with the enumeration, for products and zips of any shape."""
    if mode == "zip":
        lengths = [lengths[0]] * len(lengths)
    axes = {f"axis{i}": list(range(n)) for i, n in enumerate(lengths)}
    spec = sweep_from_data({"base": BASE, "axes": axes, "mode": mode}, "test")
    values = list(axes.values())
    combos = list(zip(*values, strict=True)) if mode == "zip" else list(itertools.product(*values))
    expected = [dict(zip(axes, combo, strict=True)) for combo in combos]
    assert count_points(spec) == len(expected)
    assert [point_at(spec, i) for i in range(len(expected))] == expected


def test_scenarios_are_resolved_as_they_are_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep of a million points yields its first scenario after resolving one (the bar can start at once)."""
    spec = sweep_from_data({"base": BASE, "axes": {"training.seq_len": list(range(256, 256 + 1000)),
                                                   "training.micro_batch": list(range(1, 1001))}}, "test")
    resolved = []
    original = spec_module._resolve

    def counting(base: dict, point: dict) -> Scenario:
        resolved.append(point)
        return original(base, point)

    monkeypatch.setattr(spec_module, "_resolve", counting)
    assert count_points(spec) == 1_000_000
    next(iter_scenarios(spec))
    assert len(resolved) == 1


def test_a_run_takes_scenarios_as_workers_free_up() -> None:
    """run_sweep draws no more than a window of scenarios ahead of the rows it has delivered."""
    spec = sweep_from_data({"base": BASE, "axes": {"nodes": [1, 2], "training.micro_batch": [1, 2, 4, 8],
                                                   "inter_node.nic_gbps": [200, 400]}}, "test")
    drawn, ahead = [0], []

    def scenarios() -> Iterator[Scenario]:
        for scenario in iter_scenarios(spec):
            drawn[0] += 1
            yield scenario

    rows: list[dict] = []

    def record(row: dict) -> None:
        rows.append(row)
        ahead.append(drawn[0] - len(rows))

    run_sweep(scenarios(), workers=1, scheduler=None, done=set(), on_result=record)
    assert len(rows) == 16 and max(ahead) <= WINDOW_PER_WORKER
