"""Sweeps: expansion and hashes, process pool equals Dask, failures recorded, resume after interruption."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from simulator.cli import sweep as sweep_command
from simulator.cli import sweep_results
from simulator.core.errors import ConfigError
from simulator.sweep import METRICS, SweepSpec, expand, run_sweep, sweep_from_data

TINY_BASE = {
    "name": "tiny",
    "topology": "dgx-h100",
    "training": {
        "model": {"name": "tiny", "layers": 4, "hidden": 1024, "heads": 8, "vocab": 32000, "max_seq_len": 1024},
        "seq_len": 1024, "micro_batch": 1, "global_batch": 64, "strategy": {"kind": "fsdp"},
    },
}
TINY_AXES = {"nodes": [1, 2], "training.strategy.kind": ["fsdp", "ddp"], "inter_node.transport": ["ib", "roce"]}


def _tiny(**changes: object) -> SweepSpec:
    return sweep_from_data({"base": TINY_BASE, "axes": TINY_AXES, **changes}, "test")


def _run(spec: SweepSpec, **kwargs: object) -> dict[str, dict]:
    rows: list[dict] = []
    options = {"workers": 2, "scheduler": None, "done": set(), **kwargs}
    run_sweep(expand(spec), on_result=rows.append, **options)  # type: ignore[arg-type]
    return {row["scenario_hash"]: row for row in rows}


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _group() -> None:
        """Make `sweep` a subcommand, as in the clustersim app."""

    sweep_command.register(app)
    return app


def test_product_and_zip_expand_to_the_expected_counts():
    """product: 2 x 2 x 2 = 8 scenarios; zip: the lists taken together, 2 scenarios."""
    assert len(expand(_tiny())) == 8
    assert len(expand(_tiny(mode="zip"))) == 2


def test_hashes_are_stable_and_distinct():
    """Expanding twice gives the same hashes (16 hex digits), one per distinct scenario; the name
    (a label) does not change them, a changed value does."""
    first, again = expand(_tiny()), expand(_tiny())
    hashes = [s.scenario_hash for s in first]
    assert hashes == [s.scenario_hash for s in again]
    assert len(set(hashes)) == 8 and all(len(h) == 16 and int(h, 16) >= 0 for h in hashes)
    renamed = expand(sweep_from_data({"base": {**TINY_BASE, "name": "other"}, "axes": TINY_AXES}, "test"))
    assert [s.scenario_hash for s in renamed] == hashes
    faster = expand(_tiny(axes={**TINY_AXES, "inter_node.nic_gbps": [800]}))
    assert not {s.scenario_hash for s in faster} & set(hashes)


def test_transport_axis_overrides_the_preset():
    """inter_node.transport applies to the topology preset as an override."""
    transports = {s.axes["inter_node.transport"]: s.topology.inter_node.transport for s in expand(_tiny())}
    assert transports == {"ib": "ib", "roce": "roce"}


def test_bad_axis_path_is_a_config_error_naming_it():
    """An unknown field path fails the whole sweep with a ConfigError that names the path."""
    with pytest.raises(ConfigError, match="training.strategy.kindd"):
        expand(_tiny(axes={"training.strategy.kindd": ["fsdp"]}))
    with pytest.raises(ConfigError, match="fabric.nope"):
        expand(_tiny(axes={"fabric.nope": [1]}))


def test_process_pool_equals_dask_local_cluster():
    """The same scenarios on a process pool and on a Dask LocalCluster give identical rows."""
    distributed = pytest.importorskip("distributed")
    pool = _run(_tiny())
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) \
            as cluster:
        dask = _run(_tiny(), scheduler=cluster.scheduler_address)
    assert set(pool) == set(dask) == {s.scenario_hash for s in expand(_tiny())}
    assert pool == dask
    assert all(row["error"] is None and row["step_time_s"] > 0 for row in pool.values())


def test_failed_scenarios_are_recorded_and_the_rest_complete():
    """A global batch that does not divide over 3 nodes (24 GPUs) and an unknown model preset are
    rows with their error; the other scenarios complete."""
    spec = sweep_from_data({"base": TINY_BASE, "scenarios": [
        {"nodes": 1}, {"nodes": 3}, {"nodes": 2}, {"training.model": "no-such-model"}]}, "test")
    rows = list(_run(spec, workers=1).values())
    assert [row["nodes"] for row in rows if row["error"] is None] and len(rows) == 4
    errors = {str(row.get("nodes", row.get("training.model"))): row["error"] for row in rows}
    assert "64" in errors["3"] and errors["1"] is None and errors["2"] is None
    assert "no-such-model" in errors["no-such-model"]
    assert all(row["step_time_s"] is None for row in rows if row["error"])


def test_resume_runs_only_the_missing_scenarios(tmp_path: Path):
    """Interrupted run (half the rows, then half a row) + rerun: only the missing scenarios run,
    every hash appears once, and the rerun's numbers equal the first run's."""
    sweep_file, out = tmp_path / "sweep.yaml", tmp_path / "results.csv"
    sweep_file.write_text(yaml.safe_dump({"base": TINY_BASE, "axes": TINY_AXES}, sort_keys=False))
    runner = CliRunner()
    first = runner.invoke(_app(), ["sweep", str(sweep_file), "-o", str(out), "--workers", "2"])
    assert first.exit_code == 0, first.output
    lines = out.read_text().splitlines(keepends=True)
    assert len(lines) == 9
    with out.open(newline="") as handle:
        complete = {row["scenario_hash"]: row for row in csv.DictReader(handle)}
    out.write_text("".join(lines[:5]) + lines[5][:20])  # header, 4 rows, and a torn fifth row
    second = runner.invoke(_app(), ["sweep", str(sweep_file), "-o", str(out), "--workers", "2"])
    assert second.exit_code == 0, second.output
    assert "4 done (0 failed), 4 skipped" in second.output
    with out.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted(row["scenario_hash"] for row in rows) == sorted(complete)
    assert {row["scenario_hash"]: row for row in rows} == complete
    assert list(rows[0]) == ["scenario_hash", *TINY_AXES, *METRICS, "calibration_id", "clustersim_version", "error"]


def test_resuming_rows_of_changed_scenarios_warns(tmp_path: Path):
    """Rows whose hash matches none of the sweep's scenarios (written before the sweep file or clustersim changed)
    are kept, named in a warning, and their scenarios run again (not re-run silently)."""
    sweep_file, out = tmp_path / "sweep.yaml", tmp_path / "results.csv"
    sweep_file.write_text(yaml.safe_dump({"base": TINY_BASE, "axes": TINY_AXES}, sort_keys=False))
    runner = CliRunner()
    assert runner.invoke(_app(), ["sweep", str(sweep_file), "-o", str(out), "--workers", "1"]).exit_code == 0
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join([lines[0], "0" * 16 + lines[1][lines[1].index(","):], *lines[2:]]))  # one stale hash
    again = runner.invoke(_app(), ["sweep", str(sweep_file), "-o", str(out), "--workers", "1"])
    assert again.exit_code == 0, again.output
    said = " ".join(again.output.split())  # rich wraps at the terminal width
    assert "1 row(s) in" in said and "match none of this sweep's scenarios" in said
    assert "1 done (0 failed), 7 skipped" in said


@pytest.mark.parametrize(("args", "message"), [
    (["-o", "results.txt"], "must end in .csv or .parquet"),
    (["-o", "results.csv", "--scheduler", "not-an-address"], "--scheduler"),
])
def test_bad_output_or_scheduler_is_a_config_error(tmp_path: Path, args: list[str], message: str):
    """A bad output suffix or scheduler address is a one-line ConfigError (exit code 2 in clustersim)."""
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(yaml.safe_dump({"base": TINY_BASE, "axes": TINY_AXES}, sort_keys=False))
    result = CliRunner().invoke(_app(), ["sweep", str(sweep_file), *[str(tmp_path / a) if a.startswith("results")
                                                                     else a for a in args]])
    assert isinstance(result.exception, ConfigError) and message in str(result.exception)


def test_examples_expand():
    """sweep-small has at least 24 scenarios, sweep-capacity at least 1,000 (expanded, not run)."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    counts = {name: len(sweep_from_data(yaml.safe_load((examples / name).read_text()), name).axes)
              for name in ("sweep-small.yaml", "sweep-capacity.yaml")}
    assert counts == {"sweep-small.yaml": 3, "sweep-capacity.yaml": 6}
    assert len(expand(sweep_from_data(yaml.safe_load((examples / "sweep-small.yaml").read_text()), "small"))) >= 24


def test_parquet_results_resume(tmp_path: Path):
    """With pyarrow: a Parquet results file holds every scenario once, and a rerun skips them all."""
    parquet = pytest.importorskip("pyarrow.parquet")
    sweep_file, out = tmp_path / "sweep.yaml", tmp_path / "results.parquet"
    sweep_file.write_text(yaml.safe_dump({"base": TINY_BASE, "axes": {"nodes": [1, 2]}}, sort_keys=False))
    for expected in ("2 done (0 failed), 0 skipped", "0 done (0 failed), 2 skipped"):
        result = CliRunner().invoke(_app(), ["sweep", str(sweep_file), "-o", str(out), "--workers", "1"])
        assert result.exit_code == 0 and expected in result.output, result.output
    table = parquet.read_table(out)
    assert table.num_rows == 2 and table.column("nodes").to_pylist() in ([1, 2], [2, 1])


def test_parquet_without_pyarrow_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Without pyarrow, a .parquet output is a ConfigError saying to use .csv or install pyarrow."""
    monkeypatch.setattr(sweep_results, "pyarrow", None)
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(yaml.safe_dump({"base": TINY_BASE, "axes": TINY_AXES}))
    result = CliRunner().invoke(_app(), ["sweep", str(sweep_file), "-o", str(tmp_path / "r.parquet")])
    assert isinstance(result.exception, ConfigError) and "pyarrow" in str(result.exception)


def test_3d_example_runs(tmp_path: Path):
    """examples/sweep-3d.yaml sweeps TP x PP degrees: 4 scenarios, none failed, and the pipelined
    layouts hold less memory per GPU than the unpipelined ones of the same TP degree."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    out = tmp_path / "3d.csv"
    result = CliRunner().invoke(_app(), ["sweep", str(examples / "sweep-3d.yaml"), "-o", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 4 and not any(r["error"] for r in rows)
    memory = {(r["training.parallel.tp"], r["training.parallel.pp"]): float(r["memory_per_gpu_bytes"]) for r in rows}
    assert memory["2", "4"] < memory["2", "1"] and memory["8", "4"] < memory["8", "1"]


def test_long_context_example_runs(tmp_path: Path):
    """examples/sweep-long-context.yaml sweeps sequence length x context-parallel degree: 9 scenarios, none
    failed; 32k tokens fit without CP, 128k need CP (4 fits, 1 does not), 512k need CP 16; at a fixed
    sequence a larger CP degree holds less memory per GPU."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    out = tmp_path / "long.csv"
    result = CliRunner().invoke(_app(), ["sweep", str(examples / "sweep-long-context.yaml"), "-o", str(out),
                                         "--workers", "1"])
    assert result.exit_code == 0, result.output
    rows = {(int(r["training.seq_len"]), int(r["training.parallel.cp"])): r for r in csv.DictReader(out.open())}
    assert len(rows) == 9 and not any(r["error"] for r in rows.values())
    fits = {key for key, r in rows.items() if r["fits_in_memory"] == "True"}
    assert fits == {(32768, 1), (32768, 4), (32768, 16), (131072, 4), (131072, 16), (524288, 16)}
    memory = {key: float(r["memory_per_gpu_bytes"]) for key, r in rows.items()}
    assert memory[131072, 16] < memory[131072, 4] < memory[131072, 1]


def test_experts_example_runs(tmp_path: Path):
    """examples/sweep-experts.yaml sweeps expert-parallel degree x strategy for Mixtral 8x7B: 8 scenarios, none
    failed; ZeRO-1 fits from EP 4 on, FSDP at every EP; memory per GPU falls as EP grows under either."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    out = tmp_path / "experts.csv"
    result = CliRunner().invoke(_app(), ["sweep", str(examples / "sweep-experts.yaml"), "-o", str(out),
                                         "--workers", "1"])
    assert result.exit_code == 0, result.output
    rows = {(int(r["training.parallel.ep"]), r["training.strategy.kind"]): r for r in csv.DictReader(out.open())}
    assert len(rows) == 8 and not any(r["error"] for r in rows.values())
    fits = {key for key, r in rows.items() if r["fits_in_memory"] == "True"}
    assert fits == {(4, "zero1"), (8, "zero1"), (1, "fsdp"), (2, "fsdp"), (4, "fsdp"), (8, "fsdp")}
    for kind in ("zero1", "fsdp"):
        memory = [float(rows[ep, kind]["memory_per_gpu_bytes"]) for ep in (1, 2, 4, 8)]
        assert memory == sorted(memory, reverse=True)


def test_routing_example_runs(tmp_path: Path):
    """examples/sweep-routing.yaml sweeps load imbalance x capacity factor for Mixtral 8x7B over EP 8: 9
    scenarios, none failed; the step grows with imbalance when dropless, a capacity of 1.25 caps the growth,
    and a capacity of 1 holds every imbalance to the balanced step."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    out = tmp_path / "routing.csv"
    result = CliRunner().invoke(_app(), ["sweep", str(examples / "sweep-routing.yaml"), "-o", str(out),
                                         "--workers", "1"])
    assert result.exit_code == 0, result.output
    rows = {(float(r["training.routing.load_imbalance"]), r["training.routing.capacity_factor"] or None):
            float(r["step_time_s"]) for r in csv.DictReader(out.open()) if not r["error"]}
    assert len(rows) == 9
    assert rows[1.0, None] < rows[1.2, None] < rows[1.5, None]
    assert rows[1.2, None] == pytest.approx(rows[1.2, "1.25"])  # under capacity: nothing changes
    assert rows[1.0, None] < rows[1.5, "1.25"] < rows[1.5, None]
    assert rows[1.5, "1.0"] == pytest.approx(rows[1.0, None])
