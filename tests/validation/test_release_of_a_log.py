"""The NCCL release a log is predicted with: its manifest entry's, else the one the log prints."""

from __future__ import annotations

import pytest

from simulator.measurements.dataset import measured_log, parse_entry_log
from simulator.measurements.manifest import ManifestEntry
from simulator.validation.run import predict_log

LOG = """\
node1:1:1 [0] NCCL INFO NCCL version 2.8.4+cuda11.2
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
  1073741824     268435456     float     sum      -1   5000.0  214.75  402.65      0   5000.0  214.75  402.65      0
"""


def entry(nccl: str | None) -> ManifestEntry:
    return ManifestEntry(file="h100.txt", collective="all_reduce", gpu="H100-SXM5-80GB", gpus_per_node=8, nodes=2,
                         intra_node="nvswitch-nvlink4",
                         inter_node={"transport": "ib", "nics_per_node": 8, "nic_gbps": 400}, nccl=nccl)


@pytest.mark.parametrize(("nccl", "algo"), [
    (None, "ring"),  # the log's own line: 2.8 has no NVLS-tree
    ("unknown", "ring"),  # stated as unknown: the log's line still counts
    ("2.27.3", "nvls_tree"),  # the manifest's release wins
])
def test_the_release_comes_from_the_entry_else_the_log(nccl, algo):
    """1 GiB all_reduce on 2 x 8 H100s: NCCL 2.8 runs a ring (no NVLS-tree before 2.18), 2.27 NVLS-tree."""
    e = entry(nccl)
    measured = measured_log(e, parse_entry_log(e, LOG, "h100.txt"))
    (row,) = predict_log(measured).rows
    assert row.algo == algo


def test_a_release_given_for_every_log_overrides_the_log():
    """validate --nccl-version: the release given applies whatever the log says."""
    e = entry(None)
    measured = measured_log(e, parse_entry_log(e, LOG, "h100.txt"))
    (row,) = predict_log(measured, release=(2, 27)).rows
    assert row.algo == "nvls_tree"
