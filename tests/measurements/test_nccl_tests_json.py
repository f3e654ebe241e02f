"""The nccl-tests -J JSON parser, on a hand-written schema-3 fixture and broken variants of it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from simulator.core.errors import LogParseError
from simulator.measurements.nccl_tests import NcclRow, parse_log, parse_nccl_tests_json
from simulator.measurements.nccl_tests_json import nccl_version_from_code

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "nccl_tests_all_reduce_2x8.json"


def _document() -> dict[str, Any]:
    loaded = json.loads(FIXTURE.read_text())
    assert isinstance(loaded, dict)
    return loaded


def _pretty(document: Any) -> str:
    """One result record per line from line 3 on: `{"results": [` is line 1, records at 2, 3, ..."""
    records = ",\n".join(json.dumps(r) for r in document["results"])
    rest = {k: v for k, v in document.items() if k != "results"}
    return '{"results": [\n' + records + "\n],\n" + json.dumps(rest)[1:] + "\n"


def test_fixture_rows_and_record_lines() -> None:
    """Four records; each row carries the line where its record starts in the pretty-printed file."""
    log = parse_log(FIXTURE.read_text(), FIXTURE.name)
    assert log.rows[0] == NcclRow(
        1048576, 262144, "float", "sum", -1, 71.93, 14.58, 27.33, 71.47, 14.67, 27.51, 30
    )
    assert [(r.size_bytes, r.line_no) for r in log.rows] == [
        (1048576, 30),
        (2097152, 34),
        (4194304, 38),
        (8388608, 42),
    ]
    assert log.rows[-1].time_us == 132.6


def test_fixture_run_metadata() -> None:
    """Collective from argv[0]; 2 processes x 8 GPUs = 16 ranks, 8 GPUs a thread (config.ngpus); NCCL code
    22602 is 2.26.2."""
    log = parse_nccl_tests_json(FIXTURE.read_text(), "f.json")
    assert (log.collective, log.nranks, log.nccl_version) == ("all_reduce", 16, "2.26.2")
    assert log.gpus_per_thread == 8
    assert (log.hosts, log.devices) == (("node-a", "node-b"), ("NVIDIA H100 80GB HBM3",))
    assert log.avg_busbw_GBps == 70.60125


def test_one_line_document_as_nccl_tests_writes_it() -> None:
    """nccl-tests writes the document on one line: same rows, all at line 1."""
    text = json.dumps(_document())
    rows = parse_nccl_tests_json(text, "one.json").rows
    assert [r.line_no for r in rows] == [1, 1, 1, 1]
    assert [r.time_us for r in rows] == [71.93, 76.24, 94.38, 132.6]


def test_missing_field_names_the_record_line() -> None:
    """A record without in_place.bus_bw raises at that record's line, naming the field."""
    document = _document()
    del document["results"][2]["in_place"]["bus_bw"]
    with pytest.raises(LogParseError) as info:
        parse_nccl_tests_json(_pretty(document), "broken.json")
    assert info.value.line_no == 4
    assert 'no "in_place.bus_bw" field' in str(info.value)


def test_missing_size_names_the_record_line() -> None:
    """A record without size raises at its line."""
    document = _document()
    del document["results"][0]["size"]
    with pytest.raises(LogParseError, match='no "size" field') as info:
        parse_nccl_tests_json(_pretty(document), "broken.json")
    assert info.value.line_no == 2


def test_truncated_document_names_the_decoder_line() -> None:
    """A document cut off mid-record (the run died) is invalid JSON at the line where it ends."""
    text = _pretty(_document())
    cut = text[: text.index('"size": 4194304') + 5]
    with pytest.raises(LogParseError, match="invalid JSON") as info:
        parse_nccl_tests_json(cut, "cut.json")
    assert info.value.line_no == 4


def test_nan_bandwidth_is_none_but_nan_time_is_an_error() -> None:
    """nccl-tests writes NaN as "nan": a NaN bandwidth becomes None, a NaN time is rejected."""
    document = _document()
    document["results"][0]["out_of_place"]["alg_bw"] = "nan"
    assert parse_nccl_tests_json(_pretty(document)).rows[0].algbw_GBps is None
    document["results"][1]["out_of_place"]["time"] = "nan"
    with pytest.raises(LogParseError, match="out_of_place.time") as info:
        parse_nccl_tests_json(_pretty(document))
    assert info.value.line_no == 3


def test_trace_replay_null_out_of_place_uses_in_place_time() -> None:
    """out_of_place null (trace replay): the in-place timing is the only time column."""
    document = _document()
    document["results"][0]["out_of_place"] = None
    row = parse_nccl_tests_json(_pretty(document)).rows[0]
    assert (row.time_us, row.algbw_GBps, row.inplace_time_us) == (71.47, 14.67, None)


def test_bare_record_list() -> None:
    """A bare list of result records parses; no run metadata."""
    records = copy.deepcopy(_document()["results"][:2])
    log = parse_log(json.dumps(records), "bare.json")
    assert [r.size_bytes for r in log.rows] == [1048576, 2097152]
    assert (log.collective, log.nranks, log.nccl_version) == (None, None, None)


def test_no_results_is_an_error() -> None:
    """A document without result records (run failed before the first size) is an error."""
    document = _document()
    document["results"] = []
    with pytest.raises(LogParseError, match="no result records"):
        parse_nccl_tests_json(json.dumps(document), "empty.json")


def test_nccl_version_codes() -> None:
    """NCCL_VERSION_CODE: 22602 -> 2.26.2 (2.9 and later), 2804 -> 2.8.4 (before 2.9)."""
    assert (nccl_version_from_code(22602), nccl_version_from_code(2804)) == ("2.26.2", "2.8.4")
