"""The scripts that write the docs site's generated pages: the CLI and schema reference from the app, and
the accuracy pages from the CLI's JSON reports."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import typer

from simulator.cli.schema import SPECS
from simulator.scenario import ScenarioSpec
from workloads.frameworks import FRAMEWORKS

ROOT = Path(__file__).resolve().parents[2]


def _module(relative: str) -> ModuleType:
    """Load a script of the repository (not a package module) by its path."""
    spec = importlib.util.spec_from_file_location(Path(relative).stem, ROOT / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _split(median: float) -> dict[str, Any]:
    return {"points": 4, "median_abs_pct_error": median, "p90_abs_pct_error": 2 * median}


def _reports() -> dict[str, dict[str, Any]]:
    """A minimal set of the JSON reports the accuracy script reads, with hand-picked figures."""
    log = {"file": "h100x8-2node-allreduce-x.txt", "collective": "all_reduce", "points": 8,
           "median_abs_pct_error": 11.0, "median_abs_pct_error_ge_1MiB": 12.5, "median_abs_pct_error_lt_1MiB": 9.5}
    validate = {"logs": [log], "points": 8, "median_abs_pct_error": 11.0, "p90_abs_pct_error": 30.0,
                "median_abs_pct_error_ge_1MiB": 12.5, "p90_abs_pct_error_ge_1MiB": 31.0,
                "median_abs_pct_error_lt_1MiB": 9.5, "p90_abs_pct_error_lt_1MiB": 29.0}
    held = {"file": "h100x8-4node-allreduce-x.txt", "prior": {"ge_1MiB": _split(20.0), "lt_1MiB": _split(10.0)},
            "calibrated": {"ge_1MiB": _split(6.25), "lt_1MiB": _split(7.75)}}
    crossval = {"held_out": [held], "prior": held["prior"], "calibrated": held["calibrated"]}

    def case(source: str, error: float | None, model_parallel: bool, skipped: str | None = None) -> dict[str, Any]:
        return {"source": source, "abs_pct_error": error, "lookup_abs_pct_error": None if error is None else 2 * error,
                "in_scope": True, "model_parallel": model_parallel, "skipped": skipped}

    cases = [case("llmfoundry", 2.0, False), case("llmfoundry", 4.0, False), case("megatron", 8.0, True),
             case("bloom", None, True, "layout tp x pp x dp = 8 x 10 x 8 = 640 GPUs, but the case has 320 GPUs"),
             case("zeropp", None, False, "ZeRO++ (quantized weight/gradient collectives) is not expressible")]
    pairs = [{"abs_pct_error": 1.5, "lookup_abs_pct_error": 2.5}]
    return {"validate": validate, "crossval-nodes": crossval, "crossval-cluster": crossval,
            "crossval-size": crossval, "validate-training": {"cases": cases, "pairs": pairs}}


def test_collectives_page_reports_uncalibrated_and_held_out_figures():
    """The collectives page carries the uncalibrated medians, each held-out split and every log's row."""
    page = _module("benchmarks/accuracy_report.py").collectives_page(_reports())
    assert "| sizes >= 1 MiB | **12.5%** | 31.0% |" in page
    assert "| fit on <= 2 nodes, predict larger runs (`--group-by nodes`) | 1 | 20.0% | **6.2%** |" in page
    assert "| h100x8-4node-allreduce-x | 20.0% | 6.2% | 10.0% | 7.8% |" in page
    assert "| h100x8-2node-allreduce-x | all_reduce | 8 | 12.5% | 9.5% |" in page


def test_training_page_splits_by_parallelism_and_counts_skips():
    """The training page: medians per parallelism class over the expressed cases (2 and 4 -> 3.0%), the
    leave-one-out lookup beside them, the change pairs, and skip reasons without the case's own figures."""
    page = _module("benchmarks/accuracy_report.py").training_page(_reports())
    assert "| data parallelism only (DDP, ZeRO, FSDP) | 2/3 | **3.0%** | 6.0% (2 cases) |" in page
    assert "| tensor, pipeline or context parallelism | 1/2 | **8.0%** | 16.0% (1 case) |" in page
    assert "median of **1.5%** (lookup table 2.5%)" in page
    assert "| the stated layout does not add up to the case's GPU count | 1 |" in page
    assert "| ZeRO++ | 1 |" in page


def test_cli_reference_has_every_command_of_the_app():
    """docs/cli.md gets a section, with its usage line, for every command the app registers."""
    generator = _module("docs/gen_reference.py")
    page = generator.cli_reference()
    paths = generator._commands(typer.main.get_command(generator.app), ())
    assert {"predict", "plan", "validate-training"} <= {p[-1] for p in paths}
    for path in paths:
        assert f"## clustersim {' '.join(path)}\n" in page
        assert f"Usage: clustersim {' '.join(path)}" in page


def test_schema_reference_lists_every_scenario_field():
    """docs/schema.md has a section per input kind and a row for each top-level field of a scenario."""
    page = _module("docs/gen_reference.py").schema_reference()
    for kind in SPECS:
        assert f"## {kind}\n" in page
    for field in ScenarioSpec.model_fields:
        assert f"| `{field}` |" in page


def test_frameworks_reference_lists_every_default_with_its_source():
    """docs/frameworks.md has a row for each framework default, its source in the row."""
    page = _module("docs/gen_reference.py").frameworks_reference()
    for name, conventions in FRAMEWORKS.items():
        for default in conventions.defaults:
            row = next(line for line in page.splitlines() if line.startswith(f"| `{name}` | {default.path} |"))
            assert " ".join(default.source.split())[:40] in row


def test_training_page_reports_the_held_out_runs_each_with_its_signed_error():
    """With the held-out report, the training page adds its summary (3.0% over two expressed data-parallel runs)
    and one row per run: published, predicted and signed error, or the skip reason."""
    reports = _reports()

    def run(run_id: str, published: float, predicted: float | None, skipped: str | None = None) -> dict[str, Any]:
        error = None if predicted is None else 100.0 * abs(predicted / published - 1.0)
        return {"id": run_id, "source": "nemoperf", "published": published, "predicted": predicted,
                "abs_pct_error": error, "lookup_abs_pct_error": None, "in_scope": True, "model_parallel": False,
                "skipped": skipped}

    reports["validate-training-heldout"] = {"cases": [run("nemoperf-a", 800.0, 824.0), run("nemoperf-b", 500.0, 485.0),
                                                      run("nemoperf-c", 600.0, None, "model shape not stated")]}
    page = _module("benchmarks/accuracy_report.py").training_page(reports)
    assert "## Held-out runs" in page
    assert "| all | 2/3 | **3.0%** | - (0 cases) |" in page
    assert "| nemoperf-a | 800 | 824 | +3.0% |" in page and "| nemoperf-b | 500 | 485 | -3.0% |" in page
    assert "| nemoperf-c | 600 | - | skipped: model shape not stated |" in page
