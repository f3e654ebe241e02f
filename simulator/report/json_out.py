"""The JSON objects of `clustersim predict --json`, `scale --json` and `plan --json`: the metric names of
DESIGN.md section 9. The CLI prints them; the Python API's results hold the same fields."""

from __future__ import annotations

from typing import Any

from simulator.training.prediction import StepPrediction
from simulator.training.search import RankedLayout


def prediction_json(p: StepPrediction, train_tokens: float = 1e12, usd_per_gpu_hour: float | None = None,
                    scenario: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `predict --json` object: the metric names of DESIGN.md section 9 and their parts, the
    planning figures for `train_tokens` tokens and, under `scenario`, the scenario as predicted
    (scenario_echo: every field, defaults filled in)."""
    return {
        "train_tokens": train_tokens, "time_to_train_s": p.time_to_train_s(train_tokens),
        "gpu_hours": p.gpu_hours(train_tokens),
        "cost_usd": p.gpu_hours(train_tokens) * usd_per_gpu_hour if usd_per_gpu_hour is not None else None,
        "average_power_w_per_gpu": p.average_power_w, "energy_kwh": p.energy_kwh(train_tokens),
        "step_time_s": p.step_time_s, "compute_s": p.compute_s, "gpu_idle_s": p.gpu_idle_s,
        "gpu_idle_fraction": p.gpu_idle_fraction, "gpu_idle_by_class": p.gpu_idle_by_class,
        "exposed_comm_s": p.exposed_comm_s,
        "exposed_comm_by_collective_s": p.comm_by_collective_s, "idle_breakdown_s": p.idle_breakdown_s,
        "tokens_per_s": p.tokens_per_s, "tokens_per_s_per_gpu": p.tokens_per_s_per_gpu,
        "tflops_per_gpu": p.tflops_per_gpu, "mfu": p.mfu, "n_gpus": p.n_gpus,
        "tokens_per_step": p.tokens_per_step, "memory_per_gpu_bytes": p.memory_per_gpu_bytes,
        "memory_capacity_bytes": p.memory_capacity_bytes, "fits_in_memory": p.fits_in_memory,
        "memory_breakdown_bytes": {
            "parameters": p.memory.parameters_bytes, "gradients": p.memory.gradients_bytes,
            "optimizer": p.memory.optimizer_bytes, "activations": p.memory.activations_bytes,
            "buffers": p.memory.buffers_bytes, "reserve": p.memory.reserve_bytes},
        "model": p.model, "calibration": p.calibration,
        **({"scenario": scenario} if scenario is not None else {}),
    }


def scale_row_json(nodes: int, p: StepPrediction, base: StepPrediction) -> dict[str, Any]:
    """One row of `scale --json`: scaling_efficiency is per-GPU throughput over `base`'s (the first count's)."""
    return {"nodes": nodes, "n_gpus": p.n_gpus, "step_time_s": p.step_time_s, "tokens_per_s": p.tokens_per_s,
            "tokens_per_s_per_gpu": p.tokens_per_s_per_gpu, "mfu": p.mfu, "gpu_idle_fraction": p.gpu_idle_fraction,
            "scaling_efficiency": p.tokens_per_s_per_gpu / base.tokens_per_s_per_gpu}


def layout_json(rank: int, r: RankedLayout) -> dict[str, Any]:
    """One ranked layout of `plan --json`."""
    lay, p = r.layout, r.prediction
    return {"rank": rank, "tp": lay.tp, "pp": lay.pp, "cp": lay.cp, "dp": lay.dp, "ep": lay.ep,
            "micro_batch": lay.micro_batch,
            "micro_steps": lay.micro_steps, "strategy": lay.strategy, "recompute": lay.recompute,
            "sequence_parallel": lay.sequence_parallel, "pipeline_schedule": lay.schedule,
            "virtual_stages": lay.virtual_stages, "pipeline_split": lay.pipeline_split,
            "step_time_s": p.step_time_s, "tokens_per_s": p.tokens_per_s,
            "tokens_per_s_per_gpu": p.tokens_per_s_per_gpu, "tflops_per_gpu": p.tflops_per_gpu, "mfu": p.mfu,
            "memory_per_gpu_bytes": p.memory_per_gpu_bytes, "fits_in_memory": p.fits_in_memory,
            "estimated_step_time_s": r.estimated_step_s}
