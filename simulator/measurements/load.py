"""Loading a manifest's measured logs (read here: the manifest and the logs it lists) with their clusters
built, for the commands and API functions that compare predictions with them.

An entry whose log cannot be used (the manifest entry itself is wrong, the file is missing or unreadable,
the log does not parse or does not match its entry, or its cluster cannot be built, e.g. a GPU the table
lacks) is skipped with its reason, and the other logs load: one such entry does not hide a manifest's
other logs. `strict` makes the first such reason an error instead; a manifest none of whose logs can be
used is an error either way."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from simulator.collectives.busbw import COLLECTIVES, collective_name
from simulator.core.errors import ClusterSimError, ConfigError, config_error_from
from simulator.core.input_file import read_input_text
from simulator.measurements.dataset import MeasuredLog, measured_log, parse_entry_log
from simulator.measurements.manifest import Manifest, ManifestEntry, log_path, parse_manifest
from simulator.measurements.nccl_tests import parse_log, sniffed_format
from topologies.spec import TopologySpec


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


def _measure(entry: ManifestEntry, text: str, source: str, where: str | None, warn: Callable[[str], None],
             spec: TopologySpec | None = None) -> MeasuredLog:
    """Parse an entry's log text and build its cluster; the parser's warnings (a failed check, several data
    types, an abridged device list) go to `warn`, a cluster that cannot be built is an error naming `where`
    (None: the error's own words, which name the log)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log = parse_entry_log(entry, text, source)
        try:
            measured = measured_log(entry, log, spec)
        except ClusterSimError as exc:
            if where is None:
                raise
            raise ConfigError(f"{where}: {exc}") from None
    for record in caught:
        warn(str(record.message))
    return measured


def _load_entry(manifest: Path, parsed: Manifest, entry: ManifestEntry, warn: Callable[[str], None]) -> MeasuredLog:
    path = log_path(parsed, entry)
    text = read_input_text(path, f"log of manifest entry {entry.file!r}")
    return _measure(entry, text, str(path), f"{manifest}: entry {entry.file}", warn)


def read_log(path: Path, spec: TopologySpec, warn: Callable[[str], None], collective: str | None = None,
             env: Mapping[str, str] | None = None, run: int | None = None) -> LoadedLogs:
    """One log measured on the cluster `spec`, without a manifest: the entry a manifest would hold for it, written
    from the cluster (`collective`: the one the log ran, in any spelling collective_name reads, else the one the log
    names; `env`: the NCCL environment it ran with; `run`: which of several runs in the file, from 1), then as
    read_measured."""
    if collective is not None:
        named = collective_name(collective)
        if named not in COLLECTIVES:
            raise ConfigError(f"op: unknown collective {collective!r} (valid: {', '.join(COLLECTIVES)})")
        collective = named
    if run is not None and run < 1:
        raise ConfigError(f"run: runs are counted from 1, got {run}")
    text = read_input_text(path, "log")
    if collective is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            collective = parse_log(text, str(path)).collective
        if collective is None:
            raise ConfigError(f"{path}: the log does not say which collective it ran; give it (--op all_reduce, ...)")
    inter = None if spec.inter_node is None else spec.inter_node.model_dump(exclude_none=True, mode="json")
    fields = {"file": path.name, "collective": collective, "gpu": spec.gpu, "gpus_per_node": spec.gpus_per_node,
              "nodes": spec.nodes, "intra_node": spec.intra_node, "inter_node": inter,
              "nvlink_domain_gpus": spec.nvlink_domain_gpus, "env": dict(env or {}), "run": run,
              "format": sniffed_format(text)}
    try:
        entry = ManifestEntry.model_validate(fields)
    except ValidationError as exc:
        raise config_error_from(exc, str(path)) from None
    return LoadedLogs((_measure(entry, text, str(path), None, warn, spec),), ())


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
