"""Fitting the collective model's free parameters to measured nccl-tests rows.

Loss: least squares on log(predicted / measured) time, with scipy's soft-L1 robust loss (f_scale
0.1, i.e. errors beyond ~10% count linearly, so the odd out-of-place outlier row cannot drag the
fit), plus a weak pull of each parameter towards its prior (weight PRIOR_WEIGHT on log-ratio, or
on the difference in 50 us units for the additive latency). Bounds keep every parameter physical
(efficiencies in (0, 1], latencies > 0; simulator.collectives.params.PARAMS). Network parameters
are fitted only when multi-node rows exist. A fit that would make the in-sample median error
worse than the prior's is rejected and the prior kept, so calibration never hurts in sample.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from simulator.calibration.profile import FittedParam, HardwareCalibration, LogResidual
from simulator.collectives.params import PARAMS, ModelParams, prior_params
from simulator.measurements.dataset import HardwareKey, MeasuredLog
from simulator.validation.accuracy import summarize
from simulator.validation.run import predict_log

PRIOR_WEIGHT = 0.05
LOSS = "soft_l1 on log(pred/meas) time, f_scale=0.1, weak prior pull 0.05"


@dataclass(frozen=True)
class FitOptions:
    max_nfev: int = 40


def group_by_hardware(logs: Sequence[MeasuredLog]) -> dict[HardwareKey, list[MeasuredLog]]:
    """One group per (GPU, intra-node fabric, transport) of the multi-node logs; single-node logs
    of the same GPU and fabric join each such group (they pin the intra-node parameters), or form
    their own group when there is no multi-node log of that hardware."""
    groups: dict[HardwareKey, list[MeasuredLog]] = {}
    for log in logs:
        if log.hardware.transport is not None:
            groups.setdefault(log.hardware, []).append(log)
    for log in logs:
        if log.hardware.transport is None:
            homes = [key for key in groups if (key.gpu, key.intra_node) == (log.entry.gpu, log.entry.intra_node)]
            for key in homes or [log.hardware]:
                groups.setdefault(key, []).append(log)
    return dict(sorted(groups.items()))


def free_parameters(logs: Sequence[MeasuredLog]) -> list[str]:
    """The parameters these logs can constrain."""
    multi = any(log.view.multi_node for log in logs)
    nvls = any(log.view.nvls and log.entry.collective == "all_reduce" for log in logs)
    return [name for name, info in PARAMS.items()
            if (multi or not info.network) and (nvls or name != "nvls_efficiency")]


def _pull(name: str, value: float, prior: float) -> float:
    if name == "net_extra_latency_us":
        return (value - prior) / 50.0
    return math.log(value / prior)


def _median_error(logs: Sequence[MeasuredLog], params: ModelParams) -> float:
    errors = [r.abs_pct_error for log in logs for r in predict_log(log, params).rows]
    median = summarize(errors).median_abs_pct_error
    return median if median is not None else 0.0


def fit_hardware(hardware: HardwareKey, logs: Sequence[MeasuredLog], options: FitOptions | None = None,
                 on_evaluation: Callable[[], None] | None = None) -> HardwareCalibration:
    """Fit one hardware's parameters to its logs (see module docstring)."""
    options = options or FitOptions()
    prior = prior_params(logs[0].view)
    for log in logs:  # the networked logs set the transport prior
        if log.view.transport is not None:
            prior = prior_params(log.view)
            break
    names = free_parameters(logs)
    start = np.array([getattr(prior, n) for n in names])
    lower = np.array([PARAMS[n].lower for n in names])
    upper = np.array([PARAMS[n].upper for n in names])
    measured = np.array([row.time_us for log in logs for row in log.rows])

    def params_at(x: np.ndarray) -> ModelParams:
        return prior.updated({n: float(v) for n, v in zip(names, x, strict=True)})

    def residuals(x: np.ndarray) -> np.ndarray:
        if on_evaluation is not None:
            on_evaluation()
        p = params_at(x)
        predicted = np.array([r.predicted_time_us for log in logs for r in predict_log(log, p).rows])
        pulls = [math.sqrt(PRIOR_WEIGHT) * _pull(n, float(v), getattr(prior, n)) for n, v in zip(names, x, strict=True)]
        return np.concatenate([np.log(predicted / measured), pulls])

    result = least_squares(residuals, np.clip(start, lower, upper), bounds=(lower, upper), loss="soft_l1",
                           f_scale=0.1, max_nfev=options.max_nfev, diff_step=1e-3, x_scale="jac")
    fitted = params_at(result.x)
    if _median_error(logs, fitted) > _median_error(logs, prior):
        fitted = prior  # never worse than the prior in sample
    values = fitted.as_dict()
    params = tuple(
        FittedParam(name, values[name], getattr(prior, name), PARAMS[name].lower, PARAMS[name].upper,
                    fitted=name in names)
        for name in PARAMS
    )
    residual_rows = tuple(
        LogResidual(log.file, len(log.rows), _median_error([log], prior), _median_error([log], fitted))
        for log in logs
    )
    return HardwareCalibration(hardware, params, residual_rows, LOSS)
