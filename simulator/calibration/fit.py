"""Fitting the collective model's free parameters to measured nccl-tests rows.

A fit is meant to extrapolate (fit a cluster's small runs, predict its large ones), so it moves
only what the data identify, and only as far as they insist:
1. Sensitivity: each candidate parameter is raised 10% from its prior (the additive network
   latency by max(10%, 5 us)) and the rms change of log predicted time over the rows is its
   sensitivity (in %; a Jacobian column norm per row). Below MIN_SENSITIVITY_PCT the data do not
   identify it and it stays at its prior, marked not fitted. Network parameters need multi-node
   rows, NVLS efficiency NVLS-capable all_reduce rows. The network hop latencies (HOP_LATENCY_PARAMS)
   need multi-node logs of two node counts or more: at one node count every row crosses the same
   number of network hops, so a hop's latency and the base latency move the same rows the same way,
   and how the time splits between them, which is all a prediction at another node count takes from
   them, is not identified (fitted so on 2-node runs, the ABCI V100 latencies went to a bound and its
   4- and 8-node runs' small sizes from 5.8-8.1% to 19-23% off).
2. Loss: least squares on log(predicted / measured) time, with scipy's soft-L1 robust loss (f_scale
   0.1: errors beyond ~10% count linearly, so an outlier row cannot drag the fit), plus a penalty
   PRIOR_WEIGHT x rows x log(value / prior)^2 per parameter (the additive latency: its difference
   in 50 us units): a ridge towards the published prior that grows with the data, so that a
   handful of systematic misfits at small scale cannot trade physics for in-sample error.
3. Bounds keep every parameter physical (simulator.collectives.params.PARAMS); a fitted value
   within 0.1% of its range from a bound is reported as on it (in the profile and the calibrate table): the model,
   not the parameter, is then what is wrong for those rows.
A fit that would make the in-sample median error worse than the prior's is rejected and the prior
kept, so calibration never hurts in sample.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import least_squares

from simulator.calibration.profile import FittedParam, HardwareCalibration, LogResidual
from simulator.collectives.params import ADDITIVE_PARAMS, PARAMS, ModelParams, prior_params
from simulator.measurements.dataset import HardwareKey, MeasuredLog
from simulator.validation.accuracy import summarize
from simulator.validation.run import predict_log

# Whose choice of algorithm and protocol a fit prices the measured rows with, unless told otherwise: NCCL's tuner's
# (simulator.collectives.select). Each measured row is the time of the pair NCCL ran. Priced with the pair the model
# finds cheapest instead, a fit can move a parameter until some pair NCCL never ran matches a row, and the runs it
# did not see pay for it: fitted on ABCI's A100 runs of 1-4 nodes so, the network hop latency went to its lower
# bound and the 16-node run came out 66% off at >= 1 MiB, 6% with the fit on NCCL's choices (docs/collectives.md,
# "Calibrated on NCCL's choices").
FIT_SELECTION = "nccl"
# identified only by multi-node logs of two node counts or more (module docstring, 1)
HOP_LATENCY_PARAMS = ("net_latency_scale", "net_extra_latency_us")
PRIOR_WEIGHT = 0.002
MIN_SENSITIVITY_PCT = 0.5
SENSITIVITY_STEP = 0.10
LOSS = "soft_l1 on log(pred/meas) time, f_scale=0.1, ridge 0.002 x rows on log(value/prior)"


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
    """The parameters these logs can constrain at all (before the sensitivity screen)."""
    multi = any(log.view.multi_node for log in logs)
    nvls = any(log.view.nvls and log.entry.collective == "all_reduce" for log in logs)
    node_counts = {log.entry.nodes for log in logs if log.view.multi_node}
    return [name for name, info in PARAMS.items()
            if (multi or not info.network) and (nvls or name != "nvls_efficiency")
            and (len(node_counts) > 1 or name not in HOP_LATENCY_PARAMS)]


def _pull(name: str, value: float, prior: float) -> float:
    if name in ADDITIVE_PARAMS:
        return (value - prior) / 50.0
    return math.log(value / prior)


def _step(name: str, prior: float) -> float:
    """The +10% probe of a parameter (the additive latency: at least 5 us), kept within its bound."""
    info = PARAMS[name]
    raised = prior + max(SENSITIVITY_STEP * prior, 5.0) if name in ADDITIVE_PARAMS else prior * (
        1.0 + SENSITIVITY_STEP)
    return raised if raised <= info.upper else prior * (1.0 - SENSITIVITY_STEP)


def with_selection(logs: Sequence[MeasuredLog], selection: str) -> list[MeasuredLog]:
    """The logs, each priced with `selection` (MeasuredLog.selection)."""
    return [replace(log, selection=selection) for log in logs]


def fitted_selection(logs: Sequence[MeasuredLog]) -> str:
    """The selection a fit prices its rows with: the logs' own (MeasuredLog.selection), which must be one."""
    chosen = {log.selection for log in logs}
    if len(chosen) != 1:
        raise ValueError(f"one fit prices its logs with one selection, not {sorted(chosen)}")
    return chosen.pop()


def _log_times(logs: Sequence[MeasuredLog], params: ModelParams) -> np.ndarray:
    return np.log([r.predicted_time_us for log in logs for r in predict_log(log, params).rows])


def sensitivities(logs: Sequence[MeasuredLog], prior: ModelParams, names: Sequence[str],
                  on_evaluation: Callable[[], None] | None = None) -> dict[str, float]:
    """rms change of log predicted time (%) over the rows when each parameter moves 10% off its prior."""
    base = _log_times(logs, prior)
    out = {}
    for name in names:
        if on_evaluation is not None:
            on_evaluation()
        moved = _log_times(logs, prior.updated({name: _step(name, getattr(prior, name))}))
        out[name] = 100.0 * float(np.sqrt(np.mean((moved - base) ** 2)))
    return out


def _at_bound(name: str, value: float, prior: float) -> str | None:
    """'lower' or 'upper' when a fitted value moved off its prior onto a bound (within 0.1% of the range)."""
    info = PARAMS[name]
    near = 1e-3 * (info.upper - info.lower)
    if value == prior:
        return None
    if value <= info.lower + near:
        return "lower"
    return "upper" if value >= info.upper - near else None


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
    candidates = free_parameters(logs)
    sensitivity = sensitivities(logs, prior, candidates, on_evaluation)
    names = [n for n in candidates if sensitivity[n] >= MIN_SENSITIVITY_PCT]
    values = prior.as_dict()
    if names:
        values = _least_squares(logs, prior, names, options, on_evaluation).as_dict()
    params = tuple(
        FittedParam(name, values[name], getattr(prior, name), PARAMS[name].lower, PARAMS[name].upper,
                    fitted=name in names, sensitivity_pct=sensitivity.get(name),
                    at_bound=_at_bound(name, values[name], getattr(prior, name)))
        for name in PARAMS
    )
    fitted = prior.updated({p.name: p.value for p in params})
    residual_rows = tuple(
        LogResidual(log.file, len(log.rows), _median_error([log], prior), _median_error([log], fitted),
                    log.nccl_version)
        for log in logs
    )
    return HardwareCalibration(hardware, params, residual_rows, LOSS, fitted_selection(logs))


def _least_squares(logs: Sequence[MeasuredLog], prior: ModelParams, names: Sequence[str], options: FitOptions,
                   on_evaluation: Callable[[], None] | None) -> ModelParams:
    """The regularised robust fit of `names` (module docstring); the prior if it would do worse in sample."""
    start = np.array([getattr(prior, n) for n in names])
    lower = np.array([PARAMS[n].lower for n in names])
    upper = np.array([PARAMS[n].upper for n in names])
    measured = np.array([row.time_us for log in logs for row in log.rows])
    ridge = math.sqrt(PRIOR_WEIGHT * len(measured))

    def params_at(x: np.ndarray) -> ModelParams:
        return prior.updated({n: float(v) for n, v in zip(names, x, strict=True)})

    def residuals(x: np.ndarray) -> np.ndarray:
        if on_evaluation is not None:
            on_evaluation()
        p = params_at(x)
        predicted = np.array([r.predicted_time_us for log in logs for r in predict_log(log, p).rows])
        pulls = [ridge * _pull(n, float(v), getattr(prior, n)) for n, v in zip(names, x, strict=True)]
        return np.concatenate([np.log(predicted / measured), pulls])

    result = least_squares(residuals, np.clip(start, lower, upper), bounds=(lower, upper), loss="soft_l1",
                           f_scale=0.1, max_nfev=options.max_nfev, diff_step=1e-3, x_scale="jac")
    fitted = params_at(result.x)
    return prior if _median_error(logs, fitted) > _median_error(logs, prior) else fitted
