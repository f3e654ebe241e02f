"""The network plugin's NCCL settings: aws-ofi-nccl runs NCCL with the Simple protocol alone on the EFA instances of
pre-Hopper GPUs (p3dn, p4d, p4de), and a user's own NCCL_PROTO wins (transports.plugin_env)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.cli.app import app
from simulator.collectives.comm import comm_view
from simulator.collectives.nccl_releases import tuner_release
from simulator.collectives.predict import predict_collective
from simulator.collectives.transports import plugin_env, plugin_net_latency_us
from simulator.collectives.tuner import tuner_time_us
from simulator.measurements.load import read_measured
from tests.collectives.test_collective_model import view
from topologies.build import build
from topologies.presets import load_preset

OUTSIDE_MANIFEST = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "outside_nccl_tests" / "manifest.yaml"


@pytest.mark.parametrize(("transport", "arch", "expected"), [
    ("efa", "volta", {"NCCL_PROTO": "simple"}),  # p3dn
    ("efa", "ampere", {"NCCL_PROTO": "simple"}),  # p4d, p4de, g5
    ("efa", "ada", {"NCCL_PROTO": "simple"}),  # g6e: no table entry, one rail a GPU
    ("efa", "hopper", {}),  # p5, p5e, p5en: RDMA protocol
    ("efa", "blackwell", {}),  # p6
    ("ib", "ampere", {}),
    ("roce", "volta", {}),
    (None, "ampere", {}),
])
def test_which_clusters_the_plugin_sets_simple_on(transport, arch, expected):
    assert plugin_env(transport, arch) == expected


def test_without_gpudirect_rdma_efa_runs_simple_on_any_gpu():
    """aws-ofi-nccl 1.15+: no GPUDirect RDMA, NCCL_PROTO=simple (as a g7e.8xlarge log prints it), on Hopper too."""
    assert plugin_env("efa", "hopper", gpudirect_rdma=False) == {"NCCL_PROTO": "simple"}
    assert plugin_env("efa", "blackwell", gpudirect_rdma=False) == {"NCCL_PROTO": "simple"}
    assert plugin_env("ib", "hopper", gpudirect_rdma=False) == {}


def test_p4d_runs_simple_as_if_the_user_had_set_it():
    """Two p4d.24xlarge: an 8-byte all_reduce runs Simple (the tuner would take LL on InfiniBand), and every size
    is priced as under an explicit NCCL_PROTO=simple."""
    p4d = comm_view(build(load_preset("aws-p4d", nodes=2)))
    ib = view(nodes=2, nics=4, net_gbps=100, nvswitch=True)
    assert predict_collective(ib, "all_reduce", 8).proto == "ll"
    for size in (8, 64 << 10, 4 << 20, 1 << 30):
        plugin = predict_collective(p4d, "all_reduce", size)
        stated = predict_collective(p4d, "all_reduce", size, env={"NCCL_PROTO": "simple"})
        assert plugin.proto == "simple"
        assert plugin.time_s == pytest.approx(stated.time_s)


def test_a_users_nccl_proto_wins():
    """The plugin does not overwrite a variable the user set: NCCL_PROTO=LL on p4d runs LL, and --proto pins too."""
    p4d = comm_view(build(load_preset("aws-p4d", nodes=2)))
    assert predict_collective(p4d, "all_reduce", 8, env={"NCCL_PROTO": "LL"}).proto == "ll"
    assert predict_collective(p4d, "all_reduce", 8, proto="ll128").proto == "ll128"


def test_p5_keeps_ll():
    """p5.48xlarge runs the RDMA protocol: small all_reduces keep LL."""
    p5 = comm_view(build(load_preset("aws-p5", nodes=2)))
    assert predict_collective(p5, "all_reduce", 8).proto == "ll"


def test_the_p4d_logs_small_sizes():
    """The two p4d.24xlarge logs of 2021 (NCCL 2.8.3 and 2.9.9): 167-180 us at 8 B where LL pricing gave 72-82 us.
    Priced Simple, their rows under 1 MiB are within 40% (median; 57% and 67% as LL)."""
    files = ["a100x8-2node-allreduce-awsp4d-efa-eks-awssamples-page.txt",
             "a100x8-2node-allreduce-awsp4d-efa-eks-nccl283-awssamples-page.txt"]
    for log in read_measured(OUTSIDE_MANIFEST, files, lambda _: None).logs:
        errors = [abs(predict_collective(log.view, "all_reduce", row.size_bytes, env=log.entry.env).time_s * 1e6
                      / row.time_us - 1) for row in log.rows if 0 < row.size_bytes < 1 << 20]
        assert statistics.median(errors) < 0.40


def test_the_collective_command_says_what_the_plugin_set():
    """`clustersim collective` names the plugin's setting in its header and JSON, and drops it where the user's
    --env or --proto replaces it."""
    base = ["collective", "--op", "all_reduce", "--topology", "aws-p4d", "--nodes", "2", "-b", "8", "-e", "8"]
    runner = CliRunner()
    text = runner.invoke(app, base).stdout
    assert "# NCCL_PROTO=simple: set by aws-ofi-nccl" in text and text.rstrip().endswith("simple")
    assert json.loads(runner.invoke(app, [*base, "--json"]).stdout)["plugin_env"] == {"NCCL_PROTO": "simple"}
    for override in (["--env", "NCCL_PROTO=LL"], ["--proto", "ll"]):
        result = runner.invoke(app, [*base, *override])
        assert "aws-ofi-nccl" not in result.stdout and result.stdout.rstrip().endswith("ll")
    p5 = runner.invoke(app, ["collective", "--op", "all_reduce", "--topology", "aws-p5", "--nodes", "2", "--json"])
    assert json.loads(p5.stdout)["plugin_env"] == {}


@pytest.mark.parametrize(("arch", "reported"), [("volta", 150.0), ("ampere", 75.0), ("hopper", 75.0),
                                                ("blackwell", 35.0), ("ada", 0.0)])
def test_the_latency_aws_ofi_nccl_reports(arch, reported):
    assert plugin_net_latency_us("efa", arch) == reported
    assert plugin_net_latency_us("ib", arch) == 0.0


def test_nccls_tuner_takes_the_reported_latency_as_its_release_did():
    """tuning.cc: a 2-node tree's network hops cost the plugin's latency on top of NCCL's own from 2.18 (twice for
    Simple, its flush), instead of it in 2.12-2.17, and nothing before 2.12. A tree on two nodes crosses the
    network twice (up and down), so an 8-byte all_reduce over EFA A100s ranks 2 x 75 us slower than the same
    cluster on InfiniBand under 2.18+ (Simple: 2 x 150), 2 x (75 - NCCL's hop) under 2.14, the same under 2.10."""
    efa = view(nodes=2, nics=4, net_gbps=100, transport="efa")
    ib = view(nodes=2, nics=4, net_gbps=100, transport="ib")

    def gap(release, proto):
        rel = tuner_release(release)
        return (tuner_time_us("all_reduce", "tree", proto, 8, efa, rel, 4)
                - tuner_time_us("all_reduce", "tree", proto, 8, ib, rel, 4))

    assert gap((2, 27), "ll") == pytest.approx(2 * 75.0)
    assert gap((2, 18), "simple") == pytest.approx(2 * 150.0)
    own = tuner_release((2, 14)).hop_lat_us["net"]["tree"][0]
    assert gap((2, 14), "ll") == pytest.approx(2 * (75.0 - own))
    assert gap((2, 10), "ll") == pytest.approx(0.0)
