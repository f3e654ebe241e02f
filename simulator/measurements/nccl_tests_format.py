"""Writing rows as an nccl-tests result table (its column widths), which the parser reads back;
`clustersim collective` prints its predictions this way."""

from __future__ import annotations

import re
from collections.abc import Sequence

from simulator.collectives.busbw import COLLECTIVES
from simulator.core.errors import ConfigError
from simulator.measurements.nccl_tests import NcclRow


def _format_number(value: float | None, decimals: int | None) -> str:
    if value is None:
        return "N/A"
    if decimals is not None:
        return f"{value:.{decimals}f}"
    text = f"{value:.2f}"
    return text if float(text) == value else repr(value)


def format_nccl_tests_table(
    rows: Sequence[NcclRow],
    collective: str,
    *,
    algos: Sequence[str] | None = None,
    protos: Sequence[str] | None = None,
    decimals: int | None = 2,
) -> str:
    """Rows as an nccl-tests result table (its column widths), which parse_nccl_tests reads back.

    Five header lines (`# Collective test starting: <collective>_perf`, `#`, the out-of-place /
    in-place line, names, units), then one line per row from line 6; `#wrong` is N/A, missing values
    are N/A, and the in-place set is left out when no row has one. `algos`/`protos` add `algo` and
    `proto` columns. `decimals=None` prints each number exactly (2 decimals where that is exact).
    """
    if collective not in COLLECTIVES:
        raise ConfigError(f"unknown collective {collective!r}; expected one of {', '.join(COLLECTIVES)}")
    extras = [(name, list(col)) for name, col in (("algo", algos), ("proto", protos)) if col is not None]
    if any(len(col) != len(rows) or not all(re.fullmatch(r"\S+", v) for v in col) for _, col in extras):
        raise ValueError(f"algos and protos need one non-blank word per row ({len(rows)} rows)")
    inplace = any(
        value is not None
        for r in rows
        for value in (r.inplace_time_us, r.inplace_algbw_GBps, r.inplace_busbw_GBps)
    )
    sets = 2 if inplace else 1
    names = ["size", "count", "type", "redop", "root"] + ["time", "algbw", "busbw", "#wrong"] * sets
    units = ["(B)", "(elements)", "", "", ""] + ["(us)", "(GB/s)", "(GB/s)", ""] * sets
    widths = [12, 12, 8, 6, 6] + [7, 6, 6, 6] * sets + [8] * len(extras)
    names += [name for name, _ in extras]
    units += [""] * len(extras)

    def line(cells: Sequence[str], lead: str = "") -> str:
        first = lead + cells[0].rjust(widths[0] - len(lead))
        return "  ".join([first] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]).rstrip()

    set_width = sum(widths[5:9]) + 2 * 4
    group = "#" + " " * (sum(widths[:5]) + 2 * 5 - 1) + "out-of-place".center(set_width)
    group += "in-place".center(set_width) if inplace else ""
    out = [f"# Collective test starting: {collective}_perf", "#", group.rstrip()]
    out += [line(names, "# "), line(units, "# ")]
    for i, row in enumerate(rows):
        measured: list[float | None] = [row.time_us, row.algbw_GBps, row.busbw_GBps]
        if inplace:
            measured += [row.inplace_time_us, row.inplace_algbw_GBps, row.inplace_busbw_GBps]
        cells = [str(row.size_bytes)]
        cells += ["N/A" if v is None else str(v) for v in (row.count, row.dtype, row.redop, row.root)]
        for start in range(0, len(measured), 3):
            cells += [_format_number(v, decimals) for v in measured[start : start + 3]] + ["N/A"]
        cells += [column[i] for _, column in extras]
        out.append(line(cells))
    return "\n".join(out) + "\n"
