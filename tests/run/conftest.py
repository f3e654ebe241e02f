"""Shared builders for the run-model tests: synthetic run parameters and a fixed step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from simulator.run.params import RunParams
from simulator.training.prediction import MemoryBreakdown, StepPrediction

DAY = 86400.0


def _synthetic(**changes: object) -> RunParams:
    """2,048 nodes of node_mtbf_h 50,000; 60 days of training; a save every 3,600 s costing 60 s; restart 600 s."""
    base = RunParams(work_s=60 * DAY, step_s=10.0, interval_s=3600.0, save_block_s=60.0, persist_s=0.0,
                     restart_s=600.0, rates_per_s={"node": 2048 / (50_000 * 3600.0)}, hot_spares=None,
                     repair_s=24 * 3600.0, n_gpus=16384, gpus_per_node=8, busy_power_w=600.0, idle_power_w=210.0,
                     checkpoint_bytes=5.67e12, save_s=60.0)
    return replace(base, **changes)  # type: ignore[arg-type]


def _fixed_step(step_time_s: float, tokens_per_step: int, n_gpus: int) -> StepPrediction:
    """A step of a given time (where the bar is about the run model, not the step)."""
    zero = MemoryBreakdown(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    return StepPrediction(step_time_s=step_time_s, compute_s=step_time_s, exposed_comm_s=0.0, idle_breakdown_s={},
                          tokens_per_step=tokens_per_step, n_gpus=n_gpus, model_flops_per_step=1.0, peak_tflops=989.0,
                          memory=zero, memory_capacity_bytes=80e9, gpu_tdp_w=700.0)


@pytest.fixture(scope="session")
def synthetic() -> Callable[..., RunParams]:
    """The synthetic job's parameters, with changes."""
    return _synthetic


@pytest.fixture(scope="session")
def fixed_step() -> Callable[[float, int, int], StepPrediction]:
    return _fixed_step
