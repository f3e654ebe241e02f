"""`predict` (one training step, as `clustersim predict --json`) and `scale` (the same job at several node
counts, as `clustersim scale --json`), and their results."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.api.results import Result, records
from simulator.api.scenario import ScenarioLike, as_scenario
from simulator.calibration.apply import predict_calibrated
from simulator.core.errors import ConfigError
from simulator.report.json_out import prediction_json, scale_row_json
from simulator.report.trace import trace_events
from simulator.run.summary import predict_run
from simulator.scaling import weak_scaling
from simulator.scenario import nccl_setup, pace_of, scenario_echo
from simulator.training.job_warnings import job_warnings
from simulator.training.prediction import StepPrediction

DEFAULT_TRAIN_TOKENS = 1e12  # the planning figures' token count without a run (as `clustersim predict`)


@dataclass(frozen=True)
class Prediction(Result):
    """One optimizer step of a scenario, with the fields of `clustersim predict --json` (DESIGN.md section 9;
    docs/api.md lists them): step time, throughput, MFU, GPU idle time, exposed communication by kind,
    memory per GPU; the failure-free planning figures for `train_tokens` tokens; `scenario`, the scenario as
    predicted; and `run`, the time to train through failures when the scenario has a `run` section."""

    FIGURE = "prediction_figure"

    train_tokens: float
    time_to_train_s: float
    gpu_hours: float
    cost_usd: float | None
    average_power_w_per_gpu: float
    energy_kwh: float
    step_time_s: float
    compute_s: float
    gpu_idle_s: float
    gpu_idle_fraction: float
    gpu_idle_by_class: dict[str, dict[str, float]]
    exposed_comm_s: float
    exposed_comm_by_collective_s: dict[str, float]
    idle_breakdown_s: dict[str, float]
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    tflops_per_gpu: float
    mfu: float
    n_gpus: int
    tokens_per_step: int
    memory_per_gpu_bytes: float
    memory_capacity_bytes: float
    fits_in_memory: bool
    memory_breakdown_bytes: dict[str, float]
    model: str
    calibration: str | None
    scenario: dict[str, Any]
    run: dict[str, Any] | None = None
    _step: StepPrediction | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The `clustersim predict --json` object (`run` only where the scenario has one)."""
        data = super().to_dict()
        if data["run"] is None:
            del data["run"]
        return data

    def trace(self) -> dict[str, Any]:
        """The step's timeline as Chrome Trace Event data (json.dump it, open it in ui.perfetto.dev): one
        data-parallel GPU, one row per stream, as `clustersim predict --trace` writes it."""
        step = _step_of(self)
        return trace_events(step.spans, f"{self.model}: one data-parallel GPU")


def _step_of(p: Prediction) -> StepPrediction:
    if p._step is None:
        raise ConfigError("this Prediction was built from data: its timeline is not available")
    return p._step


def _check_price(usd_per_gpu_hour: float | None) -> None:
    if usd_per_gpu_hour is not None and not 0 <= usd_per_gpu_hour < math.inf:
        raise ConfigError(f"usd_per_gpu_hour must be a finite number >= 0, got {usd_per_gpu_hour}")


def predict(scenario: ScenarioLike | None = None, *, train_tokens: float | None = None,
            usd_per_gpu_hour: float | None = None, calibration: str | Path | None = None,
            force_calibration: bool = False, measured_tokens_per_s_per_gpu: float | None = None) -> Prediction:
    """Predict one training step of `scenario` (a Scenario, its data, a scenario YAML path; None: the
    embedded one): the same numbers as `clustersim predict --json`.

    `train_tokens`: the token count of the failure-free planning figures (default: the scenario's run's,
    else 1e12); the time to train through failures comes from the scenario's `run`. `usd_per_gpu_hour`
    prices the GPU-hours. `calibration`: a profile YAML from `clustersim calibrate` (or `Calibration.to_yaml`
    written to a file); `measured_tokens_per_s_per_gpu` scales compute to a measured single-GPU rate.
    Warnings about the job (a batch that reads as tokens, a sequence past the model's context) are Python
    warnings. ConfigError (one line, naming the field) on a bad scenario."""
    scenario = as_scenario(scenario)
    _check_price(usd_per_gpu_hour)
    spec, topology, training, model = scenario._resolved
    for warning in job_warnings(training, model, topology):
        warnings.warn(warning, UserWarning, stacklevel=2)
    step = predict_calibrated(topology, training, model, None if calibration is None else Path(calibration),
                              force_calibration, measured_tokens_per_s_per_gpu,
                              pace_of(spec, topology.nodes, topology.gpus_per_node), nccl_setup(spec))
    run = predict_run(spec.run, topology, training, model, step) if spec.run is not None else None
    tokens = train_tokens if train_tokens is not None else (
        spec.run.train_tokens if spec.run is not None else DEFAULT_TRAIN_TOKENS)
    echo = {**scenario.to_dict(), "nccl_selection": step.nccl_selection}  # a calibration profile's, if it chose
    data = prediction_json(step, tokens, usd_per_gpu_hour, echo)
    return Prediction(**data, run=run.to_json(usd_per_gpu_hour) if run is not None else None, _step=step)


@dataclass(frozen=True)
class ScalingRow:
    """One node count of a scaling curve (a row of `clustersim scale --json`)."""

    nodes: int
    n_gpus: int
    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    mfu: float
    gpu_idle_fraction: float
    scaling_efficiency: float  # per-GPU throughput over the first row's


@dataclass(frozen=True)
class Scaling(Result):
    """A weak-scaling curve: `rows` (as `clustersim scale --json`) and each node count's full `predictions`."""

    FIGURE = "scaling_figure"

    rows: tuple[ScalingRow, ...]
    predictions: tuple[Prediction, ...] = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The `clustersim scale --json` object: {"rows": [...]}."""
        return {"rows": self.to_records()}

    def to_records(self) -> list[dict[str, Any]]:
        """One dict a node count, for `pandas.DataFrame(scaling.to_records())`."""
        return records(self.rows)


def scale(scenario: ScenarioLike | None = None, nodes: Iterable[int] = (1, 2, 4, 8), *, grad_accum: int | None = None,
          calibration: str | Path | None = None, force_calibration: bool = False) -> Scaling:
    """The same job (per-GPU micro-batch and accumulation) at each node count of `nodes`, as `clustersim
    scale`: scaling_efficiency(N) = per-GPU throughput at N / at the first count. `grad_accum`: micro-steps
    per optimizer step at every count (default: the scenario's at the first count)."""
    scenario = as_scenario(scenario)
    counts = list(nodes)
    if not counts or min(counts) < 1:
        raise ConfigError(f"nodes: node counts must be >= 1, got {counts}")
    jobs = [(count, *scenario.replace(nodes=count)._resolved) for count in counts]
    rows = weak_scaling(jobs, grad_accum, None if calibration is None else Path(calibration), force_calibration)
    base = rows[0][1]
    predictions = tuple(
        Prediction(**prediction_json(step, scenario=scenario_echo(spec, topo, training, model, step.nccl_selection)),
                   _step=step)
        for (_, spec, topo, training, model), step in rows)
    return Scaling(tuple(ScalingRow(**scale_row_json(count, step, base)) for (count, *_), step in rows), predictions)
