"""Readable log axes (simulator.report.axes): ticks we place and label ourselves."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.report.axes import MAX_TICKS, bytes_log_axis, bytes_text, count_log_axis, log_axis, si_text


@pytest.mark.parametrize(("value", "text"), [(200_000, "200k"), (1_500_000, "1.5M"), (2e9, "2G"), (0.05, "0.05"),
                                             (999, "999")])
def test_si_text(value, text):
    assert si_text(value) == text


@pytest.mark.parametrize(("size", "text"), [(512, "512 B"), (1024, "1 KiB"), (3 * 2**20, "3 MiB"), (2**30, "1 GiB")])
def test_bytes_text(size, text):
    assert bytes_text(size) == text


def test_bytes_axis_from_8_bytes_to_8_gib():
    """8 B to 8 GiB is 31 powers of two: every 5th (32x, on multiples of 5) keeps 1 KiB, 1 MiB and 1 GiB
    among at most 10 labelled ticks."""
    axis = bytes_log_axis([8, 2**33])
    assert axis["type"] == "log" and len(axis["tickvals"]) <= MAX_TICKS
    assert {"1 KiB", "1 MiB", "1 GiB"} <= set(axis["ticktext"])
    assert axis["ticktext"] == ["32 B", "1 KiB", "32 KiB", "1 MiB", "32 MiB", "1 GiB"]


def test_log_axis_ticks_one_two_five():
    """300k to 6M tokens/s: ticks 500k, 1M, 2M, 5M, each labelled in full."""
    axis = log_axis([3e5, 6e6], "tokens/s")
    assert axis["ticktext"] == ["500k", "1M", "2M", "5M"]


def test_count_axis_thins_to_max_ticks():
    """16 node counts 1..32768: every 2nd is labelled, with thousands separators."""
    axis = count_log_axis([2**k for k in range(16)], "nodes")
    assert axis["ticktext"][:3] == ["1", "4", "16"] and "16,384" in axis["ticktext"]
    assert axis["range"][1] > math.log10(2**15)


def test_log_axis_needs_a_positive_value():
    with pytest.raises(ValueError, match="needs at least one finite value > 0"):
        log_axis([0.0, -1.0], "tokens/s")


@given(st.floats(1e-3, 1e12), st.floats(1.0, 1e6))
def test_ticks_are_inside_the_range_and_few(low, ratio):
    """Whatever the data, every tick lies inside the axis range and at most MAX_TICKS are labelled."""
    for axis in (log_axis([low, low * ratio], "x"), bytes_log_axis([low, low * ratio])):
        lo, hi = axis["range"]
        assert len(axis["tickvals"]) <= MAX_TICKS
        assert all(lo - 1e-9 <= math.log10(t) <= hi + 1e-9 for t in axis["tickvals"])
        assert len(axis["ticktext"]) == len(axis["tickvals"])
