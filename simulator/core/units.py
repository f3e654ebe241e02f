"""Unit conversions, in one place.

Conventions: bandwidths inside the simulator are bytes per second (`_Bps`); datasheets quote
network links in gigabits per second (`_gbps`, 1e9 bit/s) and NVLink/PCIe in gigabytes per second
(`_GBps`, 1e9 B/s). nccl-tests prints time in microseconds and algbw/busbw in GB/s (1e9 B/s).
"""

from __future__ import annotations

import math

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


def parse_size(text: str) -> int:
    """Parse a byte size as nccl-tests' -b/-e flags take it: '8', '64K', '1M', '8G' (powers of 1024).

    Raises ValueError with the offending text on anything else (negative, empty, unknown suffix, not finite
    or beyond 2**63-1 bytes: inf, 1e400, 1e30).
    """
    raw = text.strip()
    suffixes = {"": 1, "K": KIB, "M": MIB, "G": GIB, "T": 1024**4}
    body, unit = raw, ""
    if raw and raw[-1].upper() in "KMGT":
        body, unit = raw[:-1], raw[-1].upper()
    try:
        value = float(body)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (expected e.g. 8, 64K, 1M, 8G)") from None
    if value < 0:
        raise ValueError(f"size must not be negative: {text!r}")
    size = value * suffixes[unit]
    if not math.isfinite(size) or size > MAX_INT:  # float('inf'), float('1e400') and NaN parse
        raise ValueError(f"size out of range: {text!r} (at most 2**63-1 bytes, e.g. 8G)")
    return int(size)
