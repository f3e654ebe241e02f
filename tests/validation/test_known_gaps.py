"""The known error band note: which rows it counts and what it says."""

from __future__ import annotations

from dataclasses import replace

from simulator.collectives.comm import CommView
from simulator.core.units import KIB, MIB
from simulator.measurements.dataset import MeasuredLog
from simulator.measurements.manifest import ManifestEntry
from simulator.validation.accuracy import LogReport, RowError
from simulator.validation.known_gaps import PRE_HOPPER_NVLINK_MIDSIZE, gap_notes, in_gap


def _log(arch: str, nodes: int = 1) -> MeasuredLog:
    view = CommView(n_ranks=8 * nodes, n_nodes=nodes, ranks_per_node=8, arch=arch, intra_kind="nvlink",
                    intra_Bps=300e9, net_Bps=100e9 if nodes > 1 else 0.0, nics_per_node=4,
                    transport="ib" if nodes > 1 else None, nvls=False, sharp=False, gpudirect_rdma=True)
    entry = ManifestEntry(file=f"{arch}-{nodes}node.txt", collective="all_reduce", gpu="A100-SXM4-40GB",
                          gpus_per_node=8, nodes=nodes, intra_node="nvswitch-nvlink3")
    return MeasuredLog(entry, view, ())


def _report(log: MeasuredLog, sizes_and_errors: list[tuple[int, float]]) -> LogReport:
    """Rows measured at 100 us, predicted `error` percent off."""
    rows = tuple(RowError(size, 100.0, 100.0 + error, "ring", "simple") for size, error in sizes_and_errors)
    return LogReport(log.file, "all_reduce", rows)


def test_band_covers_single_node_pre_hopper_nvlink_midsizes_only():
    """256 KiB and 4 MiB are in for a single A100/V100 node; 128 KiB, 8 MiB, two nodes and H100 are out."""
    gap = PRE_HOPPER_NVLINK_MIDSIZE
    ampere, volta = _log("ampere"), _log("volta")
    assert in_gap(gap, ampere, 256 * KIB) and in_gap(gap, volta, 4 * MIB)
    assert not in_gap(gap, ampere, 128 * KIB) and not in_gap(gap, ampere, 8 * MIB)
    assert not in_gap(gap, _log("ampere", nodes=2), MIB) and not in_gap(gap, _log("hopper"), MIB)
    pcie = replace(ampere, view=replace(ampere.view, intra_kind="pcie"))
    assert not in_gap(gap, pcie, MIB)


def test_note_counts_the_rows_and_their_median_signed_error():
    """Rows -40% and -30% in the band and one -50% outside it: 2 rows in 1 log, median -35.0%."""
    ampere, hopper = _log("ampere"), _log("hopper")
    pairs = [(ampere, _report(ampere, [(MIB, -40.0), (2 * MIB, -30.0), (64 * MIB, -50.0)])),
             (hopper, _report(hopper, [(MIB, -50.0)]))]
    (note,) = gap_notes(pairs)
    assert note.startswith("2 rows in 1 log(s) lie in a known error band")
    assert "median signed error here is -35.0%" in note


def test_no_note_without_rows_in_the_band():
    """A manifest of H100 logs gets no note."""
    hopper = _log("hopper")
    assert gap_notes([(hopper, _report(hopper, [(MIB, -50.0)]))]) == []
