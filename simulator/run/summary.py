"""What a run prediction says: the time to train through failures, where the time went, what it costs.

- time_to_train_s (the median over runs), time_to_train_p10_s, time_to_train_p90_s: wall time.
- interruptions: mean failures per run; interruptions_per_day over the mean wall time.
- goodput_fraction: failure-free training time / wall time, averaged over runs.
- lost_s_by_cause (means): checkpoint (blocking saves), lost_work (training thrown away by failures),
  restart, spare_wait (waiting for a repaired node with no hot spare free).
- gpu_hours: mean wall time x the GPUs held (the job's and the hot spares'); cost at a price per
  GPU-hour; energy: the GPUs draw the step's mean power while training (kept or lost work) and
  IDLE_POWER_FRACTION of TDP while saving, restarting or waiting (spares idle throughout).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.run.montecarlo import RunSamples, simulate
from simulator.run.params import RunParams, run_params
from simulator.run.spec import RunSpec
from simulator.training.prediction import StepPrediction
from topologies.spec import TopologySpec
from workloads.spec import ModelSpec, TrainingSpec


@dataclass(frozen=True)
class RunPrediction:
    """A run's Monte Carlo outcome and the parameters that produced it."""

    params: RunParams
    samples: RunSamples
    failures: str  # the preset name, or 'explicit rates'
    runs: int
    seed: int

    def _mean(self, values: np.ndarray) -> float:
        return float(np.mean(values))

    def percentile_s(self, q: float) -> float:
        return float(np.percentile(self.samples.wall_s, q))

    @property
    def goodput_fraction(self) -> float:
        return self._mean(self.params.work_s / self.samples.wall_s)

    @property
    def interruptions_per_day(self) -> float:
        return self._mean(self.samples.interruptions) / (self._mean(self.samples.wall_s) / 86400.0)

    @property
    def lost_s_by_cause(self) -> dict[str, float]:
        s = self.samples
        return {"checkpoint": self._mean(s.checkpoint_s), "lost_work": self._mean(s.lost_work_s),
                "restart": self._mean(s.restart_s), "spare_wait": self._mean(s.spare_wait_s)}

    @property
    def gpus_held(self) -> int:
        return self.params.n_gpus + (self.params.hot_spares or 0) * self.params.gpus_per_node

    @property
    def gpu_hours(self) -> float:
        return self._mean(self.samples.wall_s) * self.gpus_held / 3600.0

    @property
    def energy_kwh(self) -> float:
        p, s = self.params, self.samples
        busy_s = p.work_s + s.lost_work_s
        joules = (p.n_gpus * (p.busy_power_w * busy_s + p.idle_power_w * (s.wall_s - busy_s))
                  + (self.gpus_held - p.n_gpus) * p.idle_power_w * s.wall_s)
        return self._mean(joules) / 3.6e6

    def to_json(self, usd_per_gpu_hour: float | None = None) -> dict[str, Any]:
        """The `run` object of `predict --json`."""
        p = self.params
        return {
            "time_to_train_s": self.percentile_s(50), "time_to_train_p10_s": self.percentile_s(10),
            "time_to_train_p90_s": self.percentile_s(90), "failure_free_s": p.work_s,
            "interruptions": self._mean(self.samples.interruptions),
            "interruptions_per_day": self.interruptions_per_day,
            "interruptions_by_class": {k: self._mean(v) for k, v in self.samples.by_class.items()},
            "goodput_fraction": self.goodput_fraction, "checkpoint_interval_s": p.interval_s,
            "checkpoint_save_s": p.save_block_s, "checkpoint_bytes": p.checkpoint_bytes, "restart_s": p.restart_s,
            "job_mtbf_s": p.job_mtbf_s if p.rate_per_s > 0 else None, "lost_s_by_cause": self.lost_s_by_cause,
            "gpu_hours": self.gpu_hours,
            "cost_usd": self.gpu_hours * usd_per_gpu_hour if usd_per_gpu_hour is not None else None,
            "energy_kwh": self.energy_kwh, "failures": self.failures, "runs": self.runs, "seed": self.seed,
        }


def predict_run(run: RunSpec, topology: TopologySpec, training: TrainingSpec, model: ModelSpec,
                step: StepPrediction, on_batch: Callable[[int], None] | None = None) -> RunPrediction:
    """Monte Carlo over `run.runs` seeds of the job at the predicted step (simulator.run.montecarlo)."""
    params = run_params(run, topology, training, model, step)
    samples = simulate(params, run.runs, run.seed, on_batch=on_batch)
    return RunPrediction(params, samples, run.failures if isinstance(run.failures, str) else "explicit rates",
                         run.runs, run.seed)
