"""Loading a manifest's measured logs for the commands that compare with them (simulator.measurements.load),
warnings on stderr."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rich.console import Console

from simulator.cli.common import print_message
from simulator.measurements.load import LoadedLogs, read_log, read_measured
from topologies.spec import TopologySpec

STRICT_HELP = ("Refuse the manifest if any entry cannot be used (by default such an entry is skipped with its "
               "reason and the others are used).")


def _warn(message: str) -> None:
    print_message(Console(stderr=True), "warning", "yellow", message)


def load_measured(manifest: Path, only: list[str] | None = None, strict: bool = False) -> LoadedLogs:
    """Parse the manifest and every log it lists (or those named in `only`), building each cluster;
    warnings (unknown manifest keys, ignored fields) and skipped entries go to stderr (`strict`: a skipped
    entry is an error)."""
    return read_measured(manifest, only, _warn, strict)


def load_log(path: Path, spec: TopologySpec, collective: str | None, env: Mapping[str, str],
             run: int | None) -> LoadedLogs:
    """One log on the cluster `spec`, without a manifest (simulator.measurements.load.read_log); its warnings
    (an abridged device list, several runs) go to stderr."""
    return read_log(path, spec, _warn, collective, env, run)
