"""format_nccl_tests_table: the table `clustersim collective` prints, and that the parser reads back."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.busbw import COLLECTIVES
from simulator.core.errors import ConfigError
from simulator.measurements.nccl_tests import NcclRow, parse_nccl_tests
from simulator.measurements.nccl_tests_format import format_nccl_tests_table

FIRST_ROW_LINE = 6

ROW = NcclRow(1048576, 262144, "float", "sum", -1, 71.93, 14.58, 27.33, 71.47, 14.67, 27.51, 30)


def test_table_text_for_one_row() -> None:
    """Header lines and one row in nccl-tests' column widths, with algo/proto columns appended."""
    text = format_nccl_tests_table([ROW], "all_reduce", algos=["ring"], protos=["simple"])
    lines = text.splitlines()
    assert lines[0] == "# Collective test starting: all_reduce_perf"
    assert lines[3].split() == [
        "#",
        "size",
        "count",
        "type",
        "redop",
        "root",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "algo",
        "proto",
    ]
    assert lines[5] == (
        "     1048576        262144     float     sum      -1    71.93   14.58   27.33     N/A"
        "    71.47   14.67   27.51     N/A      ring    simple"
    )
    assert len(lines) == FIRST_ROW_LINE


def test_in_place_columns_are_left_out_when_no_row_has_them() -> None:
    """Rows with no in-place values print one column set (9 columns)."""
    row = dataclasses.replace(ROW, inplace_time_us=None, inplace_algbw_GBps=None, inplace_busbw_GBps=None)
    last = format_nccl_tests_table([row], "all_gather").splitlines()[-1]
    assert last.split() == ["1048576", "262144", "float", "sum", "-1", "71.93", "14.58", "27.33", "N/A"]


def test_algo_proto_columns_round_trip() -> None:
    """The extra algo/proto columns do not disturb parsing: same row back, collective named."""
    log = parse_nccl_tests(format_nccl_tests_table([ROW], "broadcast", algos=["tree"], protos=["LL"]))
    assert log.rows == (dataclasses.replace(ROW, line_no=FIRST_ROW_LINE),)
    assert log.collective == "broadcast"


def test_unknown_collective_and_bad_extra_columns() -> None:
    """An unknown collective is a ConfigError; algos of the wrong length a ValueError."""
    with pytest.raises(ConfigError, match="unknown collective 'allreduce'"):
        format_nccl_tests_table([ROW], "allreduce")
    with pytest.raises(ValueError, match="one non-blank word per row"):
        format_nccl_tests_table([ROW], "all_reduce", algos=["ring", "tree"])


_values = st.floats(min_value=0.0, max_value=1e9, allow_nan=False, allow_infinity=False)
_times = st.floats(min_value=0.01, max_value=1e9, allow_nan=False, allow_infinity=False)  # data takes time
_maybe = st.none() | _values
_rows = st.builds(
    NcclRow,
    size_bytes=st.integers(min_value=0, max_value=2**44),
    count=st.none() | st.integers(min_value=0, max_value=2**42),
    dtype=st.none(),
    redop=st.none(),
    root=st.none() | st.integers(min_value=-1, max_value=127),
    time_us=_times,
    algbw_GBps=_maybe,
    busbw_GBps=_maybe,
    inplace_time_us=_maybe,
    inplace_algbw_GBps=_maybe,
    inplace_busbw_GBps=_maybe,
    line_no=st.just(0),
)


@given(rows=st.lists(_rows, min_size=1, max_size=20), collective=st.sampled_from(COLLECTIVES),
       dtype=st.none() | st.sampled_from(["float", "half", "bfloat16", "int8", "uint8", "double"]),
       redop=st.none() | st.sampled_from(["sum", "prod", "max", "min", "avg", "none"]))
def test_random_rows_round_trip_exactly(rows: list[NcclRow], collective: str, dtype: str | None,
                                        redop: str | None) -> None:
    """Any rows of one data type and op in size order (a run's sweep; one of several types is taken, and a smaller
    size starts another run: test_published_layouts), printed with exact numbers and parsed again, come back
    identical, one per line."""
    rows = sorted((dataclasses.replace(row, dtype=dtype, redop=redop) for row in rows), key=lambda r: r.size_bytes)
    log = parse_nccl_tests(format_nccl_tests_table(rows, collective, decimals=None), "prop")
    assert [dataclasses.replace(r, line_no=0) for r in log.rows] == rows
    assert [r.line_no for r in log.rows] == list(range(FIRST_ROW_LINE, FIRST_ROW_LINE + len(rows)))
    assert log.collective == collective


_centis = st.integers(min_value=0, max_value=10**10).map(lambda n: n / 100)


@given(times=st.lists(st.tuples(_centis.filter(lambda t: t > 0), _centis, _centis), min_size=1, max_size=10))
def test_two_decimal_values_round_trip_in_the_default_table(times: list[tuple[float, float, float]]) -> None:
    """Values with at most two decimals (as nccl-tests prints) survive the default 2-decimal table."""
    rows = [
        NcclRow(8 * (i + 1), 2, "float", "sum", -1, t, a, b, None, None, None, 0)
        for i, (t, a, b) in enumerate(times)
    ]
    log = parse_nccl_tests(format_nccl_tests_table(rows, "all_reduce"))
    assert [dataclasses.replace(r, line_no=0) for r in log.rows] == rows
