"""Layouts publishers print that the parser reads as they are: nccl-tests' pre-2019 header (milliseconds), tables of
several data types, Ray's line prefix, report tables with KB/MB units and thousands separators, a debug print before
the first row, and runs whose check failed (read, with a warning)."""

from __future__ import annotations

import warnings

import pytest

from simulator.core.errors import LogParseError
from simulator.measurements.nccl_tests import parse_log

# nccl-tests before March 2019 (v1.0.0) and NCCL 1.x's all_reduce_test: times in ms (common.cu: deltaSec * 1.0E3)
OLD_MS = """\
#                                                 out-of-place                    in-place
#      bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw      res
     1048576        262144   float     sum    0.120   8.74  15.29    5e-07    0.118   8.89  15.55    5e-07
     2097152        524288   float     sum    0.210   9.99  17.48    5e-07    0.205  10.23  17.90    5e-07
"""


def test_the_pre_2019_header_means_milliseconds() -> None:
    """1 MiB in 0.120 ms: 120 us (and 1,048,576 B / 120 us = 8.74 GB/s, the algbw printed beside it)."""
    log = parse_log(OLD_MS, "old.log")
    assert [(row.size_bytes, row.time_us, row.inplace_time_us) for row in log.rows] == [
        (1048576, pytest.approx(120.0), pytest.approx(118.0)), (2097152, pytest.approx(210.0), pytest.approx(205.0))]
    assert log.rows[0].size_bytes / (log.rows[0].time_us * 1e3) == pytest.approx(log.rows[0].algbw_GBps, rel=0.01)


def test_a_table_of_every_data_type_keeps_float_sum() -> None:
    """nccl-tests -d all prints each size once per type: the float rows are kept (its default), with a warning."""
    rows = "\n".join(f"  {size}  {size // 4}  {dtype}  sum  -1  {t}  1.00  1.75  0  {t}  1.00  1.75  0"
                     for size, t in ((1024, 20.5), (2048, 21.5)) for dtype in ("int8", "float", "bfloat16"))
    text = "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n" + rows + "\n"
    with pytest.warns(UserWarning, match=r"3 data type\(s\) \(int8, float, bfloat16\).*taken: the 2 rows of float"):
        log = parse_log(text, "all.log")
    assert [(row.size_bytes, row.dtype) for row in log.rows] == [(1024, "float"), (2048, "float")]


def test_ray_worker_prefixes_are_stripped() -> None:
    """SkyPilot / Ray put `(head, rank=0, pid=3808) ` before each line, here before Open MPI's tag."""
    text = ("(head, rank=0, pid=3808) [1,0]<stdout>:#  size count type redop root time algbw busbw #wrong"
            " time algbw busbw #wrong\n"
            "(head, rank=0, pid=3808) [1,0]<stdout>:  1024  256  float  sum  -1  28.39  0.04  0.07  0"
            "  28.07  0.04  0.07  0\n"
            "(worker1, rank=1, pid=2211, ip=10.0.0.2) [1,0]<stdout>:  2048  512  float  sum  -1  29.10  0.07  0.13  0"
            "  29.00  0.07  0.13  0\n")
    assert [row.time_us for row in parse_log(text, "ray.log").rows] == [28.39, 29.10]


def test_report_tables_with_decimal_unit_names_and_thousands_separators() -> None:
    """`1 MB` is 1,048,576 bytes (nccl-tests' own -b / -e suffixes are 1024-based), `2,169.8` is 2169.8, and a
    `Time (ms)` column under a `Message size` header is milliseconds."""
    us = "| Size | Time (us) | algBW (GB/s) | busBW (GB/s) |\n|---|---|---|---|\n| 1 MB | 2,169.8 | 0.48 | 0.96 |\n"
    row = parse_log(us, "report.md").rows[0]
    assert (row.size_bytes, row.time_us) == (1048576, 2169.8)
    ms = ("| Message size | Time (ms) | algbw (GB/s) | busbw (GB/s) | Errors |\n|---:|---:|---:|---:|---:|\n"
          "| 1 GB | 46.5 | 23.10 | 40.43 | 0 |\n")
    row = parse_log(ms, "writeup.md").rows[0]
    assert (row.size_bytes, row.time_us) == (1 << 30, pytest.approx(46500.0))
    assert row.size_bytes / (row.time_us * 1e3) == pytest.approx(23.10, rel=0.01)


def test_a_debug_print_before_the_first_row_is_passed_over_but_not_between_rows() -> None:
    header = "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
    row_a = "  1024  256  float  sum  -1  28.39  0.04  0.07  0  28.07  0.04  0.07  0\n"
    row_b = "  2048  512  float  sum  -1  29.10  0.07  0.13  0  29.00  0.07  0.13  0\n"
    assert len(parse_log(header + "AllReduceRunColl\n" + row_a + row_b, "dbg.log").rows) == 2
    with pytest.raises(LogParseError, match="unexpected text 'AllReduceRunColl' among the data rows"):
        parse_log(header + row_a + "AllReduceRunColl\n" + row_b, "dbg.log")


@pytest.mark.parametrize(("wrong", "footer", "warned"), [
    ("0", "# Out of bounds values : 0 OK", False),
    ("96", "# Out of bounds values : 4 FAILED", True),
    ("0", "# Out of bounds values : 4 FAILED", True),
    ("N/A", "", False),
])
def test_a_failed_check_is_read_with_a_warning(wrong: str, footer: str, warned: bool) -> None:
    """nccl-tests' #wrong and its footer say the run computed wrong values: the rows are read, and said to be
    suspect; the older `error` / `res` columns (a maximum relative error like 5e-07) are not counts."""
    text = ("#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
            f"  1048576  262144  float  sum  -1  100.0  10.49  18.35  {wrong}  99.0  10.59  18.54  {wrong}\n{footer}\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(parse_log(text, "chk.log").rows) == 1
    assert any("check failed" in str(w.message) for w in caught) is warned
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parse_log(OLD_MS, "old.log")
    assert not caught


def test_rows_that_go_back_in_size_start_another_run() -> None:
    """Two processes' rows interleaved (nccl-tests without MPI=1 under mpirun, no header between them): the sweep
    going back to 8 bytes is a second run, and a file of several runs names the cause instead of mixing them."""
    row = "  {}  {}  float  sum  -1  {}  0.00  0.00  0  {}  0.00  0.00  0"
    text = "\n".join(row.format(size, size // 4, t, t) for size, t in ((8, 40.6), (16, 49.7), (8, 46.8), (32, 47.3)))
    with pytest.raises(LogParseError, match=r"result tables .*rows may interleave.*'run:' field \(1-2\)"):
        parse_log(text + "\n", "mixed.log")
    assert [r.size_bytes for r in parse_log(text + "\n", "mixed.log", run=2).rows] == [8, 32]


def test_nccl_log_lines_glued_after_mpich_rank_labels() -> None:
    """MPICH labels each line `[0] `, and nccl-tests 2.13+ writes a row in parts with NCCL's INFO lines glued to
    each part, after the label (NVIDIA/nccl issue 1453): the row is put back together."""
    info = "[0] h100clust-worker-1:497888:497888 [0] NCCL INFO 128 Bytes -> Algo 0 proto 0 time 25.214764"
    text = "\n".join([
        "[0] #  size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
        "[0]          128            32     float     sum      -1" + info,
        info,
        "[0]     61.58    0.00    0.00      0" + info,
        "[0]     60.90    0.00    0.00      0",
    ]) + "\n"
    row = parse_log(text, "mpich.log").rows[0]
    assert (row.size_bytes, row.time_us, row.inplace_time_us) == (128, 61.58, 60.90)


def test_a_report_of_several_tables_asks_for_one() -> None:
    """A Markdown report with a table per collective and algorithm (`### all_reduce / ring`, `### all_reduce /
    nvls`, ...) is not mistaken for mpirun's independent runs: the message says it is a report, and `run:` takes one."""
    table = "| Size | Time (us) | algBW (GB/s) | busBW (GB/s) |\n|---|---|---|---|\n| 1 MB | {} | 0.48 | 0.96 |\n"
    text = "### all_reduce / ring\n\n" + table.format("2,169.8") + "\n### all_reduce / nvls\n\n" + table.format("265.8")
    with pytest.raises(LogParseError, match=r"2 result tables .*a report of several tables.*'run:' field \(1-2\)"):
        parse_log(text, "report.md")
    assert parse_log(text, "report.md", run=2).rows[0].time_us == 265.8


def test_a_row_cut_short_by_its_publisher_is_left_out() -> None:
    """A blog's copy ends with a row truncated to `... 33.53     ...`: the rows before it are read, with a warning."""
    text = OLD_MS + "     4194304   1048576   float   sum   0.390  10.75  18.82   5e-07   0.388  10.81     ...\n"
    with pytest.warns(UserWarning, match="cut short"):
        log = parse_log(text, "blog.log")
    assert [row.size_bytes for row in log.rows] == [1048576, 2097152]
