"""Loading a manifest's measured logs for the commands that compare with them (simulator.measurements.load),
warnings on stderr."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from simulator.cli.common import print_message
from simulator.measurements.load import LoadedLogs, read_measured

STRICT_HELP = ("Refuse the manifest if any entry cannot be used (by default such an entry is skipped with its "
               "reason and the others are used).")


def load_measured(manifest: Path, only: list[str] | None = None, strict: bool = False) -> LoadedLogs:
    """Parse the manifest and every log it lists (or those named in `only`), building each cluster;
    warnings (unknown manifest keys, ignored fields) and skipped entries go to stderr (`strict`: a skipped
    entry is an error)."""
    err = Console(stderr=True)
    return read_measured(manifest, only, lambda warning: print_message(err, "warning", "yellow", warning), strict)
