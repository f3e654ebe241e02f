"""Reading the JSON document that nccl-tests writes with `-J FILE` (schema version 3).

The schema, from nccl-tests src/util.cu (jsonOutputInit, writeDeviceReport, writeBenchmarkLine*,
writeResultFooter), is one object:

    {"version": 3, "start_time": "...", "args": ["./build/all_reduce_perf", "-b", "8", ...],
     "env": [...], "nccl_version": 22602,
     "config": {"nthreads": 1, "ngpus": 1, "minimum_bytes": 8, ..., "devices": [
         {"rank": 0, "group": 0, "pid": 1, "hostname": "node1", "device": 0,
          "device_hex": "0000:1b:00", "device_info": "NVIDIA H100 80GB HBM3"}, ...]},
     "results": [{"size": 8, "count": 2, "type": "float", "redop": "sum", "root": "    -1",
                  "out_of_place": {"time": 25.1, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0.0},
                  "in_place": {...}, "actual_iterations": 20, "experiment_name": ""}, ...],
     "out_of_bounds": {"count": 0, "okay": "true"},
     "average_bus_bandwidth": {"bandwidth": 139.56, "okay": "unchecked"},
     "errors": [], "end_time": "..."}

`devices` holds one entry per process (its first rank), so ranks = len(devices) x nthreads x ngpus.
Times are in us ("cpu_time" instead of "time" under -C), bandwidths in GB/s; NaN is written as the
string "nan"; "nwrong" is null without -c; "out_of_place" is null in trace-replay runs. nccl-tests
writes the document on one line; a pretty-printed one works the same, with real line numbers.

This module walks the document: it finds each result record's line, checks its fields and returns
them keyed by NcclRow's field names; simulator.measurements.nccl_tests.parse_nccl_tests_json builds the
rows (this module does not import that one, which dispatches to it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from simulator.core.errors import LogParseError
from simulator.core.json_text import load_json_text

_WHITESPACE = re.compile(r"\s*")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class JsonRecord:
    """One element of "results" and the 1-based line where it starts in the source text."""

    fields: dict[str, Any]
    line_no: int


@dataclass(frozen=True)
class JsonDocument:
    """The decoded top-level object (empty for a bare list) and its result records."""

    top: dict[str, Any]
    records: tuple[JsonRecord, ...]
    results_line_no: int


def _skip_ws(text: str, pos: int) -> int:
    match = _WHITESPACE.match(text, pos)
    return match.end() if match else pos


def _container_offsets(text: str, pos: int) -> list[tuple[str | None, int]]:
    """(key or None, offset of the value) for each member of the object/list starting at `pos`.

    Only called on text that json.loads already accepted, so the structure is known to be valid.
    """
    closing = "}" if text[pos] == "{" else "]"
    members: list[tuple[str | None, int]] = []
    pos = _skip_ws(text, pos + 1)
    if text[pos] == closing:
        return members
    while True:
        key: str | None = None
        if closing == "}":
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _skip_ws(text, _skip_ws(text, pos) + 1)  # past ':'
        members.append((key, pos))
        _, pos = _DECODER.raw_decode(text, pos)
        pos = _skip_ws(text, pos)
        if text[pos] == closing:
            return members
        pos = _skip_ws(text, pos + 1)  # past ','


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def decode_json_log(text: str, source: str) -> JsonDocument:
    """Decode an nccl-tests -J document (or a bare list of result records) with record line numbers.

    Raises LogParseError for invalid JSON (at the decoder's line), a top level that is neither an
    object with a "results" list nor a list, a result record that is not an object, and no records.
    """
    try:
        document = load_json_text(text, source)
    except json.JSONDecodeError as exc:
        raise LogParseError(
            source, exc.lineno, f"invalid JSON ({exc.msg}, column {exc.colno}); expected nccl-tests -J output"
        ) from None
    start = _skip_ws(text, 0)
    if isinstance(document, dict):
        offsets = dict(_container_offsets(text, start))
        results = document.get("results")
        if not isinstance(results, list):
            raise LogParseError(
                source,
                _line_of(text, offsets.get("results", start)),
                'expected a "results" list of records (nccl-tests -J output), found '
                + ("none" if results is None else type(results).__name__),
            )
        list_start = offsets["results"]
        top: dict[str, Any] = document
    elif isinstance(document, list):
        results, list_start, top = document, start, {}
    else:
        raise LogParseError(source, 1, "expected a JSON object (nccl-tests -J output) or a list of records")
    records: list[JsonRecord] = []
    for item, (_, offset) in zip(results, _container_offsets(text, list_start), strict=True):
        line_no = _line_of(text, offset)
        if not isinstance(item, dict):
            raise LogParseError(
                source, line_no, f"result record is a {type(item).__name__}, expected an object"
            )
        records.append(JsonRecord(fields=item, line_no=line_no))
    if not records:
        raise LogParseError(
            source, _line_of(text, list_start), "no result records; expected nccl-tests -J output"
        )
    return JsonDocument(top=top, records=tuple(records), results_line_no=_line_of(text, list_start))


def _require(record: JsonRecord, key: str, source: str, where: str = "") -> Any:
    container: Any = record.fields.get(where) if where else record.fields
    if not isinstance(container, dict) or key not in container:
        path = f"{where}.{key}" if where else key
        raise LogParseError(source, record.line_no, f'result record has no "{path}" field')
    return container[key]


def _as_int(record: JsonRecord, key: str, source: str) -> int:
    """An integer >= -1 (root is -1 when unused); nccl-tests writes "root" as a padded string."""
    value = _require(record, key, source)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise LogParseError(source, record.line_no, f'"{key}" is {value!r}, expected an integer')
    return value


def _as_name(record: JsonRecord, key: str, source: str) -> str:
    value = _require(record, key, source)
    if not isinstance(value, str) or not value.strip():
        raise LogParseError(source, record.line_no, f'"{key}" is {value!r}, expected a name')
    return value.strip()


def _as_float(record: JsonRecord, where: str, key: str, source: str, *, nan_ok: bool) -> float | None:
    """A number >= 0 from a timing object; "nan" (how nccl-tests writes NaN) or null give None if nan_ok."""
    value = _require(record, key, source, where)
    if value is None or (isinstance(value, str) and value.strip().lower() == "nan"):
        if nan_ok:
            return None
    elif not isinstance(value, bool) and isinstance(value, int | float) and value >= 0:
        return float(value)
    raise LogParseError(source, record.line_no, f'"{where}.{key}" is {value!r}, expected a number >= 0')


def record_fields(record: JsonRecord, source: str) -> dict[str, Any]:
    """The NcclRow fields of one result record, by NcclRow's field names.

    Requires size, count, type, redop, root, out_of_place and in_place (each null or with time or
    cpu_time, alg_bw, bus_bw); anything missing or mistyped raises LogParseError at the record's line.
    Trace replay writes out_of_place as null: the in-place timing is then the only time column.
    """
    sets: list[tuple[float | None, float | None, float | None]] = []
    for where in ("out_of_place", "in_place"):
        body = _require(record, where, source)
        if body is not None:
            time_key = (
                "cpu_time" if isinstance(body, dict) and "time" not in body and "cpu_time" in body else "time"
            )
            sets.append(
                (
                    _as_float(record, where, time_key, source, nan_ok=False),
                    _as_float(record, where, "alg_bw", source, nan_ok=True),
                    _as_float(record, where, "bus_bw", source, nan_ok=True),
                )
            )
    if not sets:
        raise LogParseError(source, record.line_no, "out_of_place and in_place are both null")
    first, inplace = sets[0], (sets[1] if len(sets) > 1 else (None, None, None))
    return {
        "size_bytes": _as_int(record, "size", source),
        "count": _as_int(record, "count", source),
        "dtype": _as_name(record, "type", source),
        "redop": _as_name(record, "redop", source),
        "root": _as_int(record, "root", source),
        "time_us": first[0],
        "algbw_GBps": first[1],
        "busbw_GBps": first[2],
        "inplace_time_us": inplace[0],
        "inplace_algbw_GBps": inplace[1],
        "inplace_busbw_GBps": inplace[2],
        "line_no": record.line_no,
    }


def nccl_version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE to "major.minor.patch": 22602 -> 2.26.2 (>= 2.9), 2804 -> 2.8.4 (older)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


@dataclass(frozen=True)
class JsonRun:
    """What the document says about the run; best effort (absent or odd fields give None / ())."""

    program: str | None  # argv[0], e.g. "./build/all_reduce_perf"
    nranks: int | None
    hosts: tuple[str, ...]
    devices: tuple[str, ...]
    nccl_version: str | None
    avg_busbw_GBps: float | None
    gpus_per_thread: int | None  # config.ngpus: GPUs one test thread drives (-g)


def run_info(top: dict[str, Any]) -> JsonRun:
    """Program, ranks, hosts, devices, NCCL version, average busbw and GPUs per thread from the top-level object.

    One "devices" entry is written per process, so ranks = len(devices) x nthreads x ngpus.
    """
    config: dict[str, Any] = top["config"] if isinstance(top.get("config"), dict) else {}
    devices = [d for d in config.get("devices") or [] if isinstance(d, dict)]
    nthreads, ngpus = config.get("nthreads"), config.get("ngpus")
    args, code, avg = top.get("args"), top.get("nccl_version"), top.get("average_bus_bandwidth")
    bandwidth = avg.get("bandwidth") if isinstance(avg, dict) else None
    return JsonRun(
        program=args[0] if isinstance(args, list) and args and isinstance(args[0], str) else None,
        nranks=len(devices) * nthreads * ngpus
        if devices and isinstance(nthreads, int) and isinstance(ngpus, int)
        else None,
        hosts=tuple(dict.fromkeys(str(d["hostname"]) for d in devices if d.get("hostname"))),
        devices=tuple(dict.fromkeys(str(d["device_info"]).strip() for d in devices if d.get("device_info"))),
        nccl_version=nccl_version_from_code(code) if isinstance(code, int) and code > 0 else None,
        avg_busbw_GBps=float(bandwidth) if isinstance(bandwidth, int | float) else None,
        gpus_per_thread=ngpus if isinstance(ngpus, int) and not isinstance(ngpus, bool) and ngpus >= 1 else None,
    )
