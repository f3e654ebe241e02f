"""Sweeps: thousands of scenarios from one base and its axes, run in a process pool or on Dask
(DESIGN.md section 12). The CLI (`clustersim sweep`) reads the sweep file and writes the results."""

from simulator.sweep.run import METRICS, SweepSummary, columns, evaluate, run_sweep
from simulator.sweep.spec import Scenario, SweepSpec, expand, sweep_from_data

__all__ = ["METRICS", "Scenario", "SweepSpec", "SweepSummary", "columns", "evaluate", "expand", "run_sweep",
           "sweep_from_data"]
