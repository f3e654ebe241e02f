"""Measured logs ready to predict: each log's rows with the cluster its manifest entry describes.

Validation and calibration both start here: a `MeasuredLog` holds the parsed rows (size > 0;
size-0 rows move no data), the communicator view of the entry's cluster, and the hardware key
that says which calibration may apply to it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from simulator.collectives.busbw import busbw_factor
from simulator.collectives.comm import CommView, comm_view
from simulator.collectives.nccl_releases import parse_release
from simulator.collectives.predict import check_env
from simulator.core.errors import ConfigError
from simulator.measurements.manifest import ManifestEntry
from simulator.measurements.nccl_tests import NcclLog, NcclRow, parse_log
from topologies.build import build_representative
from topologies.spec import TopologySpec, topology_spec_from_fields


@dataclass(frozen=True, order=True)
class HardwareKey:
    """What a calibration is specific to: the GPU, its intra-node fabric, the network transport."""

    gpu: str
    intra_node: str
    transport: str | None

    def label(self) -> str:
        return f"{self.gpu} / {self.intra_node} / {self.transport or 'single node'}"

    @classmethod
    def of(cls, gpu: str, intra_node: str, view: CommView) -> HardwareKey:
        """The key of a cluster: its network transport counts only when it spans nodes."""
        return cls(gpu, intra_node, view.transport if view.multi_node else None)


@dataclass(frozen=True)
class MeasuredLog:
    """One log's measured rows and the cluster they were measured on."""

    entry: ManifestEntry
    view: CommView
    rows: tuple[NcclRow, ...]
    nccl_version: str | None = None  # the entry's `nccl`, else the version the log prints
    selection: str = "model"  # where its predictions' algorithm and protocol come from (collectives.select)
    gpus_per_thread: int = 1  # GPUs one test thread drove (-g): the entry's, else the log's, else 1

    @property
    def file(self) -> str:
        return self.entry.file

    @property
    def hardware(self) -> HardwareKey:
        return HardwareKey.of(self.entry.gpu, self.entry.intra_node, self.view)


def parse_entry_log(entry: ManifestEntry, text: str, source: str) -> NcclLog:
    """Parse an entry's log with what only the manifest knows: the busbw factor of its collective and
    rank count (for busbw-only tables), and which run to take from a file of several (`run:`, else the one
    table of the entry's collective)."""
    factor = busbw_factor(entry.collective, entry.gpus_per_node * entry.nodes)
    return parse_log(text, source, entry.format, busbw_factor=factor, run=entry.run, collective=entry.collective)


def check_log_matches(entry: ManifestEntry, log: NcclLog) -> None:
    """A log must be what its entry says: the same collective and, where stated, rank count and GPUs per
    test thread.

    A device list with fewer ranks than the entry is taken as abridged by its publisher (a warning;
    the entry's ranks count), one with more is an error."""
    if log.collective is not None and log.collective != entry.collective:
        raise ConfigError(
            f"{entry.file}: the log ran {log.collective} but {entry.collective} is stated for it (its manifest entry's "
            "collective, or --op)"
        )
    ranks = entry.gpus_per_node * entry.nodes
    if log.nranks is not None and log.nranks < ranks:
        warnings.warn(
            f"{entry.file}: the log's device list names {log.nranks} ranks, the cluster stated for it "
            f"{entry.nodes} node(s) x {entry.gpus_per_node} GPU(s) = {ranks}; taken as an abridged list, "
            f"predicting {ranks} ranks",
            stacklevel=2,
        )
    elif log.nranks is not None and log.nranks != ranks:
        raise ConfigError(
            f"{entry.file}: the log lists {log.nranks} ranks but the cluster stated for it has "
            f"{entry.nodes} node(s) x {entry.gpus_per_node} GPU(s) = {ranks}"
        )
    if entry.gpus_per_thread is not None and log.gpus_per_thread not in (None, entry.gpus_per_thread):
        raise ConfigError(
            f"{entry.file}: the log's header says nGpus {log.gpus_per_thread} (GPUs per test thread) but its "
            f"manifest entry says gpus_per_thread {entry.gpus_per_thread}"
        )


def measured_log(entry: ManifestEntry, log: NcclLog, spec: TopologySpec | None = None) -> MeasuredLog:
    """Check a parsed log against its entry and build the entry's cluster (or take `spec`, a cluster the entry was
    written from: a preset keeps its fabric and faults)."""
    check_log_matches(entry, log)
    spec = spec or topology_spec_from_fields(
        gpu=entry.gpu, gpus_per_node=entry.gpus_per_node, nodes=entry.nodes,
        intra_node=entry.intra_node, inter_node=entry.inter_node,
        nvlink_domain_gpus=entry.nvlink_domain_gpus, name=entry.file,
    )
    rows = tuple(row for row in log.rows if row.size_bytes > 0)
    if not rows:
        raise ConfigError(f"{entry.file}: no rows with a size above 0 to compare with")
    stated = entry.nccl if parse_release(entry.nccl) is not None else None
    view = comm_view(build_representative(spec))
    try:
        check_env(view, entry.env)
    except ConfigError as exc:
        raise ConfigError(f"field 'env': {exc}") from None
    return MeasuredLog(entry, view, rows, stated or log.nccl_version,
                       gpus_per_thread=entry.gpus_per_thread or log.gpus_per_thread or 1)
