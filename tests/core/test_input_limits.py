"""The input limits: one reader for files (regular files only, 64 MiB), one YAML and one JSON loader (nesting,
values with aliases expanded, duplicate keys, numbers), and user text shown as text."""

from __future__ import annotations

import json
import math
import os
import resource
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.cli.common import plain, printable
from simulator.core.errors import ConfigError
from simulator.core.input_file import MAX_DEPTH, MAX_INPUT_BYTES, MAX_VALUES, read_input_text
from simulator.core.json_text import load_json_text
from simulator.core.units import parse_size
from simulator.core.yaml_text import load_yaml_text


def bomb(fan_out: int, levels: int) -> str:
    """The "billion laughs" shape: each level a list of `fan_out` aliases to the one before."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * fan_out)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fan_out)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_yaml_reads_exponent_floats_as_numbers() -> None:
    """YAML 1.2 floats: 1e308 and 1.5e3 are numbers (PyYAML's 1.1 resolver left them strings); quoted stays text."""
    data = load_yaml_text("a: 1e308\nb: 1.5e3\nc: -2E-3\nd: 1_000\ne: '1e400'\nf: .inf\n", "s.yaml")
    assert data == {"a": 1e308, "b": 1500.0, "c": -0.002, "d": 1000, "e": "1e400", "f": math.inf}


@pytest.mark.parametrize(("text", "message"), [
    ("nodes: 4\nx: 1\nnodes: 1\n", "s.yaml: line 3: key 'nodes' given twice (first on line 1)"),
    ("a: {b: 1, b: 2}\n", "line 1: key 'b' given twice"),
    ("x: 1e400\n", "line 1: x: 1e400 is out of range"),
    ("x: [1, -1e999]\n", "line 1: -1e999 is out of range"),
    (f"x: {10**400}\n", "x: 10000000000000000000... (401 digits) is out of range"),
    (f"x: {'9' * 5000}\n", "(5000 digits) is out of range"),  # beyond int()'s own 4,300-digit limit
    ("x: " + "[" * 100_000, f"nested too deeply (more than {MAX_DEPTH} levels"),
    ("x: " + "{a: " * 50_000, "nested too deeply"),
    (bomb(9, 9), f"more than {MAX_VALUES:,} values"),
    ("a: &a [1, *a]\n", "alias *a is used inside its own anchor"),
    ("x: !!int abc\n", "a value tagged with a type it is not"),
    ("x: !!timestamp abc\n", "a value tagged with a type it is not"),
])
def test_yaml_refusals_name_the_source_and_the_line(text: str, message: str) -> None:
    """Each limit is one ConfigError naming the source (and the key and line where there is one)."""
    with pytest.raises(ConfigError, match="^s.yaml: ") as caught:
        load_yaml_text(text, "s.yaml")
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_merge_keys_still_override() -> None:
    """A key given by a merge (<<) and again in the mapping is an override, not a duplicate."""
    assert load_yaml_text("base: &b {x: 1, y: 2}\nm: {<<: *b, x: 3}\n", "s.yaml")["m"] == {"x": 3, "y": 2}


def test_aliases_within_the_limit_are_expanded() -> None:
    """Aliases reused a few times are fine: 9 x 9 x 9 values expand to the same data as written out."""
    data = load_yaml_text(bomb(9, 3), "s.yaml")
    assert len(data["l2"]) == 9 and data["l2"][0] == data["l1"] and data["l1"][0] == ["lol"] * 9


@pytest.mark.parametrize(("text", "message"), [
    ('{"a": 1, "a": 2}', "key 'a' given twice"),
    ('{"x": 1e400}', "1e400 is out of range"),
    ('{"x": ' + "1" * 30 + "}", "is out of range (integers up to 2**63-1)"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("[" * 500 + "]" * 500, f"nested too deeply (more than {MAX_DEPTH} levels)"),
])
def test_json_refusals(text: str, message: str) -> None:
    """The JSON loader holds the same limits; each is one line naming the source."""
    with pytest.raises(ConfigError, match="^c.json: ") as caught:
        load_json_text(text, "c.json")
    assert message in str(caught.value)


def test_json_keeps_its_syntax_errors_for_the_caller() -> None:
    """Text that is not JSON stays a JSONDecodeError (the caller words it: a log line, a config file)."""
    with pytest.raises(json.JSONDecodeError):
        load_json_text("{", "c.json")
    assert load_json_text('{"a": [1, 2.5, NaN]}', "c.json")["a"][:2] == [1, 2.5]


def test_reader_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    """A directory, a device and a FIFO (opened without blocking) are refused before a byte is read."""
    os.mkfifo(tmp_path / "fifo")
    for path, message in ((tmp_path, "it is a directory"), (Path("/dev/zero"), "not a regular file"),
                          (tmp_path / "fifo", "not a regular file"), (tmp_path / "none", "not found")):
        with pytest.raises(ConfigError, match=message):
            read_input_text(path, "scenario")


def test_reader_caps_the_size_and_reads_text_mode_newlines(tmp_path: Path) -> None:
    """A file over MAX_INPUT_BYTES is refused naming the cap; \\r\\n and \\r read as \\n, as text mode does."""
    big = tmp_path / "big.yaml"
    with big.open("wb") as stream:
        stream.truncate(MAX_INPUT_BYTES + 1)
    with pytest.raises(ConfigError, match="larger than the 64 MiB input limit"):
        read_input_text(big, "scenario")
    small = tmp_path / "s.yaml"
    small.write_bytes(b"a: 1\r\nb: 2\rc: 3\n")
    assert read_input_text(small, "scenario") == "a: 1\nb: 2\nc: 3\n"


def test_printable_escapes_control_characters_only() -> None:
    """ESC, BEL, newline and a bidi override are written as escapes; markup and other text stay as written."""
    assert printable("a\x1b]0;t\x07\nb\u202e [/x] é") == "a\\x1b]0;t\\x07\\nb\\u202e [/x] é"
    assert plain("[bold]x[/]").plain == "[bold]x[/]"


@pytest.mark.parametrize("text", ["inf", "1e400", "nan", "1e30"])
def test_sizes_beyond_a_64_bit_count_are_refused(text: str) -> None:
    """-b/-e sizes that are not finite or pass 2**63-1 bytes: ValueError (it had been an OverflowError)."""
    with pytest.raises(ValueError, match="size out of range"):
        parse_size(text)


@st.composite
def yaml_documents(draw: st.DrawFn) -> str:
    """YAML texts under 1 MB of random shape: alias bombs, deep nesting (flow or block), wide flat lists and
    mappings, and mixtures with duplicate keys and out-of-range numbers."""
    shape = draw(st.sampled_from(["bomb", "flow-deep", "block-deep", "wide-list", "wide-map", "mixed"]))
    if shape == "bomb":
        return bomb(draw(st.integers(2, 40)), draw(st.integers(2, 12)))
    if shape == "flow-deep":
        return "x: " + draw(st.sampled_from(["[", "{a: "])) * draw(st.integers(1, 200_000))
    if shape == "block-deep":
        depth = draw(st.integers(1, 1_400))  # 1,400 levels of indentation: ~0.98 MB
        return "".join(f"{' ' * level}k:\n" for level in range(depth)) + " " * depth + "k: 1\n"
    if shape == "wide-list":
        # 7 bytes an item: 149,000 items are 1,043,004 bytes, under the 1 MiB the test asserts
        return "x: [" + ", ".join(["1.5e3"] * draw(st.integers(1, 149_000))) + "]\n"
    if shape == "wide-map":
        return "".join(f"k{i}: {{a: 1, b: [2, 3]}}\n" for i in range(draw(st.integers(1, 40_000))))
    keys = draw(st.lists(st.sampled_from(["nodes", "seq_len", "name", "x"]), min_size=1, max_size=50))
    values = draw(st.lists(st.sampled_from(["1", "true", "1e400", "1e308", "[1, 2]", "{a: b}", "*a"]),
                           min_size=len(keys), max_size=len(keys)))
    return "a: &a [1, 2]\n" + "".join(f"{k}{i % 3}: {v}\n" for i, (k, v) in enumerate(zip(keys, values, strict=True)))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=yaml_documents())
def test_yaml_under_one_megabyte_stays_bounded(text: str) -> None:
    """Whatever YAML under 1 MB holds, the loader returns data or one ConfigError, in bounded CPU time (20 s
    guards against expansion, which had taken minutes) and without growing the process past ~1 GB."""
    assert len(text.encode()) < 2**20
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    started = time.process_time()
    try:
        load_yaml_text(text, "s.yaml")
    except ConfigError as exc:
        assert "\n" not in str(exc)
    assert time.process_time() - started < 20.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss_before < 2**30
