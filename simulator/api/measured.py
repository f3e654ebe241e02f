"""Predictions against measured nccl-tests logs: `validate` (the error on time of every row, as `clustersim
validate`), `calibrate` (fit the collective model per hardware, as `clustersim calibrate`) and `crossval`
(fit on some logs, report the error on the others, as `clustersim crossval`)."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from simulator.api.results import Result, records
from simulator.calibration.apply import load_profile, predict_measured
from simulator.calibration.crossval import GROUP_BY, CrossvalReport, crossval_to_json, splits
from simulator.calibration.crossval import crossval as run_crossval
from simulator.calibration.fit import FIT_SELECTION, FitOptions, fit_hardware, group_by_hardware, with_selection
from simulator.calibration.profile import CalibrationProfile, profile_to_dict
from simulator.collectives.busbw import busbw_factor
from simulator.collectives.select import selection_option
from simulator.core.errors import ConfigError
from simulator.measurements.dataset import MeasuredLog
from simulator.measurements.load import LoadedLogs, SkippedEntry, read_log, read_measured
from simulator.scenario_overrides import topology_of
from simulator.sweep.run import clustersim_version
from simulator.validation.accuracy import LogReport, ValidationReport, report_to_json
from topologies.spec import TopologySpec


def _loaded(manifest: str | Path, only: Iterable[str] | None, strict: bool) -> LoadedLogs:
    """The manifest's logs and skipped entries; its warnings (a skipped entry's reason too) are Python warnings."""
    return read_measured(Path(manifest), list(only) if only is not None else None,
                         lambda message: warnings.warn(message, UserWarning, stacklevel=4), strict)


def _measured(manifest: str | Path, only: Iterable[str] | None, strict: bool) -> list[MeasuredLog]:
    return list(_loaded(manifest, only, strict).logs)


@dataclass(frozen=True)
class ValidationRow:
    """One measured row against its prediction: error_pct = (predicted - measured) / measured x 100 on time;
    bus bandwidths (GB/s) by the nccl-tests factor of the collective over `ranks`."""

    file: str
    collective: str
    ranks: int
    size_bytes: int
    measured_time_us: float
    predicted_time_us: float
    error_pct: float
    measured_busbw_GBps: float
    predicted_busbw_GBps: float
    algo: str
    proto: str


def _rows(log: MeasuredLog, report: LogReport) -> list[ValidationRow]:
    factor = busbw_factor(report.collective, log.view.n_ranks)
    return [ValidationRow(report.file, report.collective, log.view.n_ranks, r.size_bytes, r.measured_time_us,
                          r.predicted_time_us, 100.0 * (r.predicted_time_us - r.measured_time_us) / r.measured_time_us,
                          r.size_bytes / r.measured_time_us * 1e-3 * factor,
                          r.size_bytes / r.predicted_time_us * 1e-3 * factor, r.algo, r.proto)
            for r in report.rows]


@dataclass(frozen=True)
class Validation(Result):
    """The error on time of every row of every log (`rows`), summarised as `clustersim validate --json`:
    median and p90 |error| in percent, overall and for sizes >= 1 MiB and < 1 MiB, per log and in all."""

    FIGURE = "validation_figure"

    rows: tuple[ValidationRow, ...]
    skipped: tuple[SkippedEntry, ...]  # manifest entries not used, with why
    _report: ValidationReport = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The `clustersim validate --json` object."""
        return report_to_json(self._report)

    def to_records(self) -> list[dict[str, Any]]:
        """One dict a measured row."""
        return records(self.rows)

    @property
    def median_abs_pct_error_ge_1MiB(self) -> float | None:
        return self._report.large.median_abs_pct_error

    @property
    def median_abs_pct_error_lt_1MiB(self) -> float | None:
        return self._report.small.median_abs_pct_error


@dataclass(frozen=True)
class FittedParameter:
    """A parameter of one hardware's fit: its fitted `value` (the prior where the data did not identify it:
    `fitted` False), its prior, bounds, sensitivity (rms % change of predicted time for a 10% change) and the
    bound it ran into, if any."""

    hardware: str
    name: str
    value: float
    prior: float
    lower: float
    upper: float
    fitted: bool
    sensitivity_pct: float | None
    at_bound: str | None


@dataclass(frozen=True)
class Calibration(Result):
    """A calibration profile: the collective model's parameters fitted per hardware (GPU, intra-node fabric,
    network transport). `to_yaml()` is the profile file `--calibration` and `validate` take."""

    FIGURE = "calibration_figure"

    parameters: tuple[FittedParameter, ...]
    _profile: CalibrationProfile = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The profile as data (what its YAML file holds)."""
        return profile_to_dict(self._profile)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def to_records(self) -> list[dict[str, Any]]:
        """One dict a (hardware, parameter)."""
        return records(self.parameters)


def _one_log(log: str | Path, topology: str | Mapping[str, Any] | TopologySpec | None, nodes: int | None,
             op: str | None, env: Mapping[str, str] | None, run: int | None) -> LoadedLogs:
    if topology is None:
        raise ConfigError("validate log: give the cluster it ran on (topology: a preset name, topology YAML, "
                          "TopologySpec or its fields)")
    return read_log(Path(log), topology_of(topology, nodes),
                    lambda message: warnings.warn(message, UserWarning, stacklevel=4), op, env, run)


def validate(manifest: str | Path | None = None, calibration: Calibration | str | Path | None = None, *,
             force_calibration: bool = False, only: Iterable[str] | None = None, strict: bool = False,
             log: str | Path | None = None, topology: str | Mapping[str, Any] | TopologySpec | None = None,
             nodes: int | None = None, op: str | None = None, env: Mapping[str, str] | None = None,
             run: int | None = None) -> Validation:
    """Predict every row of every log the manifest lists (or those in `only`) and its error on time, with the
    published-facts prior or `calibration` (a Calibration, or a profile YAML path); as `clustersim validate`.
    An entry that cannot be used is skipped with a warning and listed in `skipped` (`strict`: an error).
    Or one `log` without a manifest, on the cluster `topology` (a preset name, topology YAML, TopologySpec or its
    fields) with `nodes`; `op` the collective where the log does not name it, `env` the NCCL environment it ran
    with, `run` which run of a file holding several; as `clustersim validate --log`."""
    profile = calibration._profile if isinstance(calibration, Calibration) else load_profile(
        None if calibration is None else Path(calibration))
    if log is not None:
        if manifest is not None:
            raise ConfigError("validate: give a manifest or one log, not both")
        loaded = _one_log(log, topology, nodes, op, env, run)
    elif manifest is not None:
        if any(value is not None for value in (topology, nodes, op, env, run)):
            raise ConfigError("validate: topology, nodes, op, env and run describe one log; a manifest's entries "
                              "state their own")
        loaded = _loaded(manifest, only, strict)
    else:
        raise ConfigError("validate: give a manifest (logs listed with their clusters) or a log and its topology")
    logs = loaded.logs
    reports = [predict_measured(m, profile, force_calibration) for m in logs]
    rows = tuple(row for m, report in zip(logs, reports, strict=True) for row in _rows(m, report))
    return Validation(rows, loaded.skipped, ValidationReport(tuple(reports), loaded.skipped))


def calibrate(manifest: str | Path, *, only: Iterable[str] | None = None, max_nfev: int = 40,
              strict: bool = False, selection: str = FIT_SELECTION) -> Calibration:
    """Fit the collective model's parameters to the manifest's logs (or those in `only`), one fit per hardware,
    as `clustersim calibrate` (robust least squares on log time with a ridge towards the prior; only
    parameters the data identify are fitted). `max_nfev`: model evaluations per fit, at most (x parameters);
    `selection`: whose choice of algorithm and protocol prices each row, 'nccl' (the log's release's tuner's: what
    ran) or 'model' (the cost model's fastest), recorded in the profile for the predictions made with it."""
    if max_nfev < 1:
        raise ConfigError(f"calibrate max_nfev must be >= 1, got {max_nfev}")
    options = FitOptions(max_nfev=max_nfev)
    chosen = selection_option(selection, "calibrate selection")
    logs = with_selection(_measured(manifest, only, strict), chosen)
    sections = tuple(fit_hardware(hardware, group, options) for hardware, group in group_by_hardware(logs).items())
    profile = CalibrationProfile(clustersim_version(), datetime.now(UTC).isoformat(timespec="seconds"), sections)
    parameters = tuple(FittedParameter(s.hardware.label(), p.name, p.value, p.prior, p.lower, p.upper, p.fitted,
                                       p.sensitivity_pct, p.at_bound) for s in sections for p in s.params)
    return Calibration(parameters, profile)


@dataclass(frozen=True)
class HeldOutLog:
    """A log (or half of one) the fit did not see: median |error| on time (%) before (prior) and after
    calibration, for sizes >= 1 MiB and < 1 MiB."""

    file: str
    cluster: str
    split: str
    prior_ge_1MiB: float | None
    calibrated_ge_1MiB: float | None
    prior_lt_1MiB: float | None
    calibrated_lt_1MiB: float | None


@dataclass(frozen=True)
class CrossValidation(Result):
    """Held-out error, prior against calibrated, as `clustersim crossval --json`."""

    FIGURE = "crossval_figure"

    held_out: tuple[HeldOutLog, ...]
    _report: CrossvalReport = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return crossval_to_json(self._report)

    def to_records(self) -> list[dict[str, Any]]:
        """One dict a held-out log."""
        return records(self.held_out)


def crossval(manifest: str | Path, group_by: str = "cluster", *, train_max_nodes: int = 2,
             only: Iterable[str] | None = None, max_nfev: int = 40, strict: bool = False,
             selection: str = FIT_SELECTION) -> CrossValidation:
    """Fit on some logs of each cluster and predict the others, as `clustersim crossval`: `group_by` cluster
    (leave one log out), nodes (fit on runs of at most `train_max_nodes` nodes, predict the larger) or size
    (fit on every other size, predict the rest); prior and fits price the rows with `selection` (as calibrate)."""
    if group_by not in GROUP_BY:
        raise ConfigError(f"crossval group_by: {group_by!r} is not one of {', '.join(GROUP_BY)}")
    if max_nfev < 1:
        raise ConfigError(f"crossval max_nfev must be >= 1, got {max_nfev}")
    chosen = selection_option(selection, "crossval selection")
    logs = with_selection(_measured(manifest, only, strict), chosen)
    if not splits(logs, group_by, train_max_nodes):
        raise ConfigError(f"crossval group_by {group_by}: no cluster has logs to fit on and logs to predict")
    report = run_crossval(logs, group_by, train_max_nodes, FitOptions(max_nfev=max_nfev))
    held = tuple(HeldOutLog(h.prior.file, h.cluster, h.split, h.prior.large.median_abs_pct_error,
                            h.calibrated.large.median_abs_pct_error, h.prior.small.median_abs_pct_error,
                            h.calibrated.small.median_abs_pct_error) for h in report.held_out)
    return CrossValidation(held, report)
