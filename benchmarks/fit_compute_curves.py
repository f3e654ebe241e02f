"""Fit the compute model's shape curves to a measured compute profile (benchmarks/gpu_calibration.py --table).

Run: python benchmarks/fit_compute_curves.py [PROFILE.yaml] [--json]
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

from simulator.calibration.compute_profile import ComputeCalibration, compute_calibration_from_dict
from topologies.hardware import gpu_spec

DEFAULT_PROFILE = Path(__file__).resolve().parent / "data" / "h200_compute.yaml"
MIN_GEMM_TIME_S = 100e-6
# torch.cuda.get_device_name -> the GPU table's name
GPU_BY_NAME = {"NVIDIA H200": "H200-SXM-141GB", "NVIDIA H100 80GB HBM3": "H100-SXM5-80GB"}


def _fit(model: Any, start: list[float], measured: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Parameters minimising the squared log error of model(p) against `measured`; median and p90 |error|."""
    result = least_squares(lambda p: np.log(model(p)) - np.log(measured), start, bounds=(1e-9, np.inf))
    error = np.abs(model(result.x) / measured - 1.0)
    return result.x, float(np.median(error)), float(np.quantile(error, 0.9))


def fit_gemms(profile: ComputeCalibration, gpu: str) -> list[dict[str, Any]]:
    """One K-ramp per (dtype, role) of the measured GEMMs (module docstring)."""
    spec = gpu_spec(gpu)
    fits = []
    for dtype, role in sorted({(g.dtype, g.role) for g in profile.gemms}):
        points = [g for g in profile.gemms if (g.dtype, g.role) == (dtype, role) and g.time_s >= MIN_GEMM_TIME_S]
        if len(points) < 10:
            continue
        k = np.array([g.k for g in points], dtype=float)
        efficiency = np.array([g.tflops for g in points]) / spec.peak_tflops(dtype)
        (e, k_half), median, p90 = _fit(lambda p, k=k: p[0] * k / (k + p[1]), [0.7, 300.0], efficiency)
        fits.append({"dtype": dtype, "role": role, "points": len(points), "asymptote": round(float(e), 3),
                     "k_half": round(float(k_half)), "median_abs_error": round(median, 3),
                     "p90_abs_error": round(p90, 3),
                     "median_efficiency": round(float(np.median(efficiency)), 3)})
    return fits


def fit_attention(profile: ComputeCalibration, gpu: str) -> list[dict[str, Any]]:
    """a_d per head dim and s_half per backend (module docstring)."""
    peak = gpu_spec(gpu).peak_tflops("bf16")
    fits = []
    for backend in sorted({a.backend for a in profile.attention}):
        points = [a for a in profile.attention if a.backend == backend and a.causal]
        widths = sorted({a.head_dim for a in points})
        s = np.array([a.seq_len for a in points], dtype=float)
        which = np.array([widths.index(a.head_dim) for a in points])
        full_flops = np.array([4.0 * a.batch * a.heads * a.seq_len ** 2 * a.head_dim for a in points])
        seconds = np.array([a.forward_time_s + a.backward_time_s for a in points])
        efficiency = 3.0 * full_flops / seconds / 1e12 / peak

        def curve(p: np.ndarray, s: np.ndarray = s, which: np.ndarray = which) -> np.ndarray:
            return p[which] * s / (s + p[-1])

        params, median, p90 = _fit(curve, [0.6] * len(widths) + [800.0], efficiency)
        fits.append({"backend": backend, "points": len(points),
                     "amplitudes": {d: round(float(a), 3) for d, a in zip(widths, params[:-1], strict=True)},
                     "s_half": round(float(params[-1])), "median_abs_error": round(median, 3),
                     "p90_abs_error": round(p90, 3)})
    return fits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("profile", nargs="?", type=Path, default=DEFAULT_PROFILE, help="Measured compute profile.")
    parser.add_argument("--json", action="store_true", help="Print the fits as JSON.")
    args = parser.parse_args(argv)
    document = yaml.safe_load(args.profile.read_text())
    profile = compute_calibration_from_dict(document.get("compute"), str(args.profile))
    gpu = GPU_BY_NAME.get(profile.gpu_name)
    if gpu is None:
        print(f"fit_compute_curves: {args.profile}: no GPU table entry for {profile.gpu_name!r} "
              f"(known: {', '.join(GPU_BY_NAME)})", file=sys.stderr)
        return 2
    gemms, attention = fit_gemms(profile, gpu), fit_attention(profile, gpu)
    if args.json:
        print(json.dumps({"profile": str(args.profile), "gpu": gpu, "gemms": gemms, "attention": attention}, indent=2))
        return 0
    print(f"{profile.gpu_name} ({gpu}), measured {profile.measured_at}")
    for g in gemms:
        print(f"  GEMM {g['dtype']} {g['role']}: {g['asymptote']} x k / (k + {g['k_half']}) over {g['points']} "
              f"points, median |error| {g['median_abs_error']:.1%}, p90 {g['p90_abs_error']:.1%}; "
              f"median efficiency {g['median_efficiency']}")
    for a in attention:
        widths = ", ".join(f"a_{d} {amplitude}" for d, amplitude in a["amplitudes"].items())
        print(f"  attention {a['backend']}: {widths}, s_half {a['s_half']} over {a['points']} points, "
              f"median |error| {a['median_abs_error']:.1%}, p90 {a['p90_abs_error']:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
