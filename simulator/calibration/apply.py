"""Using a calibration profile: reading it, choosing its section for a cluster, and predicting a training
step with what the user measured (a profile, a single-GPU throughput). Shared by the CLI and the Python API."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from simulator.calibration.profile import CalibrationProfile, profile_from_dict
from simulator.collectives.comm import CommView, comm_view
from simulator.collectives.nccl_setup import DEFAULT_NCCL, NcclSetup
from simulator.collectives.params import ModelParams, prior_params
from simulator.core.input_file import read_input_text
from simulator.core.yaml_text import load_yaml_text
from simulator.measurements.dataset import HardwareKey, MeasuredLog
from simulator.training.compute import fp8_gemm_ratio
from simulator.training.pace import NOMINAL, Pace
from simulator.training.predict import compute_scale_for, predict_step
from simulator.training.prediction import StepPrediction
from simulator.validation.accuracy import LogReport
from simulator.validation.run import predict_log
from topologies.build import build_representative
from topologies.spec import TopologySpec
from workloads.spec import ModelSpec, TrainingSpec


def load_profile(path: Path | None) -> CalibrationProfile | None:
    """Read and check a profile file (None: no calibration)."""
    if path is None:
        return None
    return profile_from_dict(load_yaml_text(read_input_text(path, "calibration profile"), str(path)), str(path))


@dataclass(frozen=True)
class ClusterCalibration:
    """What a profile gives one cluster: the fitted parameters, the newest NCCL release of the logs they were
    fitted on and the selection the fit priced those logs with, which a prediction with the profile takes
    where it states none of its own (all None: no profile)."""

    params: ModelParams | None = None
    release: tuple[int, int] | None = None
    selection: str | None = None

    def selection_or(self, stated: str | None) -> str:
        """The selection a prediction runs: the one it states, else the fit's, else the model's own choice."""
        return stated or self.selection or "model"


def calibration_for(profile: CalibrationProfile | None, gpu: str, intra_node: str, view: CommView,
                    force: bool) -> ClusterCalibration:
    """What `profile` gives this cluster (ClusterCalibration; empty without a profile)."""
    if profile is None:
        return ClusterCalibration()
    section = profile.section_for(HardwareKey.of(gpu, intra_node, view), force)
    return ClusterCalibration(section.apply(prior_params(view)), section.nccl_release, section.selection)


def selection_mismatch(profile: CalibrationProfile | None, stated: str | None, option: str) -> str | None:
    """A warning for a stated selection other than the one a profile's fits priced their logs with: its fitted
    parameters then price pairs they were not fitted on (None: no profile, nothing stated, or the same)."""
    if profile is None or stated is None:
        return None
    others = sorted({section.selection for section in profile.sections if section.selection != stated})
    if not others:
        return None
    return (f"{option} {stated}: the calibration profile was fitted with selection {' and '.join(others)}, so its "
            "fitted parameters price pairs they were not fitted on")


def predict_measured(log: MeasuredLog, profile: CalibrationProfile | None, force: bool,
                     release: tuple[int, int] | None = None, selection: str | None = None) -> LogReport:
    """Every row of a measured log predicted with what `profile` gives its cluster (the prior without one), in
    the selection stated, else the one the profile's fit priced its logs with, else the log's own."""
    fitted = calibration_for(profile, log.entry.gpu, log.entry.intra_node, log.view, force)
    return predict_log(log, fitted.params, release, selection or fitted.selection)


def predict_calibrated(topology: TopologySpec, training: TrainingSpec, model: ModelSpec, calibration: Path | None,
                       force: bool, measured_tokens_per_s: float | None = None, pace: Pace = NOMINAL,
                       nccl: NcclSetup = DEFAULT_NCCL) -> StepPrediction:
    """Predict with what the user measured: a calibration profile (collective parameters, and the
    GEMM efficiency of its compute section) and/or a single-GPU tokens/s for this job. A job that states no
    NCCL release runs the one of the profile's logs, and one that states no selection takes the one its fit priced
    them with (calibration_for)."""
    profile = load_profile(calibration)
    params, gemm, source = None, None, []
    if profile is not None:
        cluster = build_representative(topology)
        source.append(str(calibration))
        if profile.sections:  # a compute-only profile (benchmarks/gpu_calibration.py) leaves collectives at the prior
            fitted = calibration_for(profile, topology.gpu, topology.intra_node, comm_view(cluster), force)
            params = fitted.params
            if nccl.release is None and fitted.release is not None:
                nccl = replace(nccl, release=fitted.release)
                source.append(f"NCCL {fitted.release[0]}.{fitted.release[1]}, its logs' release")
            if nccl.selection is None:
                nccl = replace(nccl, selection=fitted.selection)
                if fitted.selection == "nccl":
                    source.append("NCCL's tuner's choices, as its fit")
        if profile.compute is not None:  # the job's precision where measured; fp8 jobs else take bf16's share
            measured = {g.dtype for g in profile.compute.gemms}
            precision = "bf16" if training.precision == "fp8" and "fp8" not in measured else training.precision
            peak = cluster.gpu.peak_tflops("fp16" if cluster.gpu.bf16_tflops is None else precision)
            gemm = profile.compute.gemm_efficiency(peak, precision if len(measured) > 1 else None)
            if precision == "fp8":  # measured fp8 GEMMs: the compute model applies its fp8 ratio to this share
                gemm /= fp8_gemm_ratio(cluster.gpu.arch, "forward")
    scale = 1.0
    if measured_tokens_per_s is not None:
        scale = compute_scale_for(measured_tokens_per_s, topology, training, model, gemm)
        source.append(f"measured {measured_tokens_per_s:g} tokens/s/GPU (compute x {scale:.3f})")
    return predict_step(topology, training, model, params, scale, gemm, "; ".join(source) or None, pace, nccl)
