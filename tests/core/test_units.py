"""One parser each for counts, byte sizes and link speeds (simulator.core.units): the values people write
and what they mean."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.core.units import parse_bytes, parse_count, parse_gbps


@pytest.mark.parametrize(("text", "count"), [
    ("512", 512), ("4K", 4_000), ("4M", 4_000_000), ("4m", 4_000_000), ("15T", 15 * 10**12),
    ("300B", 300 * 10**9), ("1.5e6", 1_500_000), ("2.5K", 2_500), ("4Mi", 4 * 2**20), ("1Ki", 1024), (96, 96)])
def test_counts_take_decimal_suffixes_and_binary_ones_when_asked(text, count):
    """K, M, G/B, T, P are powers of 1000 (a count of tokens or sequences); Ki, Mi, Gi powers of 1024."""
    assert parse_count(text) == count


@pytest.mark.parametrize("text", ["4X", "1.5", "2.0001K", "-3", "", "M", "inf", "nan", "1e30", "4 M B"])
def test_bad_counts_are_refused_with_the_valid_forms(text):
    with pytest.raises(ValueError, match="4K|negative|range|whole"):
        parse_count(text)


def test_a_boolean_is_not_a_count():
    with pytest.raises(ValueError, match="4K"):
        parse_count(True)


@pytest.mark.parametrize(("text", "size"), [
    ("25MB", 25_000_000), ("25MiB", 25 * 2**20), ("25M", 25 * 2**20), ("25 MiB", 25 * 2**20), ("64K", 65_536),
    ("1GB", 10**9), ("1GiB", 2**30), ("8", 8), ("8B", 8), ("1.5KiB", 1536), ("2kb", 2_000)])
def test_byte_sizes_say_which_thousand(text, size):
    """MB is 10**6 bytes, MiB 2**20; a bare M is 2**20 as nccl-tests' -b and PyTorch's bucket_cap_mb read it."""
    assert parse_bytes(text) == size


def test_pytorch_default_bucket_is_25_mib():
    """DDP's bucket_cap_mb=25 is int(25 * 1024 * 1024) bytes (torch/nn/parallel/distributed.py): 26,214,400."""
    assert parse_bytes("25MiB") == parse_bytes("25M") == 26_214_400


@pytest.mark.parametrize("text", ["25XB", "-1MB", "25Mbit", "1e30", "inf"])
def test_bad_byte_sizes_are_refused(text):
    with pytest.raises(ValueError, match="bytes|negative|range"):
        parse_bytes(text)


@pytest.mark.parametrize(("text", "gbps"), [
    ("400", 400.0), ("400G", 400.0), ("400Gbps", 400.0), ("400Gb/s", 400.0), ("400 Gbit/s", 400.0),
    ("50GB/s", 400.0), ("50GBps", 400.0), ("800M", 0.8), ("1.6T", 1600.0), ("1.6Tbps", 1600.0), (200, 200.0)])
def test_link_speeds_in_gigabits(text, gbps):
    """A bare number or G is Gbit/s (a '400G' NIC); B is bytes: 50 GB/s = 400 Gbit/s."""
    assert parse_gbps(text) == pytest.approx(gbps)


@pytest.mark.parametrize("text", ["400X", "50B", "0G", "-400G", "400GBits", "fast"])
def test_bad_link_speeds_are_refused(text):
    """The case of b and B matters (bits or bytes), so a unit spelled otherwise is refused, not guessed."""
    with pytest.raises(ValueError, match="400G"):
        parse_gbps(text)


@given(st.integers(min_value=0, max_value=10**12))
def test_a_count_reads_back_whatever_its_suffix(n):
    """n, n/1000 K and n/10**6 M (where whole) are the same count."""
    assert parse_count(str(n)) == n
    if n % 1000 == 0:
        assert parse_count(f"{n // 1000}K") == n


@given(st.integers(min_value=0, max_value=2**40))
def test_mib_and_bytes_agree(n):
    assert parse_bytes(f"{n}MiB") == n * 2**20 and parse_bytes(f"{n}MB") == n * 10**6
