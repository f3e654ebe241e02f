"""Every published log in ../shared/data/nccl-tests parses, with hand-counted rows and known values.

Row counts were taken independently of the parser: lines (launcher prefix `0: ` removed) that start
with an integer followed by a number or N/A, plus markdown rows starting with a digit
(`grep -cE '^\\s*[0-9][0-9_]*\\s+[0-9N]'` and `grep -cE '^\\|\\s*[0-9]'`). Values and line numbers were
read off the files with `grep -n`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from simulator.measurements.nccl_tests import NcclLog, NcclRow, parse_log, parse_nccl_tests
from simulator.measurements.nccl_tests_format import format_nccl_tests_table

DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nccl-tests"

pytestmark = pytest.mark.skipif(
    not (DATA_DIR / "manifest.yaml").is_file(), reason=f"shared measured data not present at {DATA_DIR}"
)

EXPECTED_ROWS = {
    "a100x8-1node-4gpu-allreduce-abci-hdr.txt": 24,
    "a100x8-1node-8gpu-allreduce-abci-hdr.txt": 24,
    "a100x8-1node-allgather-superbench-azure.txt": 34,
    "a100x8-1node-allreduce-10G-ocitutorials-ubuntu.txt": 1,
    "a100x8-1node-allreduce-stas00.txt": 20,
    "a100x8-1node-sendrecv-liplus.txt": 4,
    "a100x8-2node-allreduce-10G-ocitutorials-ubuntu.txt": 1,
    "a100x8-2node-allreduce-abci-hdr.txt": 24,
    "a100x8-2node-allreduce-awsp4de-efa-awsome.txt": 29,
    "a100x8-4node-allreduce-abci-hdr.txt": 24,
    "b200x8-1node-allgather-vultr.txt": 32,
    "b200x8-1node-alltoall-vultr.txt": 32,
    "b200x8-1node-reducescatter-vultr.txt": 32,
    "b200x8-2node-allgather-gcpa4-roce-clustertoolkit-gkea4.txt": 24,
    "b200x8-2node-allgather-vultr-ib.txt": 32,
    "b200x8-2node-allreduce-gcpa4-roce-dstack.txt": 11,
    "b200x8-2node-alltoall-vultr-ib.txt": 32,
    "gb200x4-18node-nvl72-1rack-allreduce-largesizes-coreweave.txt": 5,
    "h100x8-2node-allgather-gcpa3mega-tcpxo-dstack.txt": 11,
    "h100x8-2node-allreduce-awsp5-efa-awsome.txt": 32,
    "h100x8-2node-allreduce-gcpa3mega-ztan.txt": 31,
    "h100x8-2node-allreduce-ib400-default-gjaion-nccltests309.txt": 14,
    "h100x8-2node-allreduce-ib400-ring-minctas24-qps2-gjaion-nccltests309.txt": 14,
    "h100x8-2node-allreduce-ib400-xe9680-nccltests309.txt": 32,
    "h100x8-2node-allreduce-nebius-ib-dstack.txt": 31,
    "h100x8-4node-allreduce-ib400-default-gjaion-nccltests309.txt": 14,
    "h100x8-8node-allreduce-sharp-largesizes-coreweave.txt": 5,
    "h200x8-1node-allreduce-torchbench-stas00.txt": 20,
    "l40sx2-2node-allreduce-roce-ring-schmaustech.txt": 31,
    "rtx2080tix2-1node-pcie-noP2P-allgather-autodl-anthonyhoo.txt": 28,
    "rtx2080tix2-1node-pcie-noP2P-allreduce-autodl-anthonyhoo.txt": 28,
    "rtx2080tix2-1node-pcie-noP2P-alltoall-autodl-anthonyhoo.txt": 28,
    "rtx2080tix2-1node-pcie-noP2P-broadcast-autodl-anthonyhoo.txt": 28,
    "rtx2080tix2-1node-pcie-noP2P-reduce-autodl-anthonyhoo.txt": 28,
    "rtx6000dx8-2node-allreduce-cx8-ib-6kdreport.txt": 24,
    "v100x4-1node-4gpu-allreduce-abci-edr.txt": 24,
    "v100x4-2node-allreduce-abci-edr.txt": 24,
    "v100x4-4node-allreduce-abci-edr.txt": 24,
    "v100x4-8node-allreduce-abci-edr.txt": 24,
    "v100x8-1node-allreduce-dgx1hcm-2019blog.txt": 25,
}

# (first size, last size) in bytes, read off the files.
EXPECTED_SIZE_RANGE = {
    "a100x8-1node-allreduce-stas00.txt": (32768, 17179869184),
    "h100x8-2node-allreduce-awsp5-efa-awsome.txt": (8, 17179869184),
    "v100x8-1node-allreduce-dgx1hcm-2019blog.txt": (8, 134217728),
    "h200x8-1node-allreduce-torchbench-stas00.txt": (32768, 17179869184),
    "b200x8-2node-allgather-gcpa4-roce-clustertoolkit-gkea4.txt": (1024, 8589934592),
    "a100x8-1node-sendrecv-liplus.txt": (134217728, 1073741824),
    "b200x8-2node-alltoall-vultr-ib.txt": (0, 17179869184),
    "v100x4-8node-allreduce-abci-edr.txt": (4, 33554432),
}

# Rows of size 0 (collectives too small to split across ranks), per file.
EXPECTED_ZERO_SIZE_ROWS = {
    "a100x8-1node-allgather-superbench-azure.txt": 5,
    "b200x8-1node-allgather-vultr.txt": 4,
    "b200x8-1node-alltoall-vultr.txt": 4,
    "b200x8-1node-reducescatter-vultr.txt": 4,
    "b200x8-2node-allgather-vultr-ib.txt": 5,
    "b200x8-2node-alltoall-vultr-ib.txt": 5,
    "rtx2080tix2-1node-pcie-noP2P-allgather-autodl-anthonyhoo.txt": 2,
    "rtx2080tix2-1node-pcie-noP2P-alltoall-autodl-anthonyhoo.txt": 2,
}


def _manifest() -> list[dict[str, object]]:
    entries = yaml.safe_load((DATA_DIR / "manifest.yaml").read_text())
    assert isinstance(entries, list)
    return entries


def _parse(file: str) -> NcclLog:
    entry = next(e for e in _manifest() if e["file"] == file)
    fmt = entry.get("format")
    return parse_log((DATA_DIR / file).read_text(), file, fmt if isinstance(fmt, str) else None)


def _row(log: NcclLog, size: int) -> NcclRow:
    return next(r for r in log.rows if r.size_bytes == size)


def test_expected_counts_cover_exactly_the_manifest_and_the_folder() -> None:
    """The hand-counted table names every manifest entry, and the manifest every .txt in the folder."""
    files = {str(e["file"]) for e in _manifest()}
    assert files == set(EXPECTED_ROWS)
    assert files == {p.name for p in DATA_DIR.glob("*.txt")}


@pytest.mark.parametrize("file", sorted(EXPECTED_ROWS))
def test_shared_log_parses_with_hand_counted_rows(file: str) -> None:
    """Each published log parses in its manifest format and yields exactly the hand-counted rows."""
    log = _parse(file)
    assert len(log.rows) == EXPECTED_ROWS[file]
    assert log.source == file


@pytest.mark.parametrize("file", sorted(EXPECTED_ROWS))
def test_shared_log_collective_matches_manifest(file: str) -> None:
    """The collective the log names agrees with the manifest; one log never names it (gj-aion default)."""
    entry = next(e for e in _manifest() if e["file"] == file)
    expected = (
        None
        if file == "h100x8-2node-allreduce-ib400-default-gjaion-nccltests309.txt"
        else entry["collective"]
    )
    assert _parse(file).collective == expected


@pytest.mark.parametrize("file", sorted(EXPECTED_SIZE_RANGE))
def test_first_and_last_sizes(file: str) -> None:
    """First and last row sizes are the ones printed in the file."""
    log = _parse(file)
    assert (log.rows[0].size_bytes, log.rows[-1].size_bytes) == EXPECTED_SIZE_RANGE[file]


@pytest.mark.parametrize("file", sorted(EXPECTED_ROWS))
def test_zero_size_rows_are_kept(file: str) -> None:
    """Rows of size 0 are kept (callers exclude them from error figures), exactly as many as published."""
    log = _parse(file)
    assert sum(1 for r in log.rows if r.size_bytes == 0) == EXPECTED_ZERO_SIZE_ROWS.get(file, 0)


def test_prefixed_log_row_values() -> None:
    """`0:`-prefixed AWS log, line 32: 1 MiB all_reduce, 309.4 us out-of-place, 307.3 us in-place."""
    row = _row(_parse("a100x8-2node-allreduce-awsp4de-efa-awsome.txt"), 1048576)
    assert row == NcclRow(1048576, 262144, "float", "sum", -1, 309.4, 3.39, 6.35, 307.3, 3.41, 6.40, 32)


def test_trimmed_log_reads_underscored_sizes_and_one_column_set() -> None:
    """stas00's trimmed table: size `1048_576` on line 20 is 1 MiB; no count/type and no in-place set."""
    row = _row(_parse("a100x8-1node-allreduce-stas00.txt"), 1048576)
    assert row == NcclRow(1048576, None, None, None, None, 101.9, 10.29, 18.00, None, None, None, 20)


def test_torch_bench_time_is_size_over_algbw() -> None:
    """PyTorch table line 20 `| 1MiB | 39.93GBps | 22.82GBps |`: time = 1 MiB / 22.82 GB/s."""
    log = _parse("h200x8-1node-allreduce-torchbench-stas00.txt")
    row = _row(log, 1048576)
    assert (row.busbw_GBps, row.algbw_GBps, row.line_no) == (39.93, 22.82, 20)
    assert row.time_us == pytest.approx(1048576 / 22.82e3, rel=1e-12)
    assert (log.collective, log.nccl_version) == ("all_reduce", "2.27.7")


def test_old_layout_without_redop_and_na_error_column() -> None:
    """Superbench all_gather (11 columns, `error` N/A), line 61: 4 GiB in 17016 us; no redop/root."""
    log = _parse("a100x8-1node-allgather-superbench-azure.txt")
    row = _row(log, 4294967296)
    assert row == NcclRow(
        4294967296, 134217728, "float", None, None, 17016.0, 252.40, 220.85, 16474.0, 260.71, 228.12, 61
    )
    assert (log.nranks, log.hosts, log.devices) == (8, ("sb-validation-scus-000001",), ("A100-SXM4-40GB",))


def test_2019_layout_row() -> None:
    """2019 blog (nccl-tests-old): line 38, 128 MiB all_reduce in 1818.8 us, redop sum, no root column."""
    row = _row(_parse("v100x8-1node-allreduce-dgx1hcm-2019blog.txt"), 134217728)
    assert row == NcclRow(
        134217728, 33554432, "float", "sum", None, 1818.8, 73.80, 129.14, 1821.9, 73.67, 128.92, 38
    )


def test_single_size_log() -> None:
    """OCI single-size run: one 10 GiB row (line 18), NCCL 2.26.5 from the header, avg busbw 232.167."""
    log = _parse("a100x8-1node-allreduce-10G-ocitutorials-ubuntu.txt")
    assert log.rows == (
        NcclRow(
            10737418240, 2684354560, "float", "sum", -1, 80922.0, 132.69, 232.20, 80948.0, 132.65, 232.13, 18
        ),
    )
    assert (log.nccl_version, log.avg_busbw_GBps) == ("2.26.5", 232.167)


def test_log_without_hash_marks_and_with_wrong_header() -> None:
    """dstack B200 log (no `#`, header says `wrong`): first row line 15, avg 165.789 from the footer."""
    log = _parse("b200x8-2node-allreduce-gcpa4-roce-dstack.txt")
    assert log.rows[0] == NcclRow(
        8388608, 2097152, "float", "sum", -1, 156.9, 53.47, 100.25, 167.6, 50.06, 93.86, 15
    )
    assert log.avg_busbw_GBps == 165.789


def test_na_in_place_wrong_column_and_sendrecv_busbw() -> None:
    """sendrecv line 18: in-place #wrong is N/A; busbw equals algbw (factor 1)."""
    row = _row(_parse("a100x8-1node-sendrecv-liplus.txt"), 536870912)
    assert row == NcclRow(
        536870912, 134217728, "float", "sum", -1, 2785.4, 192.75, 192.75, 2772.2, 193.66, 193.66, 18
    )


def test_abridged_device_list_gives_rank_count_hosts_and_version() -> None:
    """GB200 NVL72 shows only `Rank 71`: 72 ranks, one host named, NCCL 2.26.2 from the header."""
    log = _parse("gb200x4-18node-nvl72-1rack-allreduce-largesizes-coreweave.txt")
    assert (log.nranks, log.hosts, log.devices) == (72, ("slurm-gb200-207-171",), ("NVIDIA Graphics Device",))
    assert (log.nccl_version, log.avg_busbw_GBps) == ("2.26.2", 745.53)


def test_nccl_version_line_in_output() -> None:
    """XE9680 log: `NCCL version 2.26.2+cuda12.8` output line; 16 ranks on two hosts."""
    log = _parse("h100x8-2node-allreduce-ib400-xe9680-nccltests309.txt")
    assert log.nccl_version == "2.26.2+cuda12.8"
    assert (log.nranks, log.hosts, log.devices) == (
        16,
        ("bm-h100-01", "bm-h100-02"),
        ("NVIDIA H100 80GB HBM3",),
    )


def test_ucx_warnings_before_the_table_are_skipped() -> None:
    """ABCI V100 8-node log: 32 UCX warning lines, 32 ranks on 8 hosts, NCCL 2.8.4-1 from the header."""
    log = _parse("v100x4-8node-allreduce-abci-edr.txt")
    assert (log.nranks, len(log.hosts), log.nccl_version) == (32, 8, "2.8.4-1")
    assert (log.rows[0].line_no, log.rows[0].time_us) == (84, 41.36)


@pytest.mark.parametrize("file", sorted(EXPECTED_ROWS))
def test_shared_log_round_trips_through_the_table_writer(file: str) -> None:
    """format_nccl_tests_table (exact numbers) then parse_nccl_tests gives back the same rows."""
    log = _parse(file)
    entry = next(e for e in _manifest() if e["file"] == file)
    text = format_nccl_tests_table(log.rows, str(entry["collective"]), decimals=None)
    again = parse_nccl_tests(text, "again")
    assert [dataclasses.replace(r, line_no=0) for r in again.rows] == [
        dataclasses.replace(r, line_no=0) for r in log.rows
    ]
    assert again.collective == entry["collective"]


@pytest.mark.parametrize("file", sorted(f for f in EXPECTED_ROWS if "torchbench" not in f))
def test_published_numbers_survive_two_decimal_tables(file: str) -> None:
    """Published nccl-tests values have at most 2 decimals, so the default table round-trips exactly."""
    log = _parse(file)
    again = parse_nccl_tests(format_nccl_tests_table(log.rows, "all_reduce"), "again")
    assert [dataclasses.replace(r, line_no=0) for r in again.rows] == [
        dataclasses.replace(r, line_no=0) for r in log.rows
    ]
