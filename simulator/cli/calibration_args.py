"""The --calibration option shared by commands (reading a profile and choosing its section:
simulator.calibration.apply)."""

from __future__ import annotations

from rich.console import Console

from simulator.calibration.apply import calibration_for, load_profile, predict_measured, selection_mismatch
from simulator.calibration.profile import CalibrationProfile
from simulator.cli.common import print_message

CALIBRATION_HELP = "Calibration profile YAML (from `clustersim calibrate`); default: the published-facts prior."
FORCE_HELP = "Apply the calibration profile even if it was fitted on other hardware."

__all__ = ["CALIBRATION_HELP", "FORCE_HELP", "calibration_for", "load_profile", "predict_measured",
           "warn_of_other_selection"]


def warn_of_other_selection(profile: CalibrationProfile | None, stated: str | None, option: str) -> None:
    """A warning on stderr when the selection stated (by `option`) is not the one the profile's fit used."""
    message = selection_mismatch(profile, stated, option)
    if message:
        print_message(Console(stderr=True), "warning", "yellow", message)
