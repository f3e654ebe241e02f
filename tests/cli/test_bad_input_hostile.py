"""Hostile input to every command that reads a file: devices, FIFOs, directories, oversized files, YAML alias
bombs, nesting tens of thousands deep, duplicate keys, booleans for counts, numbers that overflow, markup and
terminal escapes in names and file names. Each bad input exits 2 with one line on stderr naming what was
wrong, no traceback, nothing written, and the process stays bounded (it is killed past TIMEOUT_S, and its
peak memory is read back); names that are merely odd are shown as written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
TIMEOUT_S = 60.0  # a guard: the inputs below used to run for minutes or until memory ran out
MAX_RSS_BYTES = 500 * 2**20
MARKUP = "[/x][bold]"
ESCAPE = "\x1b]0;retitled\x07\x1b[31m"
HTML = "<script>alert(1)</script><a href='https://example.com/'>link</a>"
EVIL = f"{MARKUP}{HTML}{ESCAPE}"

BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
    for prev, name in zip(["", "a", "b", "c", "d", "e", "f", "g", "h"], "abcdefghi", strict=True))
# the bomb in a manifest entry's file: the anchors in a first entry, the last one used as the file name
MANIFEST_BOMB = "- {" + BOMB.strip().replace("\n", ", ").replace("i: &i", "z: &i") + "}\n- {file: *i}\n"
SCENARIO = ("name: s\ntopology: dgx-h100\nnodes: 1\n"
            "training: {model: llama2-7b, seq_len: 2048, micro_batch: 1, global_batch: 8}\n")
MANIFEST_ENTRY = ("- file: {file}\n  collective: all_reduce\n  gpu: A100-SXM4-40GB\n  gpus_per_node: 8\n  nodes: 1\n"
                  "  intra_node: nvswitch-nvlink3\n  format: {format}\n")
MPT = {"model_type": "mpt", "n_layers": 2, "d_model": 64, "n_heads": 4, "max_seq_len": 128, "vocab_size": 100}


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    max_rss_bytes: int


def run_bounded(args: list[str], cwd: Path) -> Outcome:
    """The CLI in a subprocess, killed past TIMEOUT_S; its own peak resident memory from wait4."""
    out, err = cwd / ".stdout", cwd / ".stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "simulator.cli.app", *args], cwd=cwd, stdout=stdout,
                                stderr=stderr, stdin=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"})
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                pytest.fail(f"{args} still running after {TIMEOUT_S:.0f} s")
            time.sleep(0.05)
    code = os.waitstatus_to_exitcode(status)
    rss = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    texts = out.read_text(errors="replace"), err.read_text(errors="replace")
    out.unlink()
    err.unlink()
    return Outcome(code, *texts, rss)


def _write(folder: Path, name: str, text: str) -> str:
    (folder / name).write_text(text)
    return name


def _manifest(folder: Path, file: str, fmt: str = "nccl-tests") -> str:
    return _write(folder, "m.yaml", MANIFEST_ENTRY.format(file=file, format=fmt))


def _fifo(folder: Path) -> str:
    os.mkfifo(folder / "fifo.yaml")
    return "fifo.yaml"


def _oversized(folder: Path) -> str:
    with (folder / "big.yaml").open("wb") as stream:  # sparse: 65 MiB of zeros take no disk
        stream.truncate(65 * 2**20)
    return "big.yaml"


def _cases(folder: Path, published: str) -> str:
    """A one-case file whose leading metric (MFU %) is `published` as YAML writes it; a second metric besides."""
    case = {"id": "c1", "model": {"name": "m", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 512, "vocab": 1000},
            "training": {"framework": "Megatron-LM", "strategy": ["dp"], "micro_batch": 1, "global_batch": 8},
            "cluster": {"gpu": "h100_80gb", "num_gpus": 8},
            "metrics": {"MFU_%": "__RAW__", "throughput_tokens_per_s_per_GPU": 1000.0}, "note": ""}
    return _write(folder, "cases.yaml", json.dumps([case]).replace('"__RAW__"', published))


def _deep_json(depth: int) -> str:
    return '{"model_type": "llama", "x": ' + "[" * depth + "]" * depth + "}"


# (id, arguments built in the test's folder, a phrase the one line must hold)
CASES: list[tuple[str, Callable[[Path], list[str]], str]] = [
    ("model-dev-zero", lambda d: ["predict", "--model", "/dev/zero", "--json"], "not a regular file"),
    ("scenario-dev-urandom", lambda d: ["predict", "/dev/urandom"], "not a regular file"),
    ("manifest-names-dev-zero", lambda d: ["validate", "--manifest", _manifest(d, "/dev/zero")], "not a regular file"),
    ("scenario-fifo", lambda d: ["predict", _fifo(d)], "not a regular file"),
    ("sweep-directory", lambda d: ["sweep", ".", "-o", "out.csv"], "it is a directory"),
    ("topology-directory", lambda d: ["topology", "show", "."], "it is a directory"),
    ("scenario-over-64-mib", lambda d: ["predict", _oversized(d)], "64 MiB"),
    ("calibration-over-64-mib", lambda d: ["predict", "--calibration", _oversized(d)], "64 MiB"),
    ("escape-in-file-name", lambda d: ["predict", f"{ESCAPE}.yaml"], "\\x1b]0;retitled\\x07"),
    ("markup-in-file-name", lambda d: ["predict", f"{MARKUP}.yaml"], MARKUP),
    ("sweep-alias-bomb", lambda d: ["sweep", _write(d, "s.yaml", BOMB), "-o", "out.csv"], "100,000 values"),
    ("manifest-alias-bomb", lambda d: ["validate", "--manifest", _write(d, "m.yaml", MANIFEST_BOMB)],
     "100,000 values"),
    ("scenario-alias-bomb", lambda d: ["predict", _write(d, "s.yaml", BOMB)], "100,000 values"),
    ("manifest-nested-100k", lambda d: ["validate", "--manifest", _write(d, "m.yaml", "[" * 100_000)],
     "nested too deeply"),
    ("sweep-nested-50k", lambda d: ["sweep", _write(d, "s.yaml", "base: " + "{a: " * 50_000), "-o", "out.csv"],
     "nested too deeply"),
    ("json-log-nested-100k", lambda d: ["validate", "--manifest", _manifest(
        d, _write(d, "log.json", "[" * 100_000 + "]" * 100_000), "nccl-tests-json")], "nested too deeply"),
    ("hf-config-nested-100k", lambda d: ["predict", "--model", _write(d, "config.json", _deep_json(100_000))],
     "nested too deeply"),
    ("duplicate-key", lambda d: ["predict", _write(d, "s.yaml", SCENARIO + "nodes: 4\n")], "'nodes' given twice"),
    ("bool-node-count", lambda d: ["predict", _write(d, "s.yaml", SCENARIO.replace("nodes: 1", "nodes: true"))],
     "nodes"),
    ("bool-micro-batch", lambda d: ["predict", _write(d, "s.yaml", SCENARIO.replace("micro_batch: 1",
                                                                                     "micro_batch: true"))],
     "micro_batch"),
    ("seq-len-1e400", lambda d: ["predict", _write(d, "s.yaml", SCENARIO.replace("seq_len: 2048", "seq_len: 1e400"))],
     "seq_len: 1e400 is out of range"),
    ("seq-len-10-pow-400", lambda d: ["predict", _write(d, "s.yaml", SCENARIO.replace(
        "seq_len: 2048", f"seq_len: {10**400}"))], "seq_len: 1000"),
    ("model-hidden-10-pow-400", lambda d: ["predict", "--model", _write(
        d, "m.yaml", f"name: m\nlayers: 2\nhidden: {10**400}\nheads: 4\nvocab: 100\n")], "hidden: 1000"),
    ("hf-hidden-10-pow-400", lambda d: ["predict", "--model", _write(d, "config.json", json.dumps(
        {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 10**400}))], "out of range"),
    ("cases-seq-len-10-pow-400", lambda d: ["validate-training", _write(
        d, "cases.yaml", f"- id: c1\n  model: {{seq_len: {10**400}}}\n")], "out of range"),
    ("straggler-1.7e308", lambda d: ["predict", _write(d, "s.yaml", SCENARIO + "stragglers: {slowdown: 1.7e308}\n")],
     "stragglers.slowdown"),
    ("collective-e-inf", lambda d: ["collective", "-e", "inf"], "-e: size out of range"),
    ("collective-e-1e400", lambda d: ["collective", "-e", "1e400"], "-e: size out of range"),
    ("hf-model-type-list", lambda d: ["predict", "--model", _write(d, "config.json", json.dumps(
        {"model_type": ["llama"]}))], "model_type ['llama'] not supported"),
    ("mpt-expansion-1e308", lambda d: ["predict", "--model", _write(d, "config.json", json.dumps(
        {**MPT, "expansion_ratio": 1e308}))], "expansion_ratio"),
    ("mpt-expansion-infinity", lambda d: ["predict", "--model", _write(d, "config.json", json.dumps(
        {**MPT, "expansion_ratio": float("inf")}))], "expansion_ratio"),
    ("mpt-expansion-nan", lambda d: ["predict", "--model", _write(d, "config.json", json.dumps(
        {**MPT, "expansion_ratio": float("nan")}))], "expansion_ratio"),
    ("cases-vp-boolean", lambda d: ["validate-training", _write(d, "cases.yaml", "- {id: c1, model: {}, training: "
                                    "{strategy: [pp], vp: true}, cluster: {gpu: H100}, metrics: {}}\n")],
     "training.vp"),
    ("published-metric-nan", lambda d: ["validate-training", _cases(d, ".nan")], "metrics.MFU_%"),
    ("published-metric-zero", lambda d: ["validate-training", _cases(d, "0")], "metrics.MFU_%"),
    ("published-metric-negative", lambda d: ["validate-training", _cases(d, "-5.0")], "metrics.MFU_%"),
]


@pytest.mark.parametrize(("build", "needle"), [(build, needle) for _, build, needle in CASES],
                         ids=[case_id for case_id, _, _ in CASES])
def test_hostile_input_is_refused_in_one_line(tmp_path: Path, build: Callable[[Path], list[str]],
                                              needle: str) -> None:
    """Exit 2, one line on stderr holding `needle` (control characters escaped), no traceback, no file
    written, bounded memory."""
    args = build(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    out = run_bounded(args, tmp_path)
    assert out.returncode == 2, (args, out.stderr[-2000:])
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr[-2000:]
    assert needle in out.stderr, out.stderr
    assert "\x1b" not in out.stderr and "\x07" not in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert out.max_rss_bytes < MAX_RSS_BYTES, out.max_rss_bytes


def _evil_scenario(folder: Path) -> Path:
    path = folder / "evil.yaml"
    path.write_text(f"name: {json.dumps(EVIL)}\ntopology:\n  name: {json.dumps(EVIL)}\n  gpu: H100-SXM5-80GB\n"
                    "  gpus_per_node: 8\n  nodes: 1\n  intra_node: nvswitch-nvlink4\ntraining:\n"
                    f"  model: {{name: {json.dumps(EVIL)}, layers: 2, hidden: 256, heads: 4, vocab: 1000}}\n"
                    "  seq_len: 512\n  micro_batch: 1\n  global_batch: 8\n")
    return path


def test_names_with_markup_and_escapes_are_shown_as_text(tmp_path: Path) -> None:
    """A scenario, model and topology named with console markup, HTML and terminal escapes: predict, compare and
    topology show print the names as written, the escapes as \\x1b (never raw)."""
    scenario = _evil_scenario(tmp_path)
    for args in (["predict", str(scenario)], ["compare", str(EXAMPLES / "base.yaml"), str(scenario)],
                 ["predict", "--model", str(tmp_path / "m.yaml")], ["topology", "show", str(tmp_path / "t.yaml")],
                 ["collective", "--topology", str(tmp_path / "t.yaml"), "-e", "1M"]):
        (tmp_path / "m.yaml").write_text(f"name: {json.dumps(EVIL)}\nlayers: 2\nhidden: 256\nheads: 4\nvocab: 1000\n")
        (tmp_path / "t.yaml").write_text(f"name: {json.dumps(EVIL)}\ngpu: H100-SXM5-80GB\ngpus_per_node: 8\nnodes: 1\n"
                                         "intra_node: nvswitch-nvlink4\n")
        out = run_bounded(args, tmp_path)
        assert out.returncode == 0, (args, out.stderr[-2000:])
        shown = "".join(out.stdout.split())  # the table wraps a long name over lines
        assert "".join(f"{MARKUP}<script>alert(1)</script>".split()) in shown, (args, out.stdout)
        assert "\\x1b]0;retitled\\x07" in shown and "\x1b]0" not in out.stdout, args


def test_names_in_html_reports_are_escaped(tmp_path: Path) -> None:
    """<script> in every name is escaped in the step and compare reports; in compare's chart a scenario's
    <a href> is text, not a link (plotly reads its labels as HTML, so they are entity-escaped)."""
    scenario = _evil_scenario(tmp_path)
    for args in (["predict", str(scenario), "--report", "step.html"],
                 ["compare", str(EXAMPLES / "base.yaml"), str(scenario), "--report", "compare.html"]):
        out = run_bounded(args, tmp_path)
        assert out.returncode == 0, (args, out.stderr[-2000:])
    for page in ("step.html", "compare.html"):
        text = (tmp_path / page).read_text()
        assert "<script>alert(1)" not in text and "&lt;script&gt;alert(1)" in text, page
        assert "<a href='https://example.com/'" not in text, page
    chart = (tmp_path / "compare.html").read_text()
    assert "&lt;a href=&#x27;https:\\u002f\\u002fexample.com\\u002f&#x27;&gt;" in chart  # the chart's JSON data


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    """Each file-reading flag given a FIFO: refused at once (it had waited for a writer for ever)."""
    _fifo(tmp_path)
    for args in (["predict", "--model", "fifo.yaml"], ["predict", "--topology", "fifo.yaml"],
                 ["validate", "--manifest", "fifo.yaml"], ["validate-training", "fifo.yaml"],
                 ["predict", "--calibration", "fifo.yaml"]):
        out = run_bounded(args, tmp_path)
        assert out.returncode == 2 and "not a regular file" in out.stderr, (args, out.stderr)
