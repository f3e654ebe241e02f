"""The --calibration option shared by commands: reading a profile and choosing its section."""

from __future__ import annotations

from pathlib import Path

from simulator.calibration.profile import CalibrationProfile, profile_from_dict
from simulator.cli.common import read_yaml
from simulator.collectives.comm import CommView
from simulator.collectives.params import ModelParams, prior_params
from simulator.measurements.dataset import HardwareKey

CALIBRATION_HELP = "Calibration profile YAML (from `clustersim calibrate`); default: the published-facts prior."
FORCE_HELP = "Apply the calibration profile even if it was fitted on other hardware."


def load_profile(path: Path | None) -> CalibrationProfile | None:
    """Read and check a profile file (None: no calibration)."""
    if path is None:
        return None
    return profile_from_dict(read_yaml(path, "calibration profile"), str(path))


def calibrated_params(profile: CalibrationProfile | None, gpu: str, intra_node: str, view: CommView,
                      force: bool) -> ModelParams | None:
    """The parameters a profile gives this cluster (None: use the prior)."""
    if profile is None:
        return None
    section = profile.section_for(HardwareKey.of(gpu, intra_node, view), force)
    return section.apply(prior_params(view))
