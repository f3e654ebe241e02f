"""nccl-tests logs in, rows out; and rows back out as an nccl-tests table.

Owns the row and log records, the stdout parser (every `*_perf` tool, and the PyTorch benchmark
table), the `-J` JSON parser (document walking in nccl_tests_json), the format dispatcher, and the
table writer that `clustersim collective` prints with. Pure functions: callers pass text and a name.

How the column layout is recognised (the file says it; the manifest's `format` is not needed):
1. A header line whose first word is `size` names the columns (`#  size count type redop root time
   algbw busbw #wrong time algbw busbw #wrong`, with or without `#`; `#wrong`/`wrong`/`error` and
   `time`/`cputime` are synonyms). The first time/algbw/busbw set is out-of-place, a second set
   in-place; other columns (#bitdiff, i_min, algo, proto, ...) are skipped by position. The header of
   nccl-tests before March 2019 and of NCCL 1.x's own tests, `bytes N type op time algbw busbw res`, prints
   its times in milliseconds: they are read so.
2. Rows before any header are read by their column count (`_LAYOUTS_BY_COUNT`): 13 standard, 12 old
   (2019: no root, `error`), 11 old without redop, 9 one column set, 4 trimmed (size time algbw busbw).
3. A Markdown table whose header starts with `payload` or `size`: the PyTorch benchmark, or an nccl-tests table a
   report generator rewrote (`| Size (B) | Out Time (us) | Out BusBW (GB/s) | In Time (us) | ... |`), or saved as
   CSV (`size,count,type,redop,root,out_time_us,out_algbw,out_busbw,...`). A header cell is read without its unit
   (in parentheses, or a CSV name's `_us`) and its out/in-place word, the first time/algbw/busbw set being
   out-of-place as above. Sizes are bytes, or B/KiB/MiB/GiB/TiB, or KB/MB/GB (K/M/G) read 1024-based as
   nccl-tests' own size options are; numbers may carry thousands separators (2,169.8); bandwidths in GB/s (or
   GBps); the time column in us, or ms where its header says so (`Time (ms)`, `time_ms`), where there is one,
   else time = size / algbw (so it carries algbw's two-decimal rounding, up to 0.6 % at 0.82 GB/s).
4. A table with busbw but neither time nor algbw (published multi-node benchmark tables): algbw =
   busbw / factor, with nccl-tests' factor for the collective and rank count (busbw.busbw_factor),
   which only the manifest knows: the caller passes it as `busbw_factor`, else such a table is an error.

What is a row: inside a table, every line whose first word is an integer (underscores allowed, as in
1_048_576); elsewhere, a line starting with an integer that has >= 3 numeric words. A row that does
not fit the layout raises LogParseError naming its line. Skipped: blank lines, `#` comments, known
noise (NCCL INFO/WARN, UCX/MPI warnings, footers, prompts, `...`); colour codes, a Markdown quote's `> `, a log
collector's time stamp
(`2024-05-22T07:36:17.123Z `, `[2024-05-22 07:36:17] `) and launcher prefixes (`0:`,
`[1,0]<stdout>:`, a host label `node01: `, `[0] `, `[default0]:`, kubectl's `[pod/launcher/mpi] `, Ray's
`(head, rank=0, pid=3808) `) are stripped
first, and Open MPI's tags inside a line too (it tags each write, and nccl-tests 2.13+ writes a row in parts).
Other text between rows is an error; between a header and the first row (a debug print) it is passed over, unless
no row follows; after the last row it is trailing junk and ignored. A row its publisher cut short (`... 33.53 ...`)
is left out with a warning.

A table of several data types or reduction ops (nccl-tests `-d all` / `-o all`, NCCL 1.x's tests) keeps the rows
of nccl-tests' defaults, float and sum, with a warning. A run whose check failed (a `#wrong` count above 0, or
`Out of bounds values : N FAILED`) is read, with a warning that its times are those of a run that computed
wrong values.

A row written in parts with NCCL's own log lines between them (NCCL_DEBUG=INFO) is put back together: a line that
holds the first columns of a row, then lines of numbers only, up to the header's column count.

Several runs in one file: a second header after data rows, rows after a footer, or a row smaller than the one
before it (a sweep starting again, or two processes' rows interleaved) start another run.
A script that runs several tools into one file prints their tables so, each after the tool's name (its
command, or nccl-tests' `Collective test starting: all_gather_perf` line): the caller's `collective` (the
manifest entry's) picks the one table of that tool. nccl-tests built without MPI=1 and started by mpirun on N
hosts prints N independent single-process runs of one tool so. A file of several runs that `collective` does not
settle is an error that names the likely cause, unless the caller picks one table with `run` (1-based; the
manifest's `run:` field).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from simulator.collectives.busbw import COLLECTIVES
from simulator.core.errors import ConfigError, LogParseError
from simulator.core.units import GIB, KIB, MIB
from simulator.measurements.nccl_tests_json import (
    decode_json_log,
    nccl_version_from_code,
    record_fields,
    run_info,
)

TEXT_FORMATS = ("nccl-tests", "nccl-tests-prefixed", "nccl-tests-trimmed", "nccl-tests-old", "nccl-tests-csv", "csv",
                "torch-bench")
JSON_FORMATS = ("nccl-tests-json",)
LOG_FORMATS = TEXT_FORMATS + JSON_FORMATS

# nccl-tests tools that are not simulated collectives still name the log's collective.
_TOOLS = COLLECTIVES + ("gather", "scatter", "hypercube", "alltoallv")
_TOOL_ALIASES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter"}
_LAYOUTS_BY_COUNT = {
    13: "size count type redop root time algbw busbw wrong time algbw busbw wrong",
    12: "size count type redop time algbw busbw wrong time algbw busbw wrong",
    11: "size count type time algbw busbw wrong time algbw busbw wrong",
    9: "size count type redop root time algbw busbw wrong",
    4: "size time algbw busbw",
}
_COLUMN_ALIASES = {"#wrong": "wrong", "error": "wrong", "cputime": "time", "payload": "size", "messagesize": "size",
                   "msgsize": "size"}
# the header of nccl-tests before March 2019 (v1.0.0) and of NCCL 1.x's own tests: `bytes N type op time algbw busbw
# res`, its times in milliseconds (common.cu printed deltaSec * 1.0E3 until "Resync all tests with test code from
# NCCL 2.4", which switched to microseconds and the `size count type redop` header)
_OLD_HEADER_NAMES = {"bytes": "size", "n": "count", "op": "redop", "res": "wrong", "time": "time_ms"}
# launchers and log collectors that name the process before each line: Ray's worker prefix, (pid=3808) or
# (head, rank=0, pid=3808) (SkyPilot and Ray jobs)
_RAY_PREFIX = re.compile(r"^\s*\([^()\n]*\bpid=\d+[^()\n]*\)\s")

# launcher prefixes on every output line: Open MPI's --tag-output ([1,0]<stdout>:), srun --label (0:), host labels of
# pdsh, clush and Cray PALS mpiexec --label (x3005c0s13b0n0: , node-01.cluster: ), MPICH and Intel MPI's rank
# labels ([0] ), torchrun's --tee ([default0]:, [rank0]:). A host label needs the space after its colon, so an NCCL
# INFO line's host:pid:tid is not one.
# a time stamp a log collector put before each line, then the launcher's prefix: ISO 8601 (kubectl logs
# --timestamps, CI runners: 2024-05-22T07:36:17.123456789Z), bracketed ([2024-05-22 07:36:17], [07:36:17.123]),
# ctime (Mon May 22 07:36:17 2024:) or a bare clock time (07:36:17)
_TIMESTAMP = re.compile(r"^\s*(?:\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
                        r"|\[[^\]\n]*\d{2}:\d{2}:\d{2}[^\]\n]*\]|[A-Z][a-z]{2} [A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2}"
                        r"(?: \d{4})?|\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)(?::(?=\s))?\s")
# a terminal's colour codes (ANSI CSI sequences) and a Markdown quote's "> " (a log quoted in an issue comment)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<(?:stdout|stderr)>:|\d+:(?=\s|#|$)|[A-Za-z0-9][\w.-]*:(?=\s)"
                     r"|\[\d+\](?=\s)|\[(?:default|rank)\d+\]:)")
# kubectl logs --prefix names the pod and container before the time stamp of --timestamps
_KUBECTL_PREFIX = re.compile(r"^\s*\[pod/[^\]\s]+\]\s")
# Open MPI's --tag-output tags every write, not every line: nccl-tests 2.13+ prints a row in several writes (the
# sizes, then each column group), so a row can carry a tag before each part ("-1[1,0]<stdout>:    85.70 ...").
_WRITE_TAG = re.compile(r"\[\d+,\d+\]<(?:stdout|stderr)>:")
# NCCL's own log lines (NCCL_DEBUG=INFO, host:pid:tid [dev] NCCL INFO ...) written between those parts: one starts
# right after a part ("   -1nid001049:658566:658566 [0] NCCL INFO AllReduce: 8 Bytes -> ...", or after MPICH's rank
# label "      0[0] h100clust-worker-1:497888:497888 [0] NCCL INFO ..."), the part's row then goes on lines of its own
# after it.
_GLUED_NCCL_LOG = re.compile(r"^(\d.*?\d)(?:\[\d+\]\s*)?[A-Za-z][\w.-]*:\d+:\d+ \[\d+\] NCCL (?:INFO|WARN|TRACE)\b")
_INT = re.compile(r"\d+(?:_\d+)*")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_VERSION = re.compile(r"\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.]+)*")
_TOOL = re.compile(r"(?<![A-Za-z0-9])([a-z]+(?:_[a-z]+)*?)_(?:perf|bench)(?:_mpi)?(?![A-Za-z0-9])")
_RANK = re.compile(
    r"\bRank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s*(.*)"
)
_FOOTER = re.compile(r"(?:Out of bounds values|Avg bus bandwidth|Collective test concluded)\b")
_AVG = re.compile(r"Avg bus bandwidth\s*:\s*(\S+)")
_OUT_OF_BOUNDS = re.compile(r"Out of bounds values\s*:\s*(\d+)\s*(FAILED|OK)?")
_THREADS = re.compile(r"\bnThread\s+\d+\s+nGpus\s+(\d+)\b")
_NGPUS_ARG = re.compile(r"\s(?:-g|--ngpus)(?:\s*|=)(\d+)\b")  # an *_perf command's -g N / --ngpus=N
_NOISE = re.compile(
    r"NCCL (?:INFO|WARN|TRACE|ERROR|version)\b|\b(?:UCX|WARN|WARNING|[Ww]arning)\b"
    r"|^\[[^\]]*\]|^(?:-{3,}|={3,}|\*{3,}|\.{3,}|…|```)"
    r"|^(?:Bitwise mismatches|Collective test|nThread\b|Using devices|Rank\s+\d)"
    r"|^\S+@\S+?[:\s].*?[$#%>](?:\s|$)|^[$>](?:\s|$)|^(?:mpirun|mpiexec|srun|orterun)\b"
)
# sizes in a table's cells: bytes, or binary units; KB / MB / GB (and K / M / G) are read as 1024-based too, as
# nccl-tests' own -b / -e suffixes are (common.cu parsesize: "1M" is 1,048,576 bytes), which its sweeps print
_TORCH_SIZE_UNITS = {"": 1, "B": 1, "KiB": KIB, "MiB": MIB, "GiB": GIB, "TiB": 1024 * GIB,
                     "K": KIB, "KB": KIB, "M": MIB, "MB": MIB, "G": GIB, "GB": GIB, "TB": 1024 * GIB}
_TORCH_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB|K|M|G)?", re.IGNORECASE)
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")  # 2,169.8 in a report's cell
_TORCH_BW = re.compile(r"(\S+?)\s*(?:GBps|GB/s)?")


@dataclass(frozen=True)
class NcclRow:
    """One size of an nccl-tests run: times in us, bandwidths in GB/s (1e9 B/s), as printed."""

    size_bytes: int
    count: int | None
    dtype: str | None
    redop: str | None
    root: int | None
    time_us: float
    algbw_GBps: float | None
    busbw_GBps: float | None
    inplace_time_us: float | None
    inplace_algbw_GBps: float | None
    inplace_busbw_GBps: float | None
    line_no: int
    # nccl-tests' #wrong count of the out-of-place run (None: not printed, or -c 0); a diagnosis, not a measurement
    wrong: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class NcclLog:
    """A parsed log: its rows in file order and what the log says about the run."""

    source: str
    collective: str | None
    rows: tuple[NcclRow, ...]
    nranks: int | None
    hosts: tuple[str, ...]
    devices: tuple[str, ...]
    nccl_version: str | None
    avg_busbw_GBps: float | None
    # GPUs one test thread drives (nccl-tests -g; `nGpus` in the header line), None when not printed
    gpus_per_thread: int | None = None


@dataclass(frozen=True)
class _Layout:
    columns: tuple[str, ...]
    where: dict[str, int]  # size/count/type/redop/root/time/algbw/busbw and ip_* -> column index
    markdown: bool = False
    time_unit_us: float = 1.0  # microseconds per unit of the time columns (1,000 where the header says ms)


@dataclass
class _Meta:
    ranks: dict[int, tuple[str, str]] = field(default_factory=dict)
    versions: dict[int, str] = field(default_factory=dict)  # priority -> version
    tools: dict[int, list[str]] = field(default_factory=dict)  # priority -> collective names
    avg_busbw: float | None = None
    out_of_bounds: int = 0  # the footer's count of wrong values (nccl-tests' check)
    gpus_per_thread: int | None = None  # the header line's nGpus
    command_gpus: int | None = None  # the -g of a command line the log quotes


def _tools_in(text: str) -> list[str]:
    names = (_TOOL_ALIASES.get(m, m) for m in _TOOL.findall(text))
    return [name for name in names if name in _TOOLS]


def _make_layout(names: Sequence[str], source: str, line_no: int, markdown: bool = False) -> _Layout:
    """The columns' positions; a time column named `time_ms` makes every time column milliseconds."""
    where: dict[str, int] = {}
    unit_us = 1000.0 if "time_ms" in (n.lower() for n in names) else 1.0
    for i, raw in enumerate(names):
        name = _COLUMN_ALIASES.get(raw.lower(), raw.lower())
        name = "time" if name == "time_ms" else name
        if name in ("time", "algbw", "busbw", "wrong"):
            key = name if name not in where else "ip_" + name
            if key in where:
                raise LogParseError(
                    source, line_no, f"a third '{name}' column; expected out-of-place and in-place"
                )
            where[key] = i
        elif name in ("size", "count", "type", "redop", "root") and name not in where:
            where[name] = i
    if "size" not in where or not {"time", "algbw", "busbw"} & set(where):
        raise LogParseError(
            source, line_no, f"header {' '.join(names)!r} lacks a size column or a time, algbw or busbw column"
        )
    return _Layout(tuple(names), where, markdown, unit_us)


def _header_names(tokens: list[str]) -> list[str] | None:
    """Column names if this is a column header line (first word `size`, and a time/bw column), or the older
    `bytes N type op time ...` header, its times in milliseconds (_OLD_HEADER_NAMES)."""
    if len(tokens) > 1 and tokens[0] == "bytes" and tokens[1] == "N" and "time" in tokens:
        return [_OLD_HEADER_NAMES.get(token.lower(), token) for token in tokens]
    if tokens and tokens[0] == "size" and {"time", "cputime", "algbw", "busbw"} & set(tokens):
        names: list[str] = []
        for token in tokens:  # a timestamp column prints as two words
            names += ["timestamp_date", "timestamp_clock"] if token == "timestamp" else [token]
        return names
    return None


def _is_decoration(tokens: list[str]) -> bool:
    """The units line `(B) (elements) (us) ...` or the `out-of-place   in-place` line."""
    return tokens[0] == "out-of-place" or all(t.startswith("(") and t.endswith(")") for t in tokens)


def _number(token: str | None, what: str, required: bool = False) -> float | None:
    if token is None or token.upper() == "N/A":
        if required:
            raise ValueError(f"{what} is {token or 'missing'}; every row needs a number there")
        return None
    if not _NUMBER.fullmatch(token) or float(token) < 0:
        raise ValueError(f"{what} {token!r} is not a number >= 0")
    return float(token)


def _integer(token: str | None, what: str, signed: bool = False) -> int | None:
    if token is None or token.upper() == "N/A":
        return None
    body = token[1:] if signed and token.startswith("-") else token
    if not _INT.fullmatch(body):
        raise ValueError(f"{what} {token!r} is not a whole number")
    return int(token.replace("_", ""))


def _word(token: str | None, what: str) -> str | None:
    if token is None or token.upper() == "N/A":
        return None
    if not _NAME.fullmatch(token):
        raise ValueError(f"{what} {token!r} is not a name")
    return token


def _time_us(size: int, algbw: float | None, busbw: float | None, busbw_factor: float | None) -> tuple[float, float]:
    """(time in us, algbw in GB/s) of a row without a time column: time = size / algbw, and algbw =
    busbw / factor when only busbw is printed. ValueError when neither can be had."""
    if not algbw and busbw and busbw_factor:
        algbw = busbw / busbw_factor
    if not algbw:
        missing = "busbw is 0" if busbw is not None and busbw_factor else (
            "only busbw is printed, and the collective and rank count that turn it into a time are"
            " not known (list the log in a manifest)" if busbw is not None else "algbw is 0 or missing"
        )
        raise ValueError(f"no time column and {missing}, so the time cannot be derived")
    return size / (algbw * 1e3), algbw  # bytes / (1e9 B/s) in us


def _table_row(tokens: list[str], layout: _Layout, line_no: int, busbw_factor: float | None) -> NcclRow:
    """A row of an nccl-tests table; ValueError says what is wrong."""
    if len(tokens) != len(layout.columns):
        raise ValueError(
            f"row has {len(tokens)} columns, expected {len(layout.columns)} ({' '.join(layout.columns)})"
        )

    def cell(key: str) -> str | None:
        index = layout.where.get(key)
        return None if index is None else tokens[index]

    size = _integer(cell("size"), "size")
    if size is None:
        raise ValueError("size is N/A")
    algbw, busbw = _number(cell("algbw"), "algbw"), _number(cell("busbw"), "busbw")
    if "time" in layout.where:
        time_us = (_number(cell("time"), "time", required=True) or 0.0) * layout.time_unit_us
        if size > 0 and time_us <= 0.0:
            raise ValueError(f"time {cell('time')} us for {size} bytes: a collective that moves data takes time")
    elif size > 0:
        time_us, algbw = _time_us(size, algbw, busbw, busbw_factor)
    else:
        time_us = 0.0
    return NcclRow(
        size_bytes=size,
        count=_integer(cell("count"), "count"),
        dtype=_word(cell("type"), "type"),
        redop=_word(cell("redop"), "redop"),
        root=_integer(cell("root"), "root", signed=True),
        time_us=time_us,
        algbw_GBps=algbw,
        busbw_GBps=busbw,
        inplace_time_us=_scaled(_number(cell("ip_time"), "in-place time"), layout.time_unit_us),
        inplace_algbw_GBps=_number(cell("ip_algbw"), "in-place algbw"),
        inplace_busbw_GBps=_number(cell("ip_busbw"), "in-place busbw"),
        line_no=line_no,
        wrong=_wrong_count(cell("wrong"), layout),
    )


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def _wrong_count(token: str | None, layout: _Layout) -> int | None:
    """The row's #wrong count; None where the column is the older max-error figure (`error`, `res`) or N/A."""
    index = layout.where.get("wrong")
    if token is None or index is None or layout.columns[index].lower() not in ("#wrong", "wrong"):
        return None
    return int(token) if _INT.fullmatch(token) else None


_UNIT_WORDS = ("us", "usec", "ms", "msec", "gbps", "b", "bytes")  # a unit written after a CSV column's name: time_us


def _markdown_names(cells: list[str]) -> list[str]:
    """A Markdown or CSV table's header cells as column names: 'Out BusBW (GB/s)' -> 'busbw', 'Size (B)' -> 'size',
    'out_time_us' -> 'time'."""
    names = []
    for cell in cells:
        unit = re.search(r"\(\s*([^)]*?)\s*\)", cell.lower())
        words = re.sub(r"\([^)]*\)", " ", cell.lower()).replace("-", " ").replace("_", " ").split()
        in_ms = (unit is not None and unit.group(1) in ("ms", "msec")) or (len(words) > 1 and words[-1] == "ms")
        while len(words) > 1 and words[0] in ("out", "in", "of", "place", "oop", "ip"):
            words = words[1:]
        while len(words) > 1 and words[-1] in _UNIT_WORDS:
            words = words[:-1]
        name = _COLUMN_ALIASES.get("".join(words), "".join(words))
        names.append("time_ms" if name == "time" and in_ms else name)
    return names


def _markdown_row(cells: list[str], layout: _Layout, line_no: int, busbw_factor: float | None) -> NcclRow:
    """A row of a Markdown table (`|   32KiB |   1.44GBps |   0.82GBps |`, `| 8 | 18.74 | 0.00 | ...`): the time
    column's, else time = size / algbw (algbw = busbw / busbw_factor where the table prints busbw only)."""
    if len(cells) != len(layout.columns):
        raise ValueError(
            f"row has {len(cells)} cells, expected {len(layout.columns)} ({' | '.join(layout.columns)})"
        )
    cells = [cell.replace(",", "") if _THOUSANDS.fullmatch(cell) else cell for cell in cells]
    size_cell = cells[layout.where["size"]]
    size_match = _TORCH_SIZE.fullmatch(size_cell)
    units = {unit.lower(): factor for unit, factor in _TORCH_SIZE_UNITS.items()}
    size = float(size_match.group(1)) * units[(size_match.group(2) or "").lower()] if size_match else -1.0
    if size < 0 or size != int(size):
        raise ValueError(f"size {size_cell!r} is not a whole number of bytes like 512B, 32KiB, 1MiB or 16GiB")
    bandwidths: list[float | None] = []
    for key in ("algbw", "busbw"):
        cell = cells[layout.where[key]] if key in layout.where else None
        match = _TORCH_BW.fullmatch(cell) if cell is not None else None
        bandwidths.append(_number(match.group(1) if match else cell, key))
    stated_us = {key: _scaled(_number(cells[layout.where[key]], f"{key.replace('ip_', 'in-place ')} time"),
                              layout.time_unit_us)
                 for key in ("time", "ip_time") if key in layout.where}
    stated = stated_us.get("time")
    if stated:
        time_us, algbw = stated, bandwidths[0] or size / (stated * 1e3)
    else:
        time_us, algbw = _time_us(int(size), bandwidths[0], bandwidths[1], busbw_factor)
    ip_busbw = _number(cells[layout.where["ip_busbw"]], "in-place busbw") if "ip_busbw" in layout.where else None
    return NcclRow(int(size), None, None, None, None, time_us, algbw, bandwidths[1], stated_us.get("ip_time"),
                   None, ip_busbw, line_no)


def _looks_like_row(tokens: list[str]) -> bool:
    numeric = sum(1 for t in tokens if _NUMBER.fullmatch(t.replace("_", "")) or t.upper() == "N/A")
    return bool(_INT.fullmatch(tokens[0])) and numeric >= 3


class _LogReader:
    """The state of one pass over a text log: layout, rows, metadata and where the table is."""

    def __init__(self, source: str, busbw_factor: float | None) -> None:
        self.source = source
        self.busbw_factor = busbw_factor
        self.runs: list[tuple[int, list[NcclRow], str | None]] = []  # (first line, rows, tool) of each finished run
        self.run_line = 0
        self.tool_seen: str | None = None  # the last tool the program's output named
        self.run_tool: str | None = None  # the tool named before the current run began
        self.rows: list[NcclRow] = []
        self.meta = _Meta()
        self.layout: _Layout | None = None
        self.header_line = 0
        self.in_table = False  # from a header or first row to a footer
        self.footer_line = 0
        self.junk: tuple[int, str] | None = None  # unexplained text after the table's first row
        self.stray: tuple[int, str] | None = None  # unexplained text between a header and the first row
        self.part: tuple[int, list[str]] | None = None  # (line, words) of a row written in parts, so far

    def read_line(self, line_no: int, raw: str) -> None:
        line = _KUBECTL_PREFIX.sub("", _RAY_PREFIX.sub("", _QUOTE.sub("", _ANSI.sub("", raw), count=1), count=1),
                                   count=1)
        body = _WRITE_TAG.sub(" ", _PREFIX.sub("", _TIMESTAMP.sub("", line, count=1), count=1)).strip()
        if glued := _GLUED_NCCL_LOG.match(body):
            body = glued.group(1)
        if not body:
            return
        if self._row_part(body.split(), line_no):
            return
        if body.startswith("#"):
            content = body.lstrip("#").strip()
            tokens = content.split()
            if not self._header(_header_names(tokens), line_no) and not (tokens and _is_decoration(tokens)):
                self._note(content, line_no, comment=True)
            return
        if body.startswith("|"):
            self._markdown(body, line_no)
            return
        if "," in body and self._csv(body, line_no):
            return
        tokens = body.split()
        if self._header(_header_names(tokens), line_no) or _is_decoration(tokens):
            return
        if (self.in_table and _INT.fullmatch(tokens[0])) or _looks_like_row(tokens):
            self._row(tokens, line_no)
            return
        self._note(body, line_no, comment=False)
        noise = _NOISE.search(body) or _NOISE.search(raw.strip())  # "Warning: ..." reads as a host label
        if self.in_table and not self.junk and not noise and not _FOOTER.match(body):
            if self.rows:
                self.junk = (line_no, body)
            else:  # a debug print between the header and the first row: an error only if no row follows
                self.stray = self.stray or (line_no, body)

    def _row_part(self, tokens: list[str], line_no: int) -> bool:
        """Take a part of a row written in parts: its first columns (a size, a count and a type, fewer words than
        the header has columns), then lines of numbers only until the row is whole. True if the line was one."""
        columns = len(self.layout.columns) if self.layout is not None and not self.layout.markdown else 0
        numbers_only = all(_NUMBER.fullmatch(t) or t.upper() == "N/A" for t in tokens)
        if self.part is not None and numbers_only and len(self.part[1]) + len(tokens) <= columns:
            first_line, words = self.part[0], self.part[1] + tokens
            self.part = None if len(words) == columns else (first_line, words)
            if self.part is None:
                self._row(words, first_line)
            return True
        if self.part is not None and _NOISE.search(" ".join(tokens)):
            return False  # NCCL's log lines between the parts
        if self.part is not None:  # the row never completed: its first part is the row in error
            first_line, words = self.part
            self.part = None
            self._row(words, first_line)
        starts_row = len(tokens) >= 3 and _INT.fullmatch(tokens[0]) and _INT.fullmatch(tokens[1]) \
            and _NAME.fullmatch(tokens[2])
        if self.in_table and columns and starts_row and len(tokens) < columns:
            self.part = (line_no, tokens)
            return True
        return False

    def _header(self, names: list[str] | None, line_no: int, markdown: bool = False) -> bool:
        if names is None:
            return False
        if self.rows:
            self._next_run(line_no)
        self.layout = _make_layout(names, self.source, line_no, markdown)
        self.header_line, self.in_table = line_no, True
        self._run_starts(line_no)
        return True

    def _run_starts(self, line_no: int) -> None:
        """Mark where the current run began (its first header or row) and the tool named before it."""
        if not self.run_line:
            self.run_line, self.run_tool = line_no, self.tool_seen

    def _cells(self, cells: list[str], line_no: int, row: bool) -> bool:
        """Take a line of a table written as cells (Markdown or CSV): a header naming size and a time or bandwidth
        column starts the table, and after one a line of cells is a row where `row` allows; True if taken."""
        names = _markdown_names(cells)
        if names[0] == "size" and {"time", "algbw", "busbw"} & set(names):
            return self._header(names, line_no, markdown=True)
        if row and self.layout is not None and self.layout.markdown:
            self._row(cells, line_no)
            return True
        return False

    def _csv(self, body: str, line_no: int) -> bool:
        """Take a line of a comma-separated table (an nccl-tests table saved as CSV: a header 'size,count,type,
        ...,out_time_us,out_algbw,out_busbw,...' and rows of as many cells starting with the size in bytes); True
        if the line was one. A line with commas outside such a table is left to the other readers."""
        cells = [c.strip() for c in body.split(",")]
        return len(cells) >= 3 and self._cells(cells, line_no, row=bool(_INT.fullmatch(cells[0])))

    def _markdown(self, body: str, line_no: int) -> None:
        cells = [c.strip() for c in body.strip().strip("|").split("|")]
        if all(re.fullmatch(r":?-+:?", c) for c in cells):
            return
        if not self._cells(cells, line_no, row=True) and self.in_table and not self.junk:
            if self.rows:
                self.junk = (line_no, body)
            else:
                self.stray = self.stray or (line_no, body)

    def _row(self, tokens: list[str], line_no: int) -> None:
        if tokens[-1] in ("...", "\u2026"):  # a row its publisher cut short: the rest of the table stands
            warnings.warn(f"{self.source}:{line_no}: a row cut short with '...' by its publisher is left out",
                          stacklevel=2)
            return
        if self.junk:
            junk_line, text = self.junk
            raise LogParseError(self.source, junk_line, f"unexpected text {text[:60]!r} among the data rows")
        if self.footer_line:
            self._next_run(line_no)
        if self.layout is None:
            columns = _LAYOUTS_BY_COUNT.get(len(tokens))
            if columns is None:
                raise LogParseError(
                    self.source,
                    line_no,
                    f"row of {len(tokens)} columns and no header line before it; expected a header"
                    f" ('# size count type redop root time ...') or {sorted(_LAYOUTS_BY_COUNT)} columns",
                )
            self.layout = _make_layout(columns.split(), self.source, line_no)
        self.in_table = True
        self._run_starts(line_no)
        try:
            row = (
                _markdown_row(tokens, self.layout, line_no, self.busbw_factor)
                if self.layout.markdown
                else _table_row(tokens, self.layout, line_no, self.busbw_factor)
            )
        except ValueError as exc:
            raise LogParseError(self.source, line_no, str(exc)) from None
        if self.rows and row.size_bytes < self.rows[-1].size_bytes:  # a sweep starting again: another run
            self._next_run(line_no)
        self.rows.append(row)

    def _next_run(self, line_no: int) -> None:
        """Close the current run's table; the next one starts at `line_no`."""
        self.runs.append((self.run_line, self.rows, self.run_tool))
        self.rows, self.run_line, self.footer_line, self.junk = [], line_no, 0, None
        self.run_tool = self.tool_seen

    def _note(self, text: str, line_no: int, comment: bool) -> None:
        """Metadata from a non-row line: ranks, NCCL version, collective, average busbw, footer."""
        meta = self.meta
        if _FOOTER.match(text) and self.in_table:
            self.in_table, self.footer_line = False, self.footer_line or (line_no if self.rows else 0)
        if (avg := _AVG.match(text)) and _NUMBER.fullmatch(avg.group(1)):
            meta.avg_busbw = float(avg.group(1))
        if bad := _OUT_OF_BOUNDS.match(text):
            meta.out_of_bounds = max(meta.out_of_bounds, int(bad.group(1)))
        if (threads := _THREADS.search(text)) and int(threads.group(1)) >= 1:
            meta.gpus_per_thread = int(threads.group(1))
        if rank := _RANK.search(text):
            meta.ranks[int(rank.group(1))] = (rank.group(2), rank.group(3).strip())
        version = (
            re.match(r"NCCL version:?\s+(\S+)", text) if comment else re.search(r"NCCL version\s+(\S+)", text)
        )
        if version and _VERSION.fullmatch(version.group(1)):
            meta.versions.setdefault(1 if comment else 0, version.group(1))
        if comment and (code := re.search(r"nccl-library=(\d+)", text)):
            meta.versions.setdefault(2, nccl_version_from_code(int(code.group(1))))
        tool = _TOOL.search(text) if not comment or re.match(r"commands?\b", text) else None
        if tool and (gpus := _NGPUS_ARG.search(text, tool.end())) and int(gpus.group(1)) >= 1:
            meta.command_gpus = meta.command_gpus or int(gpus.group(1))
        if not comment or text.startswith("Collective test"):
            named_tools = _tools_in(text)
            meta.tools.setdefault(0, []).extend(named_tools)
            if named_tools and not text.startswith("Collective test concluded"):
                self.tool_seen = named_tools[-1]
        elif named := re.match(r"collective:\s*([A-Za-z_]+)", text):
            name = _TOOL_ALIASES.get(named.group(1).lower(), named.group(1).lower())
            meta.tools.setdefault(1, []).extend([name] if name in _TOOLS else [])
        elif re.match(r"commands?\b", text):
            meta.tools.setdefault(2, []).extend(_tools_in(text))

    def chosen_run(self, run: int | None, collective: str | None = None) -> tuple[list[NcclRow], str | None]:
        """The rows (and tool) of the one run in the file, of run `run` (1-based) of several, or of the one run of
        several whose tool is `collective`."""
        runs = self.runs + [(self.run_line, self.rows, self.run_tool)] if self.rows or self.runs else []
        if run is not None and not 1 <= run <= max(len(runs), 1):
            raise LogParseError(
                self.source, 1, f"run {run} asked for, but the file holds {len(runs)} result table(s)"
            )
        if run is None and len(runs) > 1:
            ofs = [r for r in runs if collective is not None and r[2] == collective]
            if len(ofs) == 1:
                return ofs[0][1], ofs[0][2]
            starts = ", ".join(str(start) for start, _, _ in runs)
            tools = [tool for _, _, tool in runs]
            if len(set(tools)) > 1:
                named = ", ".join(tool or "?" for tool in tools)
                cause = (f"the tables of several tools ({named}), {len(ofs) or 'none'} of them "
                         f"{collective or 'the collective asked for'}; take one table")
            elif self.layout is not None and self.layout.markdown:
                cause = "a report of several tables (collectives, algorithms or runs); take one table"
            else:
                cause = ("several independent runs in one file, as nccl-tests built without MPI=1 prints when mpirun"
                         " starts it on several hosts (each process runs alone, and their rows may interleave);"
                         " rebuild nccl-tests with MPI=1, or take one table")
            raise LogParseError(
                self.source,
                runs[1][0],
                f"{len(runs)} result tables (from lines {starts}): {cause} with the manifest entry's 'run:' field"
                f" (1-{len(runs)})",
            )
        chosen = runs[(run or 1) - 1] if runs else (0, [], None)
        return chosen[1], chosen[2]

    def result(self, line_count: int, run: int | None = None, collective: str | None = None) -> NcclLog:
        if self.part is not None:
            first_line, words = self.part
            self.part = None
            self._row(words, first_line)
        tool = None
        if self.runs or run is not None:
            self.rows, tool = self.chosen_run(run, collective)
        if not self.rows and (self.junk or self.stray):
            junk_line, text = self.junk or self.stray  # type: ignore[misc]
            raise LogParseError(
                self.source, junk_line, f"unexpected text {text[:60]!r} where data rows belong"
            )
        if not self.rows:
            where = f" after the header at line {self.header_line}" if self.header_line else ""
            raise LogParseError(
                self.source,
                max(line_count, 1),
                f"no data rows{where}; expected an nccl-tests result table ('# size count ...' and rows)",
            )
        self.rows = _one_type_and_op(self.rows, self.source)
        meta = self.meta
        wrong = [row.size_bytes for row in self.rows if row.wrong]
        if wrong or meta.out_of_bounds:
            where = f" (#wrong at {len(wrong)} size(s), from {wrong[0]} bytes)" if wrong else ""
            warnings.warn(f"{self.source}: nccl-tests' check failed{where}: the results of a run that computed wrong"
                          " values are read as they are; rerun it with the cause fixed before trusting them",
                          stacklevel=2)
        ranks = [meta.ranks[r] for r in sorted(meta.ranks)]
        return NcclLog(
            source=self.source,
            collective=tool or next((n[0] for _, n in sorted(meta.tools.items()) if len(set(n)) == 1), None),
            rows=tuple(self.rows),
            nranks=max(meta.ranks) + 1 if meta.ranks else None,
            hosts=tuple(dict.fromkeys(host for host, _ in ranks)),
            devices=tuple(dict.fromkeys(device for _, device in ranks if device)),
            nccl_version=next((v for _, v in sorted(meta.versions.items())), None),
            avg_busbw_GBps=meta.avg_busbw,
            gpus_per_thread=meta.gpus_per_thread or meta.command_gpus,
        )


def _one_type_and_op(rows: list[NcclRow], source: str) -> list[NcclRow]:
    """A table of several data types or reduction ops (nccl-tests -d all / -o all, NCCL 1.x's tests) repeats each
    size once for each: keep nccl-tests' defaults, float and sum (else the first printed), and say so."""
    dtypes = list(dict.fromkeys(row.dtype for row in rows if row.dtype is not None))
    ops = list(dict.fromkeys(row.redop for row in rows if row.redop is not None))
    if len(dtypes) < 2 and len(ops) < 2:
        return rows
    dtype = "float" if "float" in dtypes else dtypes[0] if dtypes else None
    op = "sum" if "sum" in ops else ops[0] if ops else None
    kept = [row for row in rows if row.dtype in (dtype, None) and row.redop in (op, None)]
    warnings.warn(f"{source}: the table holds {len(dtypes)} data type(s) ({', '.join(map(str, dtypes))}) and"
                  f" {len(ops)} reduction op(s) ({', '.join(map(str, ops))}); taken: the {len(kept)} rows of"
                  f" {dtype} {op}", stacklevel=3)
    return kept


def parse_nccl_tests(
    text: str, source: str = "<string>", *, busbw_factor: float | None = None, run: int | None = None,
    collective: str | None = None,
) -> NcclLog:
    """Parse nccl-tests stdout (or the PyTorch benchmark table); see the module docstring for layouts.

    `nranks` is the highest `Rank N` in the device list + 1 (lists are often abridged); the collective
    comes from the program's own output (prompt, `Collective test ...`), else a `# collective:`
    header, else a `# command:` line naming one `*_perf` tool; the NCCL version from an `NCCL version`
    output line, else a `# NCCL version:` header, else `nccl-library=` code; `gpus_per_thread` from the
    `nThread T nGpus G` header line, else from the `-g N` of the `*_perf` command the log quotes (a prompt
    or a `# command:` line). `busbw_factor` turns a
    busbw-only table into times; `run` picks one of several runs in the file, or `collective` the one run of that
    tool among several (module docstring).
    """
    reader = _LogReader(source, busbw_factor)
    lines = text.splitlines()
    for line_no, raw in enumerate(lines, start=1):
        reader.read_line(line_no, raw)
    return reader.result(len(lines), run, collective)


def parse_nccl_tests_json(text: str, source: str = "<string>") -> NcclLog:
    """Parse the document nccl-tests writes with -J (schema in nccl_tests_json), or a bare record list.

    Every record needs size, count, type, redop, root, out_of_place and in_place (time, alg_bw,
    bus_bw); a missing or mistyped field raises LogParseError at the record's line.
    """
    document = decode_json_log(text, source)
    rows = tuple(NcclRow(**record_fields(record, source)) for record in document.records)
    run = run_info(document.top)
    tools = _tools_in(run.program or "")
    return NcclLog(
        source=source,
        collective=tools[0] if tools else None,
        rows=rows,
        nranks=run.nranks,
        hosts=run.hosts,
        devices=run.devices,
        nccl_version=run.nccl_version,
        avg_busbw_GBps=run.avg_busbw_GBps,
        gpus_per_thread=run.gpus_per_thread,
    )


def sniffed_format(text: str) -> str:
    """The layout a log's text is in when nobody says: JSON when it starts with `{` or `[{`/`[]` (nccl-tests -J),
    else nccl-tests' text (whose reader tells its text layouts apart itself). A bare `[` is not enough:
    `[1,0]<stdout>:` launcher prefixes and `[time] UCX` lines start so."""
    return "nccl-tests-json" if re.match(r"\s*(?:\{|\[\s*[{\]])", text) else "nccl-tests"


def parse_log(
    text: str,
    source: str,
    fmt: str | None = None,
    *,
    busbw_factor: float | None = None,
    run: int | None = None,
    collective: str | None = None,
) -> NcclLog:
    """Parse a log in the manifest's `format`, or sniff it (sniffed_format).

    `busbw_factor`, `run` and `collective` as in parse_nccl_tests (a JSON document holds one run). Raises
    ConfigError for a format name not in LOG_FORMATS.
    """
    if fmt is None:
        fmt = sniffed_format(text)
    if fmt in JSON_FORMATS:
        if run not in (None, 1):
            raise LogParseError(source, 1, f"run {run} asked for, but a JSON log holds one run")
        return parse_nccl_tests_json(text, source)
    if fmt in TEXT_FORMATS:
        return parse_nccl_tests(text, source, busbw_factor=busbw_factor, run=run, collective=collective)
    raise ConfigError(f"{source}: unknown log format {fmt!r}; expected one of {', '.join(LOG_FORMATS)}")
