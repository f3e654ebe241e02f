"""Loading a manifest's measured logs (read here: the manifest and the logs it lists) with their clusters
built, for the commands and API functions that compare predictions with them."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

from simulator.core.errors import ClusterSimError, ConfigError
from simulator.core.input_file import read_input_text
from simulator.measurements.dataset import MeasuredLog, measured_log, parse_entry_log
from simulator.measurements.manifest import log_path, parse_manifest


def read_measured(manifest: Path, only: list[str] | None, warn: Callable[[str], None]) -> list[MeasuredLog]:
    """Parse the manifest and every log it lists (or those named in `only`), building each cluster.

    Each warning (unknown manifest keys, ignored fields) goes to `warn`; any error names the manifest, the
    entry and what was wrong."""
    parsed = parse_manifest(read_input_text(manifest, "manifest"), str(manifest), manifest.resolve().parent)
    for warning in parsed.warnings:
        warn(warning)
    entries = parsed.entries
    if only:
        known = {entry.file for entry in entries}
        missing = [name for name in only if name not in known]
        if missing:
            raise ConfigError(f"--only: {', '.join(missing)} not listed in {manifest}")
        entries = tuple(entry for entry in entries if entry.file in only)
    logs = []
    for entry in entries:
        path = log_path(parsed, entry)
        log = parse_entry_log(entry, read_input_text(path, f"log of manifest entry {entry.file!r}"), str(path))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                logs.append(measured_log(entry, log))
            except ClusterSimError as exc:
                raise ConfigError(f"{manifest}: entry {entry.file}: {exc}") from None
        for record in caught:
            warn(str(record.message))
    return logs
