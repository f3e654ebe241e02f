"""The host CPU: what NCCL's proxy thread pays to launch a network operation, and where the model charges it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from simulator.collectives.comm import comm_view
from simulator.collectives.nccl_releases import tuner_release
from simulator.collectives.params import prior_params
from simulator.collectives.predict import predict_collective
from simulator.collectives.tuner import tuner_time_us
from simulator.core.errors import ConfigError
from simulator.measurements.load import read_measured
from tests.collectives.test_collective_model import view
from tests.collectives.test_p2p_channels import b200
from topologies.build import build, build_representative
from topologies.presets import load_preset

SHARED_MANIFEST = Path(__file__).resolve().parents[3] / "shared" / "data" / "nccl-tests" / "manifest.yaml"


@pytest.mark.parametrize(("preset", "cpu"), [
    ("dgx-h100", "intel"),  # not stated: Intel, NCCL's own default figure
    ("cscs-alps-gh200", "arm"),  # a Grace superchip's GPU
    ("alcf-polaris", "amd"),  # stated in the preset (AMD EPYC 7543P)
    ("nersc-perlmutter", "amd"),
    ("dgx-a100", "amd"),
])
def test_host_cpu_as_stated_or_from_the_gpu(preset, cpu):
    assert comm_view(build(load_preset(preset, nodes=2))).host_cpu == cpu


def test_an_unknown_host_cpu_is_refused_naming_the_field():
    with pytest.raises((ConfigError, ValueError), match="host_cpu"):
        load_preset("dgx-h100", nodes=2, inter_node={"transport": "ib", "nics_per_node": 8, "nic_gbps": 400,
                                                     "host_cpu": "zen"})


def test_each_network_peer_costs_a_send_and_a_receive_launch():
    """By hand: 2 nodes of 8 GPUs, alltoall of 1 KiB. Each GPU exchanges with the 8 GPUs of the other node, one
    after another; per peer the proxy launches a send and a receive, 1 us each on an Intel host and 2 us on an
    AMD one (tuning.cc getNetOverhead): 16 us and 32 us over the same exchange without them."""
    intel = b200(2)
    amd = replace(intel, host_cpu="amd")

    def added_us(v) -> float:
        free = prior_params(v).updated({"p2p_peer_us": 0.0})
        return (predict_collective(v, "alltoall", 1024).time_s
                - predict_collective(v, "alltoall", 1024, params=free).time_s) * 1e6

    assert added_us(intel) == pytest.approx(16.0)
    assert added_us(amd) == pytest.approx(32.0)
    assert added_us(replace(intel, host_cpu="arm")) == pytest.approx(16.0)


@pytest.mark.parametrize(("op", "nodes"), [("all_reduce", 4), ("all_gather", 4), ("reduce_scatter", 2),
                                           ("alltoall", 1)])
def test_collectives_and_one_node_do_not_pay_it(op, nodes):
    """The model's collectives pipeline their network steps (no launch per peer), and one node has no network:
    their time, under the model's own choice, does not depend on the host CPU."""
    intel = view(nodes=nodes)
    amd = replace(intel, host_cpu="amd")
    for size in (1024, 1 << 20, 1 << 28):
        assert predict_collective(amd, op, size).time_s == predict_collective(intel, op, size).time_s


def test_nccls_tuner_charges_every_ring_step_the_hosts_launch_from_2_18():
    """tuning.cc (2.18+): an intra-node step of a multi-node ring costs at least the network overhead, three
    times it for Simple: a 4-node ring all_reduce of 8-GPU servers has 2 x 31 - 2 x 4 = 54 intra-node steps, each
    max(0.6, 2.0) = 2.0 us for LL on an AMD host where the Intel host pays max(0.6, 1.0); 54 us more (8 bytes at
    the hosts' different LL caps differ by under a nanosecond). Before 2.18 NCCL charged nothing, whatever the
    CPU."""
    intel = view(nodes=4)
    amd = replace(intel, host_cpu="amd")
    rel = tuner_release((2, 21))
    more = tuner_time_us("all_reduce", "ring", "ll", 8, amd, rel, 1) - tuner_time_us(
        "all_reduce", "ring", "ll", 8, intel, rel, 1)
    assert more == pytest.approx(54 * (2.0 - 1.0), abs=1e-3)
    old = tuner_release((2, 17))
    assert tuner_time_us("all_reduce", "ring", "ll", 8, amd, old, 1) == pytest.approx(tuner_time_us(
        "all_reduce", "ring", "ll", 8, intel, old, 1), abs=1e-3)


@pytest.mark.skipif(not SHARED_MANIFEST.exists(), reason="the measured nccl-tests logs are not here")
def test_two_node_alltoall_small_sizes_against_the_measured_b200_log():
    """Vultr's 2-node B200 alltoall (InfiniBand): 256 B to 256 KiB measure 37-49 us; without the launches per peer
    the model gave 17-33 us (median 40% fast); with them within 10% (median)."""
    loaded = read_measured(SHARED_MANIFEST, ["b200x8-2node-alltoall-vultr-ib.txt"], lambda _: None)
    (log,) = loaded.logs
    errors = []
    for row in log.rows:
        if row.size_bytes <= 256 * 1024:
            predicted_us = predict_collective(log.view, "alltoall", row.size_bytes).time_s * 1e6
            errors.append(abs(predicted_us - row.time_us) / row.time_us)
    errors.sort()
    assert len(errors) >= 8
    assert errors[len(errors) // 2] < 0.10


@pytest.mark.parametrize(("written", "vendor"), [("AMD", "amd"), ("AMD EPYC 7543P", "amd"), ("epyc", "amd"),
                                                 ("Intel Xeon Platinum 8480C", "intel"), ("NVIDIA Grace", "arm"),
                                                 ("aarch64", "arm")])
def test_a_cpu_written_by_name_is_read_as_its_vendor(written, vendor):
    spec = load_preset("dgx-h100", nodes=2, inter_node={"transport": "ib", "nics_per_node": 8, "nic_gbps": 400,
                                                        "host_cpu": written})
    assert comm_view(build(spec)).host_cpu == vendor


@pytest.mark.parametrize("written", ["zen", "AMD or Intel", ""])
def test_a_cpu_naming_no_vendor_or_two_is_refused(written):
    with pytest.raises((ConfigError, ValueError), match="host_cpu"):
        load_preset("dgx-h100", nodes=2, inter_node={"transport": "ib", "nics_per_node": 8, "nic_gbps": 400,
                                                     "host_cpu": written})


def test_the_host_cpu_survives_the_one_server_a_class_shortcut_and_faults():
    """Metamorphic: a cluster priced from one representative server per class (topologies.build.build_representative),
    with a NIC degraded on one server, keeps the hosts' CPU, and an alltoall's per-peer launches add the same
    2 us x peers on other nodes (AMD over Intel) as on the full, healthy cluster: the fault moves bandwidth, not
    the proxy's launches."""
    def extra_us(**overrides) -> float:
        times = []
        for cpu in ("amd", "intel"):
            spec = load_preset("dgx-a100", nodes=4, inter_node={"transport": "ib", "nics_per_node": 8,
                                                                "nic_gbps": 200, "host_cpu": cpu}, **overrides)
            view = comm_view(build_representative(spec) if overrides else build(spec))
            assert view.host_cpu == cpu
            times.append(predict_collective(view, "alltoall", 1024).time_s)
        return (times[0] - times[1]) * 1e6

    peers = 3 * 8  # 32 ranks, 24 on other nodes
    assert extra_us() == pytest.approx(peers * 2.0)
    assert extra_us(link_faults=[{"device": "s2/nic3", "factor": 0.5}]) == pytest.approx(peers * 2.0)


@pytest.mark.parametrize(("nodes", "intel_gbps", "amd_gbps"), [(2, 39.0, 22.5), (4, 20.4, 19.0)])
def test_nccls_tuner_caps_ll_across_nodes_by_the_hosts_vendor(nodes, intel_gbps, amd_gbps):
    """tuning.cc (every release 2.8-2.27): across nodes the LL cap llMaxBws is read from the host CPU's row, AMD
    22.5 / 19.0 GB/s on 2 / 4+ nodes, any other CPU 39.0 / 20.4. A ring LL all_reduce of 8-GPU servers with
    NICs of 400 Gb/s rates far above either cap (a quarter of the bus bandwidth in 2.17), so its time per byte
    follows the cap: the slope between 512 MiB and 1 GiB (the latency cancels) is in the caps' inverse ratio.
    An Arm host takes the first row, as Intel."""
    intel = view(nodes=nodes)
    rel = tuner_release((2, 17))  # before 2.18 the host's launch cost is not in the latency either

    def slope_us(v) -> float:
        return (tuner_time_us("all_reduce", "ring", "ll", 1 << 30, v, rel, 16)
                - tuner_time_us("all_reduce", "ring", "ll", 1 << 29, v, rel, 16))

    assert slope_us(replace(intel, host_cpu="amd")) / slope_us(intel) == pytest.approx(intel_gbps / amd_gbps)
    assert slope_us(replace(intel, host_cpu="arm")) == pytest.approx(slope_us(intel))
