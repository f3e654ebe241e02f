"""Loading a manifest's measured logs for the commands that compare with them (simulator.measurements.load),
warnings on stderr."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from simulator.cli.common import print_message
from simulator.measurements.dataset import MeasuredLog
from simulator.measurements.load import read_measured


def load_measured(manifest: Path, only: list[str] | None = None) -> list[MeasuredLog]:
    """Parse the manifest and every log it lists (or those named in `only`), building each cluster;
    warnings (unknown manifest keys, ignored fields) go to stderr."""
    err = Console(stderr=True)
    return read_measured(manifest, only, lambda warning: print_message(err, "warning", "yellow", warning))
