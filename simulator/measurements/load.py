"""Loading a manifest's measured logs (read here: the manifest and the logs it lists) with their clusters
built, for the commands and API functions that compare predictions with them.

An entry whose log cannot be used (the manifest entry itself is wrong, the file is missing or unreadable,
the log does not parse or does not match its entry, or its cluster cannot be built, e.g. a GPU the table
lacks) is skipped with its reason, and the other logs load: one such entry does not hide a manifest's
other logs. `strict` makes the first such reason an error instead; a manifest none of whose logs can be
used is an error either way."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from simulator.core.errors import ClusterSimError, ConfigError
from simulator.core.input_file import read_input_text
from simulator.measurements.dataset import MeasuredLog, measured_log, parse_entry_log
from simulator.measurements.manifest import Manifest, ManifestEntry, log_path, parse_manifest


@dataclass(frozen=True)
class SkippedEntry:
    """A manifest entry that was not used: its file (or "entry <n>" where it names none) and why."""

    file: str
    reason: str


@dataclass(frozen=True)
class LoadedLogs:
    """The logs a manifest's entries produced, in manifest order, and the entries skipped."""

    logs: tuple[MeasuredLog, ...]
    skipped: tuple[SkippedEntry, ...]


def _load_entry(manifest: Path, parsed: Manifest, entry: ManifestEntry, warn: Callable[[str], None]) -> MeasuredLog:
    path = log_path(parsed, entry)
    text = read_input_text(path, f"log of manifest entry {entry.file!r}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log = parse_entry_log(entry, text, str(path))  # its warnings (a failed check, several data types) too
        try:
            measured = measured_log(entry, log)
        except ClusterSimError as exc:
            raise ConfigError(f"{manifest}: entry {entry.file}: {exc}") from None
    for record in caught:
        warn(str(record.message))
    return measured


def read_measured(manifest: Path, only: list[str] | None, warn: Callable[[str], None],
                  strict: bool = False) -> LoadedLogs:
    """Parse the manifest and every log it lists (or those named in `only`), building each cluster.

    Each warning (unknown manifest keys, ignored fields) and each skipped entry goes to `warn`; every reason
    names the manifest, the entry and what was wrong. `strict`: a skipped entry is a ConfigError."""
    parsed = parse_manifest(read_input_text(manifest, "manifest"), str(manifest), manifest.resolve().parent)
    for warning in parsed.warnings:
        warn(warning)
    entries = parsed.entries
    rejected = parsed.rejected
    if only:
        known = {entry.file for entry in entries} | {file for file, _ in rejected}
        missing = [name for name in only if name not in known]
        if missing:
            raise ConfigError(f"--only: {', '.join(missing)} not listed in {manifest}")
        entries = tuple(entry for entry in entries if entry.file in only)
        rejected = tuple((file, reason) for file, reason in rejected if file in only)
    skipped = [SkippedEntry(file, reason) for file, reason in rejected]
    logs = []
    for entry in entries:
        try:
            logs.append(_load_entry(manifest, parsed, entry, warn))
        except ClusterSimError as exc:
            skipped.append(SkippedEntry(entry.file, str(exc)))
    if skipped and (strict or len(skipped) == 1 and not logs):
        raise ConfigError(skipped[0].reason)
    if skipped and not logs:
        more = f"; and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        raise ConfigError(f"{manifest}: no entry could be used: {'; '.join(s.reason for s in skipped[:3])}{more}")
    for s in skipped:
        warn(f"skipped: {s.reason}")
    return LoadedLogs(tuple(logs), tuple(skipped))
