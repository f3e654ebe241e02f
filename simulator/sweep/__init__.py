"""Sweeps: thousands of scenarios from one base and its axes, run in a process pool or on Dask
(DESIGN.md section 12). The CLI (`clustersim sweep`) reads the sweep file and writes the results."""

from simulator.sweep.run import METRICS, SweepSummary, columns, evaluate, run_sweep
from simulator.sweep.spec import (
    Scenario,
    SweepSpec,
    axis_paths,
    count_points,
    expand,
    iter_scenarios,
    point_at,
    resolve_point,
    sweep_from_data,
)

__all__ = ["METRICS", "Scenario", "SweepSpec", "SweepSummary", "axis_paths", "columns", "count_points", "evaluate",
           "expand", "iter_scenarios", "point_at", "resolve_point", "run_sweep", "sweep_from_data"]
