"""`sweep`: every scenario of a sweep (a base scenario and axes to vary) predicted, in local worker processes
or on a Dask cluster, as `clustersim sweep` runs it (simulator.sweep), with the rows kept in memory."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.api.results import Result
from simulator.core.errors import ConfigError
from simulator.core.input_file import read_input_text
from simulator.core.yaml_text import load_yaml_text
from simulator.sweep import Scenario as SweepPoint
from simulator.sweep import SweepSpec, axis_paths, columns, iter_scenarios, run_sweep, sweep_from_data
from simulator.sweep.run import check_scheduler_address
from simulator.sweep.spec import check_axis_paths


@dataclass(frozen=True)
class SweepResult(Result):
    """One row a scenario, in the sweep's order, with the columns of `clustersim sweep`'s output:
    scenario_hash, the axis values, the metrics (step_time_s, tokens_per_s, mfu, ...), provenance and
    `error` (a scenario that failed has its error and no metrics). `axes` names the axis columns."""

    FIGURE = "sweep_figure"

    columns: tuple[str, ...]
    axes: tuple[str, ...]
    rows: tuple[dict[str, Any], ...]
    failed: int
    seconds: float

    def to_records(self) -> list[dict[str, Any]]:
        """The rows, for `pandas.DataFrame(result.to_records())`."""
        return [dict(row) for row in self.rows]


def _spec(spec: SweepSpec | Mapping[str, Any] | str | Path) -> SweepSpec:
    if isinstance(spec, SweepSpec):
        return spec
    if isinstance(spec, Mapping):
        return sweep_from_data(dict(spec), "sweep")
    path = Path(spec)
    return sweep_from_data(load_yaml_text(read_input_text(path, "sweep"), str(path)), str(path))


def sweep(spec: SweepSpec | Mapping[str, Any] | str | Path, scheduler: str | None = None, *,
          workers: int | None = None) -> SweepResult:
    """Predict every scenario of `spec` (a sweep YAML path, its data: base, axes, mode or scenarios) in
    `workers` local processes (default: the CPU count), or on the Dask scheduler at `scheduler`
    (tcp://HOST:PORT, needs clustersim[dask]). A scenario that fails becomes a row with its error; it
    does not stop the others. A script calling this needs the `if __name__ == "__main__":` guard (the
    workers are spawned processes that import it)."""
    sweep_spec = _spec(spec)
    check_axis_paths(sweep_spec)
    if scheduler is not None:
        check_scheduler_address(scheduler)
    workers = workers if workers is not None else os.cpu_count() or 1
    if workers < 1:
        raise ConfigError(f"sweep workers must be >= 1, got {workers}")
    order: dict[str, int] = {}

    def points() -> Iterator[SweepPoint]:
        for point in iter_scenarios(sweep_spec):
            order.setdefault(point.scenario_hash, len(order))
            yield point

    rows: list[dict[str, Any]] = []
    summary = run_sweep(points(), workers=workers, scheduler=scheduler, done=set(), on_result=rows.append)
    rows.sort(key=lambda row: order[row["scenario_hash"]])
    axes = axis_paths(sweep_spec)
    return SweepResult(tuple(columns(axes)), tuple(axes), tuple(rows), summary.failed, summary.seconds)
