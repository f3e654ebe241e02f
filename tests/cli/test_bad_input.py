"""Bad input across commands (cases an audit of the CLI found): each exits 2 with one line naming what was
wrong, no traceback, and leaves no file behind; Ctrl-C exits 130."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nccl-tests"
needs_shared = pytest.mark.skipif(not (SHARED / "manifest.yaml").exists(),
                                  reason="../shared/data not beside the checkout")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LOG = "a100x8-1node-8gpu-allreduce-abci-hdr.txt"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simulator.cli.app", *args], capture_output=True, text=True,
                          cwd=cwd)


def refused(out: subprocess.CompletedProcess[str], needle: str) -> bool:
    return out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr


def manifest(folder: Path, log_text: str) -> Path:
    """A one-entry manifest over `log_text` (an ABCI A100 single-node log)."""
    (folder / "log.txt").write_text(log_text)
    path = folder / "manifest.yaml"
    path.write_text("- file: log.txt\n  collective: all_reduce\n  gpu: A100-SXM4-40GB\n  gpus_per_node: 8\n"
                    "  nodes: 1\n  intra_node: nvswitch-nvlink3\n  nccl: 2.8.4\n  format: nccl-tests\n")
    return path


def test_non_utf8_files_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"nodes: \xff\n")
    for args in (("predict", str(bad)), ("predict", "--model", str(bad)), ("topology", "show", str(bad)),
                 ("predict", "--calibration", str(bad))):
        assert refused(run(*args), "not UTF-8"), args


@needs_shared
def test_a_row_that_moves_data_in_no_time_is_refused(tmp_path: Path) -> None:
    text = (SHARED / LOG).read_text().replace("    17.40    0.00    0.01", "     0.00    0.00    0.01", 1)
    out = run("validate", "--manifest", str(manifest(tmp_path, text)))
    assert refused(out, "log.txt") and "takes time" in out.stderr


@needs_shared
def test_fit_options_and_profile_paths(tmp_path: Path) -> None:
    m = manifest(tmp_path, (SHARED / LOG).read_text())
    assert refused(run("crossval", "--manifest", str(m), "--max-nfev", "0"), "--max-nfev")
    (tmp_path / "adir").mkdir()
    assert refused(run("calibrate", "--manifest", str(m), "-o", str(tmp_path / "adir")), "it is a directory")
    before = m.read_text()
    assert refused(run("calibrate", "--manifest", str(m), "-o", str(m)), "that is the manifest")
    assert m.read_text() == before
    profile = tmp_path / "p.yaml"
    profile.write_text("schema_version: 1\nsections:\n- hardware: {gpu: A100-SXM4-40GB, intra_node: x}\n"
                       "  parameters: {net_efficiency: {value: high, prior: 0.9, bounds: [0.1, 1.0]}}\n")
    out = run("collective", "--topology", "abci-a", "--nodes", "1", "--calibration", str(profile))
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr


@pytest.mark.parametrize(("args", "needle"), [
    (("scale", "--grad-accum", "0"), "grad_accum"),
    (("plan", "--model", "llama2-7b", "--topology", "dgx-h100", "--global-batch", "64", "--slack", "nan"), "--slack"),
    (("predict", "--model", "mixtral-8x7b", "--ep", "8", "--moe-imbalance", "inf"), "finite"),
    (("predict", "--model", "mixtral-8x7b", "--ep", "8", "--capacity-factor", "inf", "--pad-to-capacity"), "finite"),
    (("predict", "--train-tokens", "-5"), "--train-tokens"),
    (("predict", "--usd-per-gpu-hour", "-2"), "--usd-per-gpu-hour"),
    (("predict", "--measured-tokens-per-s-per-gpu", "nan"), "measured tokens/s"),
])
def test_bad_numbers_name_the_option(args: tuple[str, ...], needle: str) -> None:
    assert refused(run(*args), needle)


@pytest.mark.parametrize(("extra", "needle"), [
    ("stragglers: {slowdown: .inf}\n", "slowdown"),
    ("jitter: {cv: 0.1, seed: -1}\n", "seed"),
])
def test_bad_scenario_numbers(tmp_path: Path, extra: str, needle: str) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("topology: dgx-h100\nnodes: 1\ntraining: {model: llama2-7b}\n" + extra)
    assert refused(run("predict", str(scenario)), needle)


def test_topology_file_works_where_the_help_says(tmp_path: Path) -> None:
    """--topology takes a YAML file on predict and scale, as on collective and plan."""
    topo = tmp_path / "cluster.yaml"
    shutil.copy(Path(__file__).resolve().parents[2] / "topologies" / "presets" / "dgx-h100.yaml", topo)
    assert run("predict", "--topology", str(topo), "--nodes", "2", "--json").returncode == 0
    assert run("scale", "--topology", str(topo), "--nodes", "1,2").returncode == 0


def test_failed_commands_leave_no_files(tmp_path: Path) -> None:
    """--report into a missing folder: no trace either; a sweep refused before its first row: no CSV; a CSV of
    another kind: refused and left exactly as it was (not left without its last line)."""
    out = run("predict", "--trace", "t.json", "--report", "nodir/r.html", cwd=tmp_path)
    assert refused(out, "nodir") and not (tmp_path / "t.json").exists()
    sweep = str(EXAMPLES / "sweep-3d.yaml")
    assert refused(run("sweep", sweep, "-o", str(tmp_path / "r.csv"), "--workers", "-3"), "--workers")
    assert not (tmp_path / "r.csv").exists()
    other = tmp_path / "mine.csv"
    other.write_text("a,b\n1,2\n3,4")
    assert refused(run("sweep", sweep, "-o", str(other)), "are not this sweep's")
    assert other.read_text() == "a,b\n1,2\n3,4"


@needs_shared
def test_ctrl_c_exits_130(tmp_path: Path) -> None:
    # the shared manifest with one unknown key: its warning marks the logs loaded (below)
    entries = yaml.safe_load((SHARED / "manifest.yaml").read_text())
    for entry in entries:
        entry["file"] = str(SHARED / entry["file"])
    entries[0]["loaded_marker"] = "warns"
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump(entries))
    proc = subprocess.Popen([sys.executable, "-m", "simulator.cli.app", "calibrate", "--manifest",
                             str(manifest), "-o", str(tmp_path / "p.yaml")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # a runner started in the background ignores SIGINT, and a child inherits that
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # the manifest's warning marks the logs loaded and the fit (a few seconds) about to start: a fixed
    # delay raced the fit once it got fast, and a signal during start-up would land before the handler
    assert proc.stderr is not None and proc.stderr.readline().startswith("warning")
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "aborted" in err
    assert not (tmp_path / "p.yaml").exists()


def test_scenario_messages_name_the_real_cause(tmp_path: Path) -> None:
    """An empty scenario says so; an inline topology without nodes names topology.nodes, not the preset-name
    branch of the field ("should be a valid string")."""
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert refused(run("predict", str(empty)), "empty (expected a mapping of fields)")
    inline = tmp_path / "inline.yaml"
    inline.write_text("topology: {gpu: H100-SXM5-80GB, gpus_per_node: 8, intra_node: nvswitch-nvlink4}\n"
                      "training: {model: llama2-7b}\n")
    out = run("predict", str(inline))
    assert refused(out, "topology.nodes: Field required") and "valid string" not in out.stderr
