"""Predict every row of every log listed in a manifest, from the entry's cluster description alone."""

from __future__ import annotations

from simulator.collectives.comm import comm_view
from simulator.collectives.predict import predict_collective
from simulator.core.errors import ConfigError
from simulator.measurements.manifest import ManifestEntry
from simulator.measurements.nccl_tests import NcclLog
from simulator.validation.accuracy import LogReport, RowError
from topologies.build import build
from topologies.spec import topology_spec_from_fields


def check_log_matches(entry: ManifestEntry, log: NcclLog) -> None:
    """A log must be what its entry says: the same collective and, where stated, rank count."""
    if log.collective is not None and log.collective != entry.collective:
        raise ConfigError(
            f"{entry.file}: the log ran {log.collective} but its manifest entry says {entry.collective}"
        )
    ranks = entry.gpus_per_node * entry.nodes
    if log.nranks is not None and log.nranks != ranks:
        raise ConfigError(
            f"{entry.file}: the log lists {log.nranks} ranks but its manifest entry describes "
            f"{entry.nodes} node(s) x {entry.gpus_per_node} GPU(s) = {ranks}"
        )


def validate_log(entry: ManifestEntry, log: NcclLog) -> LogReport:
    """Predict each measured row (size > 0) of one log on the cluster its entry describes."""
    check_log_matches(entry, log)
    spec = topology_spec_from_fields(
        gpu=entry.gpu, gpus_per_node=entry.gpus_per_node, nodes=entry.nodes,
        intra_node=entry.intra_node, inter_node=entry.inter_node,
        nvlink_domain_gpus=entry.nvlink_domain_gpus, name=entry.file,
    )
    view = comm_view(build(spec))
    rows = []
    for row in log.rows:
        if row.size_bytes <= 0:
            continue
        est = predict_collective(view, entry.collective, row.size_bytes, env=entry.env)
        rows.append(RowError(row.size_bytes, row.time_us, est.time_s * 1e6, est.algo, est.proto))
    return LogReport(entry.file, entry.collective, tuple(rows))
