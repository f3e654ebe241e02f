"""Readable logarithmic axes for plotly figures: ticks placed and labelled by us, not by plotly's log
axis, whose minor labels ("2", "5" between decades, "100k" beside "2") run into each other.

- log_axis: 1-2-5 ticks per decade over the data, labelled with SI prefixes ("200k", "1.5M").
- bytes_log_axis: power-of-two sizes, one tick every 2^k with k of 1, 2, 5, 10, ... chosen so that at
  most MAX_TICKS show, labelled in binary units ("1 KiB", "32 MiB", "1 GiB").
- count_log_axis: a tick at each given count (node counts, usually powers of two), thinned to MAX_TICKS.

Each returns a plotly axis dict (type, range, tickvals, ticktext, title) for `update_layout(xaxis=...)`
or `fig.update_xaxes(**axis)`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

T = TypeVar("T", int, float)

MAX_TICKS = 10
SI_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def si_text(value: float) -> str:
    """200000 -> '200k', 1500000 -> '1.5M', 0.05 -> '0.05' (three significant digits at most)."""
    for scale, prefix in SI_PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.3g}{prefix}"
    return f"{value:.3g}"


def bytes_text(size_bytes: float) -> str:
    """1024 -> '1 KiB', 3 * 2**20 -> '3 MiB', 512 -> '512 B'."""
    unit = 0
    while abs(size_bytes) >= 1024 and unit < len(BINARY_UNITS) - 1:
        size_bytes /= 1024
        unit += 1
    return f"{size_bytes:.3g} {BINARY_UNITS[unit]}"


def _positive(values: Iterable[float], what: str) -> tuple[float, float]:
    finite = [v for v in values if v > 0 and math.isfinite(v)]
    if not finite:
        raise ValueError(f"a log axis of {what} needs at least one finite value > 0")
    return min(finite), max(finite)


def _padded_range(low: float, high: float) -> list[float]:
    """The axis range (log10 units) with 5% of its span, at least 0.05 decade, either side."""
    lo, hi = math.log10(low), math.log10(high)
    pad = max(0.05, 0.05 * (hi - lo))
    return [lo - pad, hi + pad]


def _thin(ticks: Sequence[T]) -> list[T]:
    """Every k-th tick, the smallest k leaving at most MAX_TICKS."""
    step = max(1, -(-len(ticks) // MAX_TICKS))
    return list(ticks[::step])


def _or_ends(ticks: list[float], low: float, high: float) -> list[float]:
    """`ticks`, or where fewer than two fall on a narrow axis, the data's ends to two significant digits."""
    return ticks if len(ticks) >= 2 else sorted({float(f"{low:.2g}"), float(f"{high:.2g}")})


def log_axis(values: Iterable[float], title: str) -> dict[str, Any]:
    """A log axis over `values` with ticks at 1, 2 and 5 x 10^k (only at 10^k over more than four decades)."""
    low, high = _positive(values, title)
    span = _padded_range(low, high)
    mantissas = (1,) if span[1] - span[0] > 4 else (1, 2, 5)
    ticks = [m * 10.0**e for e in range(math.floor(span[0]), math.ceil(span[1]) + 1) for m in mantissas
             if span[0] <= math.log10(m * 10.0**e) <= span[1]]
    ticks = _or_ends(_thin(ticks), low, high)
    return {"type": "log", "title": title, "range": span, "tickvals": ticks, "ticktext": [si_text(t) for t in ticks]}


def bytes_log_axis(sizes: Iterable[float], title: str = "size") -> dict[str, Any]:
    """A log axis over byte sizes with ticks at powers of two, labelled in KiB, MiB, GiB."""
    low, high = _positive(sizes, title)
    span = _padded_range(low, high)
    exponents = list(range(math.ceil(span[0] / math.log10(2)), math.floor(span[1] / math.log10(2)) + 1))
    ticks = _or_ends([2.0**e for e in _thin_exponents(exponents)], low, high)
    return {"type": "log", "title": title, "range": span, "tickvals": ticks, "ticktext": [bytes_text(t) for t in ticks]}


def _thin_exponents(exponents: list[int]) -> list[int]:
    """Powers of two kept at the smallest stride of 1, 2, 5, 10, 20, ... (in exponents, so every 2x, 4x, 32x,
    1024x ...) that leaves at most MAX_TICKS, on multiples of the stride: the strides divide 10, so 1 KiB,
    1 MiB and 1 GiB stay among them."""
    stride = 1
    while len([e for e in exponents if e % stride == 0]) > MAX_TICKS:
        stride = {1: 2, 2: 5, 5: 10}.get(stride, stride + 10)
    return [e for e in exponents if e % stride == 0] or exponents[:1]


def count_log_axis(counts: Iterable[int], title: str) -> dict[str, Any]:
    """A log axis with a tick at each of `counts` (thinned to MAX_TICKS), labelled as plain integers."""
    ordered = sorted(set(counts))
    low, high = _positive(ordered, title)
    ticks = _thin(ordered)
    return {"type": "log", "title": title, "range": _padded_range(low, high), "tickvals": ticks,
            "ticktext": [f"{n:,}" for n in ticks]}
