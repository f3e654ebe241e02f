"""Two nodes of NVSwitch servers: NCCL's search rates the tree above the network, so large all_reduces run as trees
that beat the ring's network bound (select.tree_gain)."""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from simulator.collectives.comm import comm_view
from simulator.collectives.nccl_releases import tuner_release
from simulator.collectives.predict import predict_collective
from simulator.collectives.select import tree_gain
from simulator.measurements.load import read_measured
from tests.collectives.test_collective_model import view
from topologies.build import build
from topologies.presets import load_preset

SHARED_MANIFEST = Path(__file__).resolve().parents[3] / "shared" / "data" / "nccl-tests" / "manifest.yaml"


def test_the_gain_by_hand():
    """NCCL rates an A100's twelve NVLinks at 20 GB/s each: 240 GB/s a GPU. 8 x 200 Gb/s NICs: the ring graph has
    8 channels of 24 GB/s (192); the tree could take twice that, but the NVLink holds it to 240 and the tuner's
    cap, 23.6 GB/s a channel (2.10+; 22.5 in 2.8), to 8 x 23.6 / 0.92 = 205: 1.07. p4de's 4 x 100 Gb/s: 4 channels
    of 12 GB/s (48), the tree twice that, 96, under both limits: 2. More nodes, or a mesh, none."""
    newest, old = tuner_release(None), tuner_release((2, 8))
    assert tree_gain(view(nodes=2, nvswitch=True), newest) == pytest.approx(8 * 23.6 / 0.92 / 192)
    assert tree_gain(view(nodes=2, nvswitch=True), old) == pytest.approx(8 * 22.5 / 0.92 / 192)
    assert tree_gain(view(nodes=2, nics=4, net_gbps=100, nvswitch=True), newest) == pytest.approx(2.0)
    assert tree_gain(view(nodes=4, nics=4, net_gbps=100, nvswitch=True), newest) == 1.0
    assert tree_gain(view(nodes=2, nics=4, net_gbps=100), newest) == 1.0


def test_the_per_channel_cap_keeps_few_fast_nics_on_rings():
    """ABCI's A100 nodes, 4 x 200 Gb/s: 4 channels of 24 GB/s; twice that is 192, but NCCL 2.8's 22.5 GB/s a
    channel caps the tree at 4 x 22.5 / 0.92 = 98, about the ring's 96, so a 32 MiB all_reduce stays a ring, as
    the same busbw at 2 and 4 nodes (33 and 31 GB/s) says it ran."""
    abci = view(nodes=2, nics=4, nvswitch=True)
    assert tree_gain(abci, tuner_release((2, 8))) == pytest.approx(4 * 22.5 / 0.92 / 96)
    assert predict_collective(abci, "all_reduce", 32 << 20, nccl_release=(2, 8)).algo == "ring"


def test_two_nvswitch_nodes_run_a_large_all_reduce_as_a_tree():
    """p4de-like: 2 x 8 A100 on NVSwitch, 50 GB/s of network a node. At 1 GiB the tree, whose node sends S into the
    network against the ring's 2 (n-1)/n S, is chosen and priced under the ring's network bound; on 4-GPU mesh
    nodes with the same network per GPU, and on four nodes, the ring stays."""
    p4de = view(nodes=2, nics=4, net_gbps=100, nvswitch=True)
    tree = predict_collective(p4de, "all_reduce", 1 << 30)
    ring = predict_collective(p4de, "all_reduce", 1 << 30, algo="ring")
    assert tree.algo == "tree" and tree.time_s < 0.6 * ring.time_s
    ring_bound_s = 2 * 15 / 16 * (1 << 30) / p4de.net_Bps
    assert tree.time_s < ring_bound_s < ring.time_s
    assert predict_collective(replace(p4de, nvswitch=False), "all_reduce", 1 << 30).algo == "ring"
    four_nodes = view(nodes=4, nics=4, net_gbps=100, nvswitch=True)
    assert predict_collective(four_nodes, "all_reduce", 1 << 30).algo == "ring"


@pytest.mark.parametrize(("preset", "switched"), [
    ("dgx-a100", True), ("aws-p4de", True), ("gb200-nvl72", True),
    ("nersc-perlmutter", False), ("cscs-alps-gh200", False), ("dgx-1-v100", False), ("pcie-l40s", False),
])
def test_switched_nodes_from_the_platform(preset, switched):
    assert comm_view(build(load_preset(preset, nodes=2))).nvswitch is switched


@pytest.mark.skipif(not SHARED_MANIFEST.exists(), reason="the measured nccl-tests logs are not here")
def test_the_p4de_log_beyond_its_network():
    """The p4de log measures 78 GB/s of bus bandwidth at 2 GiB over 50 GB/s of EFA a node, which only a tree
    reaches: its rows from 1 MiB within 17% (median), 64% when priced as rings. Both run Simple, the one protocol
    aws-ofi-nccl leaves NCCL on p4de (transports.plugin_env); the tree's Simple chunks pay their network handshakes
    unhidden, which puts its rows from 128 MiB 36-53% slow (as LL128 they were within 8%)."""
    loaded = read_measured(SHARED_MANIFEST, ["a100x8-2node-allreduce-awsp4de-efa-awsome.txt"], lambda _: None)
    log = loaded.logs[0]
    errors = [abs(predict_collective(log.view, "all_reduce", row.size_bytes).time_s * 1e6 / row.time_us - 1)
              for row in log.rows if row.size_bytes >= 1 << 20]
    assert statistics.median(errors) < 0.18
    large = [row for row in log.rows if row.size_bytes >= 1 << 30]
    assert all(predict_collective(log.view, "all_reduce", row.size_bytes).algo == "tree" for row in large)


@pytest.mark.parametrize("device", ["s0/nic1", "s1/nic1", "s1/gpu3"])
def test_a_fault_on_either_node_sets_the_tree_the_same(device):
    """The gain is a communicator's (its slowest server's rates), so a NIC or GPU at half speed gives the same gain
    and the same 1 GiB all_reduce on either of two DGX A100s."""
    def both(dev):
        topology = build(load_preset("dgx-a100", nodes=2, link_faults=[{"device": dev, "factor": 0.5}]))
        v = comm_view(topology)
        return tree_gain(v, tuner_release(None)), predict_collective(v, "all_reduce", 1 << 30).time_s

    mirrored = device.replace("s1/", "s0/") if device.startswith("s1/") else device.replace("s0/", "s1/")
    assert both(device) == pytest.approx(both(mirrored))
