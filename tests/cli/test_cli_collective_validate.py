"""The `collective` and `validate` commands: output contracts and bad-input handling."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nccl-tests"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the console entry point as a user would (exit codes included)."""
    return subprocess.run([sys.executable, "-m", "simulator.cli.app", *args], capture_output=True, text=True)


def test_collective_default_prints_an_nccl_tests_table():
    """No arguments: an all_reduce sweep 8 B - 8 GiB (31 rows) with algo/proto columns."""
    out = run("collective")
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line and not line.startswith("#")]
    assert len(rows) == 31
    assert rows[0].split()[0] == "8" and rows[-1].split()[0] == str(8 * 1024**3)
    assert rows[-1].split()[-1] in ("ll", "ll128", "simple")


@pytest.mark.parametrize(("op", "count"), [("all_gather", 32768), ("reduce_scatter", 32768), ("alltoall", 32768),
                                           ("all_reduce", 262144), ("broadcast", 262144)])
def test_collective_count_column_follows_nccl_tests(op, count):
    """1 MiB of floats on one 8-GPU node: all_gather, reduce_scatter and alltoall count elements per rank
    (1 MiB / 4 B / 8 = 32768, as the shared b200x8-1node-allgather-vultr.txt log prints), the others all of them."""
    out = run("collective", "--topology", "dgx-b200", "--op", op, "-b", "1M", "-e", "1M")
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line and not line.startswith("#"))
    assert row.split()[:2] == ["1048576", str(count)]


@pytest.mark.parametrize("spelling", ["allreduce", "AllReduce", "all-reduce", "all_reduce_perf"])
def test_collective_op_takes_nccl_tests_tool_names(spelling):
    """--op as nccl-tests names its tools (all_reduce_perf) and as users write it: the same table as all_reduce."""
    canonical = run("collective", "--op", "all_reduce", "-b", "1M", "-e", "4M", "--json")
    spelled = run("collective", "--op", spelling, "-b", "1M", "-e", "4M", "--json")
    assert spelled.returncode == 0, spelled.stderr
    assert json.loads(spelled.stdout) == json.loads(canonical.stdout)
    assert json.loads(spelled.stdout)["op"] == "all_reduce"


def test_collective_json_contract():
    """--json: {"rows": [{size_bytes, time_us, algbw_GBps, busbw_GBps, algo, proto}]}; busbw per nccl-tests."""
    out = run("collective", "--topology", "dgx-a100", "--nodes", "2", "--op", "all_gather",
              "-b", "1M", "-e", "64M", "-f", "4", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert [r["size_bytes"] for r in rows] == [1 << 20, 1 << 22, 1 << 24, 1 << 26]
    for r in rows:
        assert set(r) == {"size_bytes", "time_us", "algbw_GBps", "busbw_GBps", "algo", "proto"}
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * 15 / 16, abs=2e-3)


@pytest.mark.parametrize(("selection", "chosen"), [(None, ["tree", "ll"]), ("model", ["tree", "ll"]),
                                                  ("nccl", ["tree", "ll128"])])
def test_collective_selection(selection, chosen):
    """4 MiB all_reduce on 2 DGX H100 with NCCL 2.8: the model prices tree LL fastest (the default);
    NCCL 2.8's tuner ranks tree LL128 first (--selection nccl)."""
    args = ["collective", "--nodes", "2", "-b", "4M", "-e", "4M", "--nccl-version", "2.8", "--json"]
    out = run(*args, *(["--selection", selection] if selection else []))
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)["rows"][0]
    assert [row["algo"], row["proto"]] == chosen


def test_collective_from_manifest_flags_and_engine_agree():
    """The cluster given as manifest-style flags; the flow engine gives the closed form's times."""
    flags = ["--gpu", "H100-SXM5-80GB", "--gpus-per-node", "8", "--nodes", "2", "--intra-node",
             "nvswitch-nvlink4", "--transport", "efa", "--nics-per-node", "32", "--nic-gbps", "100",
             "-b", "8", "-e", "1G", "-f", "16", "--json"]
    closed = json.loads(run("collective", *flags).stdout)["rows"]
    engine = json.loads(run("collective", *flags, "--engine").stdout)["rows"]
    assert [r["time_us"] for r in closed] == pytest.approx([r["time_us"] for r in engine], rel=1e-6)


def test_collective_flags_state_the_host_cpu():
    """--host-cpu: an alltoall of 1 KiB over 8 Polaris-like nodes (32 ranks, 28 peers on other nodes) pays 2 us
    more a peer on AMD hosts than on Intel ones, the proxy's send and receive launches at 2 us against 1."""
    flags = ["collective", "--gpu", "A100-SXM4-40GB", "--gpus-per-node", "4", "--nodes", "8", "--intra-node",
             "nvlink3-full-mesh-4", "--transport", "slingshot", "--nics-per-node", "2", "--nic-gbps", "200",
             "--op", "alltoall", "-b", "1K", "-e", "1K", "--json"]

    def time_us(*extra: str) -> float:
        out = run(*flags, *extra)
        assert out.returncode == 0, out.stderr
        return float(json.loads(out.stdout)["rows"][0]["time_us"])

    assert time_us("--host-cpu", "AMD EPYC 7543P") - time_us("--host-cpu", "intel") == pytest.approx(28 * 2.0)
    assert time_us() == time_us("--host-cpu", "intel")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["collective", "--host-cpu", "amd"], "--host-cpu describe a cluster by flags and need --gpu"),
        (["collective", "--gpu", "H100-SXM5-80GB", "--gpus-per-node", "8", "--intra-node", "nvswitch-nvlink4",
          "--host-cpu", "amd"], "--host-cpu is the CPU that drives the network"),
        (["collective", "--gpu", "H100-SXM5-80GB", "--gpus-per-node", "8", "--intra-node", "nvswitch-nvlink4",
          "--nodes", "2", "--transport", "ib", "--nics-per-node", "8", "--host-cpu", "zen"], "host_cpu"),
        (["collective", "--topology", "no-such-cluster"], "no-such-cluster"),
        (["collective", "-b", "-8"], "-b"),
        (["collective", "--nodes", "0"], "nodes"),
        (["collective", "--op", "allredux"], "--op: unknown collective 'allredux'"),
        (["collective", "--algo", "butterfly"], "--algo"),
        (["collective", "--op", "alltoall", "--algo", "tree"], "point-to-point sends"),  # was silently ignored
        (["collective", "--gpu", "H100-SXM5-80GB"], "--gpus-per-node"),
        # a cluster by flags took 0 nodes or 0 NICs as 1
        (["collective", "--gpu", "H100-SXM5-80GB", "--gpus-per-node", "8", "--intra-node", "nvswitch-nvlink4",
          "--nodes", "0"], "nodes: Input should be greater than or equal to 1"),
        (["collective", "--gpu", "H100-SXM5-80GB", "--gpus-per-node", "8", "--intra-node", "nvswitch-nvlink4",
          "--nodes", "2", "--transport", "ib", "--nics-per-node", "0"], "nics_per_node: Input should be greater"),
        (["validate", "--manifest", "does/not/exist.yaml"], "not found"),
        (["collective", "--nccl-version", "latest"], "--nccl-version"),
        (["validate", "--manifest", "does/not/exist.yaml", "--nccl-version", "3.0"], "--nccl-version"),
        (["collective", "--env", "NCCL_MAX_NCHANNELS=many"], "NCCL_MAX_NCHANNELS"),
        (["collective", "--selection", "tuner"], "--selection: unknown selection 'tuner' (valid: model, nccl)"),
        (["validate", "--manifest", "does/not/exist.yaml", "--selection", "fastest"], "--selection"),
        (["crossval", "--manifest", "does/not/exist.yaml", "--selection", "NCCL"], "--selection"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(args, needle):
    """Bad input: exit code 2, one line on stderr naming the culprit, no traceback."""
    out = run(*args)
    assert out.returncode == 2
    assert needle in out.stderr
    assert "Traceback" not in out.stderr


def test_validate_names_the_line_of_a_truncated_log(tmp_path):
    """A truncated log in a manifest: exit 2 and the message names file and line."""
    log = tmp_path / "bad.txt"
    log.write_text(
        "# size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
        "  8 2 float sum -1 25.0 0.00 0.00 0 25.0 0.00 0.00 0\n"
        "  16 4 float sum -1 25.\n"
    )
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(
        "- {file: bad.txt, collective: all_reduce, gpu: H100-SXM5-80GB, gpus_per_node: 8, nodes: 1,"
        " intra_node: nvswitch-nvlink4}\n"
    )
    out = run("validate", "--manifest", str(manifest))
    assert out.returncode == 2
    assert "bad.txt:3" in out.stderr


def test_validate_a_manifest_entry_missing_a_field(tmp_path):
    """A manifest entry without `gpu`: exit 2 naming the entry and the field."""
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text("- {file: x.txt, collective: all_reduce, gpus_per_node: 8, nodes: 1, intra_node: pcie4}\n")
    out = run("validate", "--manifest", str(manifest))
    assert out.returncode == 2
    assert "gpu" in out.stderr


@pytest.mark.skipif(not (SHARED / "manifest.yaml").exists(), reason="shared measured data not present")
def test_validate_json_over_the_shared_data():
    """Every shared log is predicted; the JSON follows the contract and counts every non-empty row."""
    out = run("validate", "--manifest", str(SHARED / "manifest.yaml"), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert len(report["logs"]) == 40
    for log in report["logs"]:
        assert {"file", "points", "median_abs_pct_error", "p90_abs_pct_error", "rows"} <= set(log)
        assert log["points"] == len(log["rows"]) > 0
        for row in log["rows"]:
            assert {"size_bytes", "measured_time_us", "predicted_time_us"} <= set(row)
            assert row["size_bytes"] > 0 and row["predicted_time_us"] > 0
    assert report["points"] == sum(log["points"] for log in report["logs"])
    assert isinstance(report["median_abs_pct_error"], float)


@pytest.mark.skipif(not (SHARED / "manifest.yaml").exists(), reason="shared measured data not present")
def test_validate_selection_over_the_shared_data():
    """Both selections predict every shared row; the default is the model's, and NCCL's choice differs
    from it somewhere."""
    reports = {}
    for selection in (None, "model", "nccl"):
        out = run("validate", "--manifest", str(SHARED / "manifest.yaml"), "--json",
                  *(["--selection", selection] if selection else []))
        assert out.returncode == 0, out.stderr
        reports[selection] = json.loads(out.stdout)
    assert reports[None] == reports["model"]
    assert reports["nccl"]["points"] == reports["model"]["points"]
    assert reports["nccl"]["logs"] != reports["model"]["logs"]
