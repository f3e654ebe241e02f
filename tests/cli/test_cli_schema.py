"""`schema`: the JSON Schema of the input files, from the specs that validate them."""

from __future__ import annotations

import json
import subprocess
import sys


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulator.cli.app", *args], capture_output=True, text=True)


def test_scenario_schema_describes_every_spec():
    """The scenario schema defines the topology, training, strategy and parallel specs, each field
    with its description (the docs editors and --help rely on)."""
    out = run("schema")
    assert out.returncode == 0, out.stderr
    defs = json.loads(out.stdout)["$defs"]
    assert {"TopologySpec", "TrainingSpec", "StrategySpec", "ParallelSpec"} <= set(defs)
    parallel = defs["ParallelSpec"]["properties"]
    assert {"tp", "pp", "pipeline_schedule", "placement"} <= set(parallel)
    assert all("description" in field for field in parallel.values())


def test_unknown_schema_kind_exits_2():
    """An unknown kind names the known ones and exits 2."""
    out = run("schema", "nope")
    assert out.returncode == 2
    assert "scenario, topology, training, model, sweep" in out.stderr


def test_help_prose_is_reflowed_and_examples_kept():
    """Command help: a prose paragraph's source line breaks go (the terminal wraps it), indented example
    paragraphs keep theirs."""
    from simulator.cli.common import reflowed

    text = "First line\nof the summary.\n\nExamples:\n\n  clustersim predict\n      --json\n"
    assert reflowed(text) == "First line of the summary.\n\nExamples:\n\n  clustersim predict\n      --json"
