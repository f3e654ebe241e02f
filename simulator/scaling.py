"""Weak scaling: the same job (per-GPU micro-batch and accumulation) predicted at several node counts, as
`clustersim scale` and the Python API's `scale` run it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from simulator.calibration.apply import predict_calibrated
from simulator.core.errors import config_error_from
from simulator.scenario import ScenarioSpec, nccl_setup, pace_of
from simulator.training.predict import micro_steps_of
from simulator.training.prediction import StepPrediction
from topologies.spec import TopologySpec
from workloads.spec import ModelSpec, TrainingSpec

ScaledJob = tuple[int, ScenarioSpec, TopologySpec, TrainingSpec, ModelSpec]  # node count, the job resolved there


def weak_scaling(jobs: Iterable[ScaledJob], grad_accum: int | None = None, calibration: Path | None = None,
                 force: bool = False) -> list[tuple[ScaledJob, StepPrediction]]:
    """Each job's step, every one with `grad_accum` micro-steps per optimizer step (None: those of the first
    job, its global batch over its data-parallel ranks), so the per-GPU work stays the same: weak scaling.
    Each count's stragglers and jitter pace its own GPUs (pace_of). Returns each job as predicted (its
    accumulation set) with its step."""
    rows = []
    for count, spec, topo, training, model in jobs:
        if grad_accum is None:  # the first count fixes the accumulation; the others keep it (weak scaling)
            par = training.parallel
            grad_accum = micro_steps_of(training, topo.nodes * topo.gpus_per_node // (par.tp * par.pp * par.cp))
        try:
            training = TrainingSpec.model_validate({**training.model_dump(), "global_batch": None,
                                                    "grad_accum": grad_accum, "model": model.name})
        except ValidationError as exc:
            raise config_error_from(exc, "command line: training") from None
        pace = pace_of(spec, topo.nodes, topo.gpus_per_node)  # stragglers, and jitter over N GPUs
        step = predict_calibrated(topo, training, model, calibration, force, None, pace, nccl_setup(spec))
        rows.append(((count, spec, topo, training, model), step))
    return rows
