"""Fit the compute model's shape curves to a measured compute profile (benchmarks/gpu_calibration.py --table).

Run: python benchmarks/fit_compute_curves.py [PROFILE.yaml] [--check OTHER.yaml] [--json]
(default: benchmarks/data/h200_compute.yaml, measured on an H200). Prints the fitted constants, each
curve's median and 90th-percentile |error| over the points it was fitted on, and, for the GEMMs, how the
compute model's own table prices the same shapes.

Curves (least squares on log efficiency, scipy.optimize.least_squares):
1. GEMMs, per (dtype, role) grid of the table: efficiency = E x k / (k + k_half), k the reduction
   dimension, against the GPU's dense peak at that dtype. Points faster than MIN_GEMM_TIME_S are left out:
   there the time is the host's launch of one torch call (about 25 us on the measuring machine, whatever
   the shape), not the GPU's.
2. Fused attention, per SDPA backend, causal only: efficiency in the compute model's convention (full
   s^2 score FLOPs, backward twice the forward, against the bf16 peak) = a_d x s / (s + s_half), one
   amplitude a_d per measured head dim d and one s_half per backend. The compute model takes the ratio to
   the curve at s = ATTENTION_REFERENCE_SEQ, d = 128 as its attention shape factor
   (simulator.training.compute.ATTENTION_SHAPE), keeping the level of its efficiency table.

--check OTHER.yaml holds the curves fitted on PROFILE against another measured profile (another GPU, driver or
library), which the fit did not see: each curve's median and 90th-percentile |error| over OTHER's points, each
rate taken against OTHER's own GPU peak; and, point for point where both profiles timed the same GEMM or
attention shape, OTHER's rate over PROFILE's (median and the 10th-90th percentiles).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.optimize import least_squares

from simulator.calibration.compute_profile import ComputeCalibration, GemmMeasurement, compute_calibration_from_dict
from topologies.hardware import Precision, gpu_spec

DEFAULT_PROFILE = Path(__file__).resolve().parent / "data" / "h200_compute.yaml"
MIN_GEMM_TIME_S = 100e-6
# torch.cuda.get_device_name -> the GPU table's name
GPU_BY_NAME = {"NVIDIA H200": "H200-SXM-141GB", "NVIDIA H100 80GB HBM3": "H100-SXM5-80GB"}


def _fit(model: Any, start: list[float], measured: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Parameters minimising the squared log error of model(p) against `measured`; median and p90 |error|."""
    result = least_squares(lambda p: np.log(model(p)) - np.log(measured), start, bounds=(1e-9, np.inf))
    error = np.abs(model(result.x) / measured - 1.0)
    return result.x, float(np.median(error)), float(np.quantile(error, 0.9))


def _errors(predicted: np.ndarray, measured: np.ndarray) -> tuple[float, float]:
    """Median and 90th-percentile |predicted / measured - 1|."""
    error = np.abs(predicted / measured - 1.0)
    return float(np.median(error)), float(np.quantile(error, 0.9))


def _gemm_ramp(k: np.ndarray, asymptote: float, k_half: float) -> np.ndarray:
    return asymptote * k / (k + k_half)


def _gemm_grid(profile: ComputeCalibration, dtype: str, role: str) -> list[GemmMeasurement]:
    """The GEMMs of one (dtype, role) grid, the launch-bound left out (MIN_GEMM_TIME_S)."""
    return [g for g in profile.gemms if (g.dtype, g.role) == (dtype, role) and g.time_s >= MIN_GEMM_TIME_S]


def _gemm_points(profile: ComputeCalibration, gpu: str, dtype: Precision, role: str) -> tuple[np.ndarray, np.ndarray]:
    """(k, efficiency against the GPU's peak at `dtype`) of the GEMMs of one grid."""
    points = _gemm_grid(profile, dtype, role)
    return (np.array([g.k for g in points], dtype=float),
            np.array([g.tflops for g in points]) / gpu_spec(gpu).peak_tflops(dtype))


def fit_gemms(profile: ComputeCalibration, gpu: str) -> list[dict[str, Any]]:
    """One K-ramp per (dtype, role) of the measured GEMMs (module docstring)."""
    fits = []
    for dtype, role in sorted({(g.dtype, g.role) for g in profile.gemms}):
        k, efficiency = _gemm_points(profile, gpu, dtype, role)
        if len(k) < 10:
            continue
        (e, k_half), median, p90 = _fit(lambda p, k=k: _gemm_ramp(k, p[0], p[1]), [0.7, 300.0], efficiency)
        fits.append({"dtype": dtype, "role": role, "points": len(k), "asymptote": round(float(e), 3),
                     "k_half": round(float(k_half)), "median_abs_error": round(median, 3),
                     "p90_abs_error": round(p90, 3),
                     "median_efficiency": round(float(np.median(efficiency)), 3)})
    return fits


def _attention_points(profile: ComputeCalibration, gpu: str, backend: str,
                      widths: list[int] | None = None) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray]:
    """(head dims, keys s, each point's head-dim index, efficiency in the compute model's convention) of one
    backend's causal points; with `widths`, only points of those head dims."""
    points = [a for a in profile.attention if a.backend == backend and a.causal
              and (widths is None or a.head_dim in widths)]
    widths = widths or sorted({a.head_dim for a in points})
    s = np.array([a.seq_len for a in points], dtype=float)
    which = np.array([widths.index(a.head_dim) for a in points], dtype=int)
    full_flops = np.array([4.0 * a.batch * a.heads * a.seq_len ** 2 * a.head_dim for a in points])
    seconds = np.array([a.forward_time_s + a.backward_time_s for a in points])
    return widths, s, which, 3.0 * full_flops / seconds / 1e12 / gpu_spec(gpu).peak_tflops("bf16")


def _attention_curve(p: np.ndarray, s: np.ndarray, which: np.ndarray) -> np.ndarray:
    """a_d x s / (s + s_half): p holds a_d per head dim, then s_half."""
    return p[which] * s / (s + p[-1])


def fit_attention(profile: ComputeCalibration, gpu: str) -> list[dict[str, Any]]:
    """a_d per head dim and s_half per backend (module docstring)."""
    fits = []
    for backend in sorted({a.backend for a in profile.attention}):
        widths, s, which, efficiency = _attention_points(profile, gpu, backend)
        params, median, p90 = _fit(lambda p, s=s, which=which: _attention_curve(p, s, which),
                                   [0.6] * len(widths) + [800.0], efficiency)
        fits.append({"backend": backend, "points": len(s),
                     "amplitudes": {d: round(float(a), 3) for d, a in zip(widths, params[:-1], strict=True)},
                     "s_half": round(float(params[-1])), "median_abs_error": round(median, 3),
                     "p90_abs_error": round(p90, 3)})
    return fits


def _rate_ratios(ours: dict[Any, float], theirs: dict[Any, float]) -> dict[str, Any]:
    """Point for point over the keys both hold: theirs / ours, median and 10th-90th percentiles."""
    ratio = np.array([theirs[key] / ours[key] for key in ours.keys() & theirs.keys()])
    if not len(ratio):
        return {"points": 0}
    return {"points": len(ratio), "median": round(float(np.median(ratio)), 3),
            "p10": round(float(np.quantile(ratio, 0.1)), 3), "p90": round(float(np.quantile(ratio, 0.9)), 3)}


def check(fits: dict[str, list[dict[str, Any]]], profile: ComputeCalibration, other: ComputeCalibration,
          other_gpu: str) -> dict[str, list[dict[str, Any]]]:
    """The curves in `fits` (fitted on `profile`) against `other`'s points, and `other`'s rates over
    `profile`'s where both timed the same shape (module docstring)."""
    gemms = []
    for fit in fits["gemms"]:
        dtype, role = fit["dtype"], fit["role"]
        k, efficiency = _gemm_points(other, other_gpu, dtype, role)
        if not len(k):
            continue
        median, p90 = _errors(_gemm_ramp(k, fit["asymptote"], fit["k_half"]), efficiency)

        ours, theirs = ({(g.m, g.n, g.k): g.tflops for g in _gemm_grid(p, dtype, role)} for p in (profile, other))
        gemms.append({"dtype": dtype, "role": role, "points": len(k), "median_abs_error": round(median, 3),
                      "p90_abs_error": round(p90, 3), "rate_ratio": _rate_ratios(ours, theirs)})
    attention = []
    for fit in fits["attention"]:
        backend, widths = fit["backend"], list(fit["amplitudes"])
        _, s, which, efficiency = _attention_points(other, other_gpu, backend, widths)
        if not len(s):
            continue
        params = np.array([*fit["amplitudes"].values(), fit["s_half"]], dtype=float)
        median, p90 = _errors(_attention_curve(params, s, which), efficiency)

        def seconds(p: ComputeCalibration, backend: str = backend) -> dict[Any, float]:
            return {(a.batch, a.heads, a.kv_heads, a.seq_len, a.head_dim, a.causal):
                    1.0 / (a.forward_time_s + a.backward_time_s) for a in p.attention if a.backend == backend}

        attention.append({"backend": backend, "points": len(s), "median_abs_error": round(median, 3),
                          "p90_abs_error": round(p90, 3), "rate_ratio": _rate_ratios(seconds(profile), seconds(other))})
    return {"gemms": gemms, "attention": attention}


def _load(path: Path) -> tuple[ComputeCalibration, str] | None:
    """The profile at `path` and its GPU table name; None (after saying why on stderr) for a GPU the table
    lacks."""
    document = yaml.safe_load(path.read_text())
    profile = compute_calibration_from_dict(document.get("compute"), str(path))
    gpu = GPU_BY_NAME.get(profile.gpu_name)
    if gpu is None:
        print(f"fit_compute_curves: {path}: no GPU table entry for {profile.gpu_name!r} "
              f"(known: {', '.join(GPU_BY_NAME)})", file=sys.stderr)
        return None
    return profile, gpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("profile", nargs="?", type=Path, default=DEFAULT_PROFILE, help="Measured compute profile.")
    parser.add_argument("--check", type=Path, metavar="OTHER",
                        help="Another measured profile to hold the fitted curves against (not fitted).")
    parser.add_argument("--json", action="store_true", help="Print the fits as JSON.")
    args = parser.parse_args(argv)
    loaded = _load(args.profile)
    other = _load(args.check) if args.check else None
    if loaded is None or (args.check and other is None):
        return 2
    profile, gpu = loaded
    fits = {"gemms": fit_gemms(profile, gpu), "attention": fit_attention(profile, gpu)}
    checked = check(fits, profile, *other) if other else None
    if args.json:
        document: dict[str, Any] = {"profile": str(args.profile), "gpu": gpu, **fits}
        if other is not None and checked is not None:
            document["check"] = {"profile": str(args.check), "gpu": other[1], **checked}
        print(json.dumps(document, indent=2))
        return 0
    print(f"{profile.gpu_name} ({gpu}), measured {profile.measured_at}")
    for g in fits["gemms"]:
        print(f"  GEMM {g['dtype']} {g['role']}: {g['asymptote']} x k / (k + {g['k_half']}) over {g['points']} "
              f"points, median |error| {g['median_abs_error']:.1%}, p90 {g['p90_abs_error']:.1%}; "
              f"median efficiency {g['median_efficiency']}")
    for a in fits["attention"]:
        widths = ", ".join(f"a_{d} {amplitude}" for d, amplitude in a["amplitudes"].items())
        print(f"  attention {a['backend']}: {widths}, s_half {a['s_half']} over {a['points']} points, "
              f"median |error| {a['median_abs_error']:.1%}, p90 {a['p90_abs_error']:.1%}")
    if checked is not None and other is not None:
        print(f"Held against {other[0].gpu_name} ({other[1]}), measured {other[0].measured_at}, not fitted:")
        for c in [*checked["gemms"], *checked["attention"]]:
            name = f"GEMM {c['dtype']} {c['role']}" if "dtype" in c else f"attention {c['backend']}"
            ratio = c["rate_ratio"]
            same = (f"; the same {ratio['points']} shapes at {ratio['median']} of the fitted profile's rate "
                    f"(p10 {ratio['p10']}, p90 {ratio['p90']})" if ratio["points"] else "")
            print(f"  {name}: over {c['points']} points, median |error| {c['median_abs_error']:.1%}, "
                  f"p90 {c['p90_abs_error']:.1%}{same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
