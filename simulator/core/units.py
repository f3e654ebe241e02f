"""Unit conversions, in one place.

Conventions: bandwidths inside the simulator are bytes per second (`_Bps`); datasheets quote
network links in gigabits per second (`_gbps`, 1e9 bit/s) and NVLink/PCIe in gigabytes per second
(`_GBps`, 1e9 B/s). nccl-tests prints time in microseconds and algbw/busbw in GB/s (1e9 B/s).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from fractions import Fraction

from simulator.core.input_file import MAX_INT

KIB = 1024
MIB = 1024**2
GIB = 1024**3

US = 1e-6  # seconds per microsecond


def gbps_to_Bps(gbps: float) -> float:
    """Gigabits per second (network datasheets) to bytes per second."""
    return gbps * 1e9 / 8.0


def GBps_to_Bps(GBps: float) -> float:
    """Gigabytes per second (NVLink, PCIe, HBM datasheets; nccl-tests columns) to bytes per second."""
    return GBps * 1e9


def Bps_to_GBps(Bps: float) -> float:
    """Bytes per second to gigabytes per second (1e9 B/s, as nccl-tests prints)."""
    return Bps / 1e9


def s_to_us(seconds: float) -> float:
    """Seconds to microseconds."""
    return seconds / US


def us_to_s(us: float) -> float:
    """Microseconds to seconds."""
    return us * US


# What people write for sizes, counts and speeds. One parser for each kind, used by every flag and every
# input-file field that takes one; each raises ValueError saying what it got and which forms are valid (the
# CLI and the specs put the flag or field name in front).
_QUANTITY = re.compile(r"\s*([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z/]*)\s*")

# counts (sequences, tokens): decimal, as token counts are quoted ("15T tokens", "300B"); B = billion; Ki, Mi,
# Gi for the powers of two a batch in tokens often is (4Mi = 1,024 sequences of 4,096 tokens)
COUNT_SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "B": 10**9, "T": 10**12, "P": 10**15,
                  "KI": 2**10, "MI": 2**20, "GI": 2**30}
COUNT_FORMS = "a whole number such as 512, 4K, 4M, 15T, 1.5e6 (powers of 1000) or 4Mi (powers of 1024)"

# bytes: KB/MB/GB/TB are powers of 1000 and KiB/MiB/GiB/TiB powers of 1024; a bare K/M/G/T is a power of
# 1024, as nccl-tests reads -b/-e and as PyTorch reads DDP's bucket_cap_mb=25 (25 * 1024 * 1024 bytes,
# torch/nn/parallel/distributed.py)
BYTE_UNITS = {"": 1, "B": 1, "K": KIB, "M": MIB, "G": GIB, "T": 1024**4,
              "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
              "KIB": KIB, "MIB": MIB, "GIB": GIB, "TIB": 1024**4}
BYTE_FORMS = "bytes such as 26214400, 25MB (25e6), 25MiB or 25M (25 x 2**20)"

# link speeds in Gbit/s: a bare number or G is Gbit/s (a "400G" NIC); b/bit is bits, B is bytes (x 8)
_BANDWIDTH_GBPS = {"": 1.0, "G": 1.0, "M": 1e-3, "T": 1e3}
BANDWIDTH_FORMS = "a link speed such as 400 (Gbit/s), 400G, 400Gbps, 400Gb/s or 50GB/s"


def _quantity(value: object, forms: str) -> tuple[Fraction | float, str]:
    """(number, unit text) from a number or a string such as '4M' or '50 GB/s'; ValueError otherwise. The
    number is exact (a Fraction: 576460752305MiB is every byte of it); 'inf' and 'nan' come back as floats,
    for the callers to refuse as out of range."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected {forms}, got {value!r}")
    if not isinstance(value, str):
        return (Fraction(value) if math.isfinite(value) else value), ""
    match = _QUANTITY.fullmatch(value)
    if match is not None:
        return Fraction(match.group(1)), match.group(2)
    try:
        return float(value), ""  # 'inf', 'nan'
    except ValueError:
        raise ValueError(f"expected {forms}, got {value!r}") from None


def _in_range(amount: Fraction | float) -> bool:
    """Finite and at most 2**63-1 in size."""
    if isinstance(amount, float):
        return math.isfinite(amount) and abs(amount) <= MAX_INT
    return abs(amount) <= MAX_INT


def _whole(amount: Fraction | float, value: object, forms: str) -> int:
    if not _in_range(amount):
        raise ValueError(f"out of range: {value!r} (expected {forms}, at most 2**63-1)")
    if amount != int(amount):
        raise ValueError(f"not a whole number: {value!r} (expected {forms})")
    return int(amount)


def parse_count(value: object) -> int:
    """A count with an optional decimal suffix: 512, '4K', '4M' (4,000,000), '15T', '1.5e6' -> int.
    ValueError on a fraction, a negative count, an unknown suffix or a value past 2**63-1."""
    number, unit = _quantity(value, COUNT_FORMS)
    if unit.upper() not in COUNT_SUFFIXES:
        raise ValueError(f"unknown suffix {unit!r} in {value!r} (expected {COUNT_FORMS})")
    count = _whole(number * COUNT_SUFFIXES[unit.upper()], value, COUNT_FORMS)
    if count < 0:
        raise ValueError(f"must not be negative: {value!r}")
    return count


def binary_count_text(text: str) -> str | None:
    """The count `text` with its decimal suffix read as a power of 1024 ('4M' -> '4Mi': papers write a batch of
    4 x 2**20 tokens as "4M"); None when it has no K, M or G suffix."""
    text = text.strip()
    return f"{text[:-1]}{text[-1].upper()}i" if text[-1:].upper() in ("K", "M", "G") else None


def parse_bytes(value: object) -> int:
    """A byte size: 26214400, '25MB' (25e6), '25MiB' or '25M' (25 x 2**20), '64K', '8G' -> int.
    ValueError on a negative size, an unknown unit or a size past 2**63-1 bytes."""
    number, unit = _quantity(value, BYTE_FORMS)
    if unit.upper() not in BYTE_UNITS:
        raise ValueError(f"unknown unit {unit!r} in {value!r} (expected {BYTE_FORMS})")
    if number < 0:
        raise ValueError(f"size must not be negative: {value!r}")
    size = number * BYTE_UNITS[unit.upper()]
    if not _in_range(size):  # inf, nan, 1e400
        raise ValueError(f"size out of range: {value!r} (at most 2**63-1 bytes, e.g. 8G)")
    return int(size)


def parse_gbps(value: object) -> float:
    """A link speed in Gbit/s: 400, '400G', '400Gbps', '400 Gb/s', '400Gbit/s', '50GB/s', '50GBps' (x 8),
    '800M' ... -> float Gbit/s. ValueError on anything else (the case of b/B matters: bits or bytes)."""
    number, unit = _quantity(value, BANDWIDTH_FORMS)
    prefix, rest = (unit[:1].upper(), unit[1:]) if unit[:1].upper() in _BANDWIDTH_GBPS else ("", unit)
    per_byte = {"": 1.0, "b": 1.0, "bps": 1.0, "b/s": 1.0, "bit/s": 1.0, "B/s": 8.0, "Bps": 8.0}
    if (prefix == "" and rest != "") or rest not in per_byte:
        raise ValueError(f"unknown unit {unit!r} in {value!r} (expected {BANDWIDTH_FORMS})")
    gbps = float(number) * _BANDWIDTH_GBPS[prefix] * per_byte[rest] if _in_range(number) else math.nan
    if not 0 < gbps < math.inf:
        raise ValueError(f"expected {BANDWIDTH_FORMS} (more than 0), got {value!r}")
    return gbps


def from_text(parser: Callable[[object], object]) -> Callable[[object], object]:
    """For a spec field's BeforeValidator: text ('25MiB', '400G') goes through `parser`; a number or anything
    else is left to the field's own type check."""
    return lambda value: parser(value) if isinstance(value, str) else value


def parse_size(text: str) -> int:
    """Parse a byte size as nccl-tests' -b/-e flags take it: '8', '64K', '1M', '8G' (powers of 1024), or
    with an explicit unit ('1MB', '1MiB'). Raises ValueError with the offending text on anything else."""
    return parse_bytes(text)
