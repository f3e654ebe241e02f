"""`compare` and stragglers: what-ifs as scenario files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulator.cli.app", *args], capture_output=True, text=True)


def test_compare_reports_every_scenario_with_changes():
    """Three scenarios: a table with one column each and changes relative to the first."""
    files = [str(EXAMPLES / name) for name in ("base.yaml", "roce-200g.yaml", "straggler.yaml")]
    out = run("compare", *files)
    assert out.returncode == 0, out.stderr
    assert "RoCE 200G" in out.stdout and "one slow GPU" in out.stdout and "%)" in out.stdout


def test_scenarios_sharing_a_name_are_told_apart_by_their_files(tmp_path):
    """Two files with the same name (a copy of base.yaml on 4 nodes) get their paths in the column headers (both
    columns headed alike would not tell them apart)."""
    copy = tmp_path / "four.yaml"
    copy.write_text((EXAMPLES / "base.yaml").read_text().replace("nodes: 8", "nodes: 4"))
    out = subprocess.run([sys.executable, "-m", "simulator.cli.app", "compare", str(EXAMPLES / "base.yaml"), str(copy)],
                         capture_output=True, text=True, env={**os.environ, "COLUMNS": "300"})
    assert out.returncode == 0, out.stderr
    assert "four.yaml" in out.stdout and "examples/base.yaml" in out.stdout


def test_compare_shows_values_as_written_and_percentages_in_points(tmp_path):
    """A link fault reads 'none -> s5/nic3 x0.25' (not a Python repr) and a change of GPU idle time is given in
    percentage points (a relative change of a fraction near zero says nothing)."""
    out = run("compare", str(EXAMPLES / "base.yaml"), str(EXAMPLES / "degraded-nic.yaml"), "--json")
    assert out.returncode == 0, out.stderr
    change = json.loads(out.stdout)["scenarios"][1]["differs_from_base"]
    assert "topology.link_faults: none -> s5/nic3 x0.25" in change
    table = run("compare", str(EXAMPLES / "base.yaml"), str(EXAMPLES / "straggler.yaml"))
    assert " pt)" in table.stdout and "'device'" not in table.stdout


def test_compare_names_what_each_scenario_changes():
    """Each scenario lists the resolved fields it changes from the base (presets expanded; names and
    descriptions left out): the RoCE file its transport and NIC speed, the straggler file its straggler."""
    files = [str(EXAMPLES / name) for name in ("base.yaml", "roce-200g.yaml", "straggler.yaml")]
    out = run("compare", *files, "--json")
    assert out.returncode == 0, out.stderr
    changes = [s["differs_from_base"] for s in json.loads(out.stdout)["scenarios"]]
    assert changes == [[], ["topology.inter_node.transport: ib -> roce",
                            "topology.inter_node.nic_gbps: 400 -> 200"],
                       ["stragglers.slowdown: none -> 1.15", "stragglers.gpus: none -> 1"]]
    table = run("compare", *files)
    assert "differs from the base" in table.stdout and "(the base)" in table.stdout


def test_a_straggler_slows_the_step_by_its_factor_on_compute():
    """A GPU 15% slower slows a synchronous, compute-bound step by about 15% (everyone waits for
    it); the others' wait is (1 - 1/1.15) of its compute time."""
    out = run("compare", str(EXAMPLES / "base.yaml"), str(EXAMPLES / "straggler.yaml"), "--json")
    assert out.returncode == 0, out.stderr
    base, slow = json.loads(out.stdout)["scenarios"]
    assert slow["step_time_s"] / base["step_time_s"] == pytest.approx(1.15, rel=0.02)
    assert slow["idle_breakdown_s"]["straggler_wait"] == pytest.approx(slow["compute_s"] * (1 - 1 / 1.15))


def test_compare_needs_two_files_and_readable_ones(tmp_path):
    """One file, or a missing one: exit 2 naming the problem."""
    assert run("compare", str(EXAMPLES / "base.yaml")).returncode == 2
    missing = run("compare", str(EXAMPLES / "base.yaml"), str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "nope.yaml" in missing.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("topology: dgx-h100\ntraining: {model: llama2-7b}\nstragglers: {slowdown: 0.5}\n")
    result = run("compare", str(EXAMPLES / "base.yaml"), str(bad))
    assert result.returncode == 2 and "stragglers.slowdown" in result.stderr


def test_compare_report_is_a_self_contained_page(tmp_path):
    """--report writes one HTML page with the chart and the side-by-side table, no network needed."""
    page = tmp_path / "what-if.html"
    files = [str(EXAMPLES / name) for name in ("base.yaml", "straggler.yaml")]
    out = run("compare", *files, "--report", str(page))
    assert out.returncode == 0, out.stderr
    html = page.read_text()
    assert 'src="http' not in html and "compare-time" in html and "one slow GPU" in html


def test_compare_lists_every_kind_of_exposed_wait_and_compares_models_by_shape(tmp_path):
    """A TP x PP scenario against a preset one: the table has a row for each kind of communication either
    waited on (tensor-parallel and pipeline sends too, so the rows add up to the exposed communication), and a
    model given inline is compared field by field, not as 'training.model: llama2-7b -> None'."""
    inline = tmp_path / "inline.yaml"
    inline.write_text((EXAMPLES / "base.yaml").read_text().replace(
        "model: llama2-13b", "model: {name: small, layers: 8, hidden: 2048, heads: 16, vocab: 32000, "
        "max_seq_len: 4096}").replace("strategy: {kind: fsdp}", "strategy: {kind: zero1}\n  parallel: {tp: 8, pp: 4}"))
    out = subprocess.run([sys.executable, "-m", "simulator.cli.app", "compare", str(EXAMPLES / "base.yaml"),
                          str(inline)], capture_output=True, text=True, env={**os.environ, "COLUMNS": "300"})
    assert out.returncode == 0, out.stderr
    assert "waiting on tp_comm" in out.stdout and "waiting on p2p" in out.stdout
    assert "training.model:" not in out.stdout and "model.layers: 40 -> 8" in out.stdout
