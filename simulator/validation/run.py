"""Predict every measured row of a log on the cluster its manifest entry describes."""

from __future__ import annotations

from simulator.collectives.harness import timed_loop_s
from simulator.collectives.nccl_releases import parse_release
from simulator.collectives.params import ModelParams
from simulator.collectives.predict import predict_collective
from simulator.measurements.dataset import MeasuredLog
from simulator.validation.accuracy import LogReport, RowError


def predict_log(measured: MeasuredLog, params: ModelParams | None = None,
                release: tuple[int, int] | None = None, selection: str | None = None) -> LogReport:
    """Each row's measured and predicted time; `params` None means the published-facts prior. The
    prediction is the time nccl-tests' loop prints: the collective's, or the host's issue time when one
    test thread drives several GPUs (simulator.collectives.harness).
    `selection` (None: the log's own, MeasuredLog.selection) says where the algorithm and protocol
    come from (simulator.collectives.select); with 'nccl' they are those NCCL `release` would
    choose, None: the log's own release (the newest when unknown)."""
    entry = measured.entry
    release = release or parse_release(measured.nccl_version)
    rows = []
    for row in measured.rows:
        est = predict_collective(measured.view, entry.collective, row.size_bytes, env=entry.env, params=params,
                                 nccl_release=release, selection=selection or measured.selection)
        time_s = timed_loop_s(est.time_s, measured.gpus_per_thread)
        rows.append(RowError(row.size_bytes, row.time_us, time_s * 1e6, est.algo, est.proto))
    return LogReport(entry.file, entry.collective, tuple(rows))
