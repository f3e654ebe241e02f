"""The --calibration option shared by commands (reading a profile and choosing its section:
simulator.calibration.apply)."""

from __future__ import annotations

from simulator.calibration.apply import calibration_for, load_profile, predict_measured, selection_mismatch

CALIBRATION_HELP = "Calibration profile YAML (from `clustersim calibrate`); default: the published-facts prior."
FORCE_HELP = "Apply the calibration profile even if it was fitted on other hardware."

__all__ = ["CALIBRATION_HELP", "FORCE_HELP", "calibration_for", "load_profile", "predict_measured",
           "selection_mismatch"]
