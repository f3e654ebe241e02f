"""Known error bands of the collective model: where predictions are off for a reason not yet modelled.

One band is carried today. On pre-Hopper NVLink servers (V100 and A100: NVLink2/NVLink3 via mesh or
NVSwitch) measured single-node runs of 256 KiB - 4 MiB take 1.3-2.5x the predicted time: the
public logs (../shared/data/nccl-tests: ABCI A100 and V100 nodes, a DGX-1, an Azure A100 VM, an
A100 node of unstated NCCL version) are 27-55% slower than predicted there (median of each log's rows), while
the same sizes on B200 NVSwitch nodes are within 8-24% either way and multi-node runs of the same GPUs
within ~10% (the network, not NVLink, then sets the time); the one H200 log, a torch.distributed benchmark
timed around one call, is 7% slow there (its LL rows at 256-512 KiB 12-25%). No
sourced physical cause has been found that a model change could carry without worsening the other
logs (docs/collectives.md, "Known error band"), so `validate` states the band instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulator.core.units import KIB, MIB
from simulator.measurements.dataset import MeasuredLog
from simulator.validation.accuracy import LogReport


@dataclass(frozen=True)
class KnownGap:
    """Rows of single-node logs of these GPU architectures on NVLink, within a size range."""

    archs: tuple[str, ...]
    min_size_bytes: int
    max_size_bytes: int
    band: str  # the stated error band, in words


PRE_HOPPER_NVLINK_MIDSIZE = KnownGap(
    archs=("volta", "ampere"),
    min_size_bytes=256 * KIB,
    max_size_bytes=4 * MIB,
    band="single-node V100/A100 NVLink, 256 KiB - 4 MiB: predictions 25-60% fast (measured 1.3-2.5x slower)",
)


def in_gap(gap: KnownGap, log: MeasuredLog, size_bytes: int) -> bool:
    """Whether a row of `log` of this size lies in the band."""
    view = log.view
    return (view.arch in gap.archs and view.intra_kind == "nvlink" and not view.multi_node
            and gap.min_size_bytes <= size_bytes <= gap.max_size_bytes)


def gap_notes(pairs: Sequence[tuple[MeasuredLog, LogReport]], gap: KnownGap = PRE_HOPPER_NVLINK_MIDSIZE) -> list[str]:
    """One note when some rows lie in the band: how many, in which logs, and their median signed error."""
    signed: list[float] = []
    files: list[str] = []
    for log, report in pairs:
        rows = [r for r in report.rows if in_gap(gap, log, r.size_bytes)]
        signed += [(r.predicted_time_us - r.measured_time_us) / r.measured_time_us * 100.0 for r in rows]
        files += [log.file] if rows else []
    if not signed:
        return []
    return [
        f"{len(signed)} rows in {len(files)} log(s) lie in a known error band ({gap.band}); "
        f"their median signed error here is {float(np.median(signed)):+.1f}% (see docs/collectives.md)"
    ]
