"""Calibration profiles: fitted model parameters per hardware, with their priors and provenance.

A profile holds one section per hardware (GPU, intra-node fabric, network transport). A section
fitted on a cluster applies to a topology of the same hardware at any node count; a section fitted
on single-node runs only (no transport) carries intra-node parameters and applies to any network.
Applying a profile to other hardware is an error unless forced. Profiles are plain YAML-able
dicts here; only the CLI reads and writes files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from simulator.calibration.compute_profile import (
    ComputeCalibration,
    compute_calibration_from_dict,
    compute_calibration_to_dict,
)
from simulator.collectives.nccl_releases import parse_release
from simulator.collectives.params import PARAMS, ModelParams
from simulator.collectives.select import SELECTIONS
from simulator.core.errors import CalibrationError
from simulator.measurements.dataset import HardwareKey

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class FittedParam:
    name: str
    value: float
    prior: float
    lower: float
    upper: float
    fitted: bool  # False: the data did not constrain it (kept at the prior)
    sensitivity_pct: float | None = None  # rms change of log time (%) for a 10% change; None: not probed
    at_bound: str | None = None  # "lower" or "upper" when the fit ran into a bound


@dataclass(frozen=True)
class LogResidual:
    """In-sample error of one source log, before and after the fit (median |error| on time, %)."""

    file: str
    rows: int
    median_abs_pct_error_prior: float
    median_abs_pct_error_fitted: float
    nccl: str | None = None  # the NCCL release the log ran, as its manifest entry or the log states it


@dataclass(frozen=True)
class HardwareCalibration:
    hardware: HardwareKey
    params: tuple[FittedParam, ...]
    residuals: tuple[LogResidual, ...]
    loss: str
    # whose choice of algorithm and protocol the fit priced each measured row with (simulator.collectives.select);
    # predictions with the section take the same unless told otherwise. Profiles written before the field were
    # fitted with the model's own choice.
    selection: str = "model"

    def apply(self, prior: ModelParams) -> ModelParams:
        """The prior with this section's fitted values in place."""
        return prior.updated({p.name: p.value for p in self.params if p.fitted})

    @property
    def nccl_release(self) -> tuple[int, int] | None:
        """The newest NCCL release (major, minor) of the logs it was fitted on; None where none states one."""
        return max((r for r in (parse_release(log.nccl) for log in self.residuals) if r is not None), default=None)


@dataclass(frozen=True)
class CalibrationProfile:
    clustersim_version: str
    created: str
    sections: tuple[HardwareCalibration, ...]
    compute: ComputeCalibration | None = None

    def section_for(self, hardware: HardwareKey, force: bool = False) -> HardwareCalibration:
        """The section that applies to `hardware` (see module docstring); CalibrationError if none."""
        same = [s for s in self.sections
                if (s.hardware.gpu, s.hardware.intra_node) == (hardware.gpu, hardware.intra_node)]
        exact = [s for s in same if s.hardware.transport == hardware.transport]
        intra_only = [s for s in same if s.hardware.transport is None]
        if hardware.transport is None and same:
            return (exact or same)[0]
        if exact or intra_only:
            return (exact or intra_only)[0]
        if not self.sections:
            raise CalibrationError("the calibration profile holds no collective fit (only a compute section): "
                                   "fit one on this hardware's nccl-tests logs (clustersim calibrate)")
        if force:
            return (same or list(self.sections))[0]
        fitted = "; ".join(s.hardware.label() for s in self.sections)
        raise CalibrationError(
            f"the calibration profile was fitted on {fitted}, not on {hardware.label()}; "
            "fit one on this hardware (clustersim calibrate) or force it (--force-calibration)"
        )


def _param_to_dict(p: FittedParam) -> dict[str, Any]:
    return {"value": p.value, "prior": p.prior, "bounds": [p.lower, p.upper], "fitted": p.fitted,
            "sensitivity_pct": p.sensitivity_pct, "at_bound": p.at_bound,
            "description": PARAMS[p.name].description}


def profile_to_dict(profile: CalibrationProfile) -> dict[str, Any]:
    """The YAML layout of a profile (schema_version 1)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "clustersim_version": profile.clustersim_version,
        "created": profile.created,
        "sections": [
            {
                "hardware": {"gpu": s.hardware.gpu, "intra_node": s.hardware.intra_node,
                             "transport": s.hardware.transport},
                "loss": s.loss,
                "selection": s.selection,
                "parameters": {p.name: _param_to_dict(p) for p in s.params},
                "sources": [
                    {"file": r.file, "rows": r.rows, "nccl": r.nccl,
                     "median_abs_pct_error_prior": r.median_abs_pct_error_prior,
                     "median_abs_pct_error_fitted": r.median_abs_pct_error_fitted}
                    for r in s.residuals
                ],
            }
            for s in profile.sections
        ],
        "compute": compute_calibration_to_dict(profile.compute) if profile.compute else None,
    }


def _get(data: Mapping[str, Any], key: str, where: str, source: str) -> Any:
    if not isinstance(data, Mapping) or key not in data:
        raise CalibrationError(f"{source}: {where}: missing field {key!r}")
    return data[key]


def _section_from_dict(data: Any, where: str, source: str) -> HardwareCalibration:
    """One hardware section; CalibrationError naming it for a missing field or a value of the wrong type."""
    try:
        return _section(data, where, source)
    except (TypeError, ValueError, AttributeError) as exc:
        raise CalibrationError(f"{source}: {where}: a value of the wrong type ({exc})") from None


def _section(data: Any, where: str, source: str) -> HardwareCalibration:
    hw = _get(data, "hardware", where, source)
    hardware = HardwareKey(str(_get(hw, "gpu", f"{where}.hardware", source)),
                           str(_get(hw, "intra_node", f"{where}.hardware", source)),
                           hw.get("transport"))
    params = []
    for name, p in dict(_get(data, "parameters", where, source)).items():
        if name not in PARAMS:
            raise CalibrationError(f"{source}: {where}.parameters: unknown parameter {name!r}")
        at = f"{where}.parameters.{name}"
        lower, upper = (float(x) for x in _get(p, "bounds", at, source))
        value = float(_get(p, "value", at, source))
        if not lower <= value <= upper:
            raise CalibrationError(f"{source}: {at}: value {value} outside its bounds [{lower}, {upper}]")
        sensitivity, at_bound = p.get("sensitivity_pct"), p.get("at_bound")
        if at_bound not in (None, "lower", "upper"):
            raise CalibrationError(f"{source}: {at}.at_bound: {at_bound!r}; expected lower, upper or null")
        params.append(FittedParam(name, value, float(_get(p, "prior", at, source)), lower, upper,
                                  bool(p.get("fitted", True)),
                                  None if sensitivity is None else float(sensitivity), at_bound))
    residuals = tuple(
        LogResidual(str(_get(r, "file", f"{where}.sources", source)), int(r.get("rows", 0)),
                    float(r.get("median_abs_pct_error_prior", 0.0)), float(r.get("median_abs_pct_error_fitted", 0.0)),
                    None if r.get("nccl") is None else str(r["nccl"]))
        for r in data.get("sources", [])
    )
    selection = data.get("selection", "model")
    if selection not in SELECTIONS:
        raise CalibrationError(f"{source}: {where}.selection: {selection!r}; expected {' or '.join(SELECTIONS)}")
    return HardwareCalibration(hardware, tuple(params), residuals, str(data.get("loss", "")), selection)


def profile_from_dict(data: Any, source: str) -> CalibrationProfile:
    """Read a profile's YAML data; CalibrationError names the field (and a schema mismatch)."""
    if not isinstance(data, Mapping):
        raise CalibrationError(f"{source}: not a calibration profile (expected a mapping at the top)")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise CalibrationError(
            f"{source}: calibration profile schema_version {version!r}; this clustersim reads version "
            f"{SCHEMA_VERSION} (re-run clustersim calibrate to write a current profile)"
        )
    sections: Sequence[Any] = data.get("sections") or []
    compute = data.get("compute")
    if not sections and not compute:
        raise CalibrationError(f"{source}: the calibration profile holds nothing to apply (no sections, no compute)")
    read = tuple(_section_from_dict(s, f"sections[{i}]", source) for i, s in enumerate(sections))
    keys = [section.hardware for section in read]
    twice = sorted({key.label() for key in keys if keys.count(key) > 1})
    if twice:  # which one applies would be the file's order, silently
        raise CalibrationError(f"{source}: two sections fitted on the same hardware ({'; '.join(twice)}); keep one")
    return CalibrationProfile(
        clustersim_version=str(data.get("clustersim_version", "unknown")),
        created=str(data.get("created", "unknown")),
        sections=read,
        compute=compute_calibration_from_dict(compute, source) if compute else None,
    )
