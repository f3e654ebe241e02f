"""NCCL's tuner per release: which release table applies, its hand-computed estimates, its choices.

Expected values are computed by hand from src/graph/tuning.cc of the NCCL release named in each
test (base latencies, per-hop latencies, bandwidth refinements), for clusters whose bandwidths NCCL
would rate as stated: an H100's 18 NVLinks at 20.6 GB/s = 370.8 GB/s, one 400 Gb/s NIC = 50 GB/s.
"""

from __future__ import annotations

import pytest

from simulator.collectives.algorithms import shapes_for
from simulator.collectives.comm import CommView
from simulator.collectives.cost import estimate, protocol_allowed
from simulator.collectives.nccl_constants import PROTOCOLS
from simulator.collectives.nccl_releases import (
    NEWEST,
    family,
    parse_release,
    release_option,
    tuner_release,
)
from simulator.collectives.params import prior_params
from simulator.collectives.predict import predict_collective
from simulator.collectives.select import SELECTIONS, selection_option
from simulator.collectives.tuner import channel_limits, enabled, tuner_channels, tuner_time_us
from simulator.core.errors import ConfigError


def pair(est) -> tuple[str, str]:
    return est.algo, est.proto


def h100(nodes: int = 1, gpus: int = 8, nics: int = 8, nvls: bool = False) -> CommView:
    """DGX H100-like: 450 GB/s of NVLink line rate per GPU (NCCL rates it 370.8), 400 Gb/s NICs."""
    return CommView(
        n_ranks=nodes * gpus, n_nodes=nodes, ranks_per_node=gpus, arch="hopper", intra_kind="nvlink",
        intra_Bps=450e9, net_Bps=nics * 50e9 if nodes > 1 else 0.0, nics_per_node=nics,
        transport="ib" if nodes > 1 else None, nvls=nvls, sharp=False, gpudirect_rdma=True,
    )


@pytest.mark.parametrize(("release", "table"), [
    ((2, 8), (2, 8)), ((2, 9), (2, 8)), ((2, 5), (2, 8)), ((2, 19), (2, 19)), ((2, 20), (2, 20)),
    ((2, 22), (2, 21)), ((2, 23), (2, 23)), ((2, 26), (2, 25)), ((2, 30), (2, 27)), (None, NEWEST),
])
def test_a_release_takes_the_newest_table_at_or_before_it(release, table):
    """Releases map onto the table in force: 2.22 is tuned as 2.21, unknown as the newest (2.27)."""
    assert tuner_release(release).first == table


@pytest.mark.parametrize(("text", "release"), [
    ("2.8.4", (2, 8)), ("2.26.2+cuda12.8", (2, 26)), ("2.8.4-1 (CUDA 11.2.2, OpenMPI 4.0.5)", (2, 8)),
    ("v2.27.7-1", (2, 27)), ("2.18", (2, 18)), ("unknown", None), ("not stated (CUDA 12.4)", None), (None, None),
    ("unknown (TCPXO build)", None),
])
def test_versions_read_as_manifests_and_logs_state_them(text, release):
    """The (major, minor) of a stated version; None where none is stated."""
    assert parse_release(text) == release


@pytest.mark.parametrize("text", ["latest", "3.1", "1.3.4", ""])
def test_a_release_option_that_is_not_nccl_2_is_an_error(text):
    """--nccl-version must read as 2.x: a ConfigError naming the option."""
    with pytest.raises(ConfigError, match="--nccl-version"):
        release_option(text)


def test_gpu_families_a_release_does_not_know_take_its_newest_row():
    """2.8 knows Volta and Ampere rows only (Hopper tuned as Ampere); Blackwell has rows from 2.25."""
    assert family(tuner_release((2, 8)), "hopper") == "ampere"
    assert family(tuner_release((2, 24)), "blackwell") == "hopper"
    assert family(tuner_release((2, 25)), "blackwell") == "blackwell"
    assert family(tuner_release((2, 27)), "ada") == "ampere"


def test_ring_ll_on_one_h100_node_by_release():
    """Ring LL all_reduce on 8 H100s. Latency 6.6 + 14 steps x 0.6 = 15.0 us in both releases. Its
    bandwidth: 2.18-2.20 take a quarter of 370.8 GB/s capped at llMaxBw 87.7; 2.21+ half, capped at
    141: 87.7 resp. 141 GB/s of bus bandwidth, x 8/14 of algorithm bandwidth."""
    v = h100()
    for release, bus in (((2, 18), 87.7), ((2, 27), 141.0)):
        rel = tuner_release(release)
        ch = tuner_channels(v, rel, (1, 32))
        assert tuner_time_us("all_reduce", "ring", "ll", 0, v, rel, ch) == pytest.approx(15.0)
        per_gb = tuner_time_us("all_reduce", "ring", "ll", 10**9, v, rel, ch) - 15.0
        assert per_gb == pytest.approx(1e6 / (bus * 8 / 14), rel=1e-9)


@pytest.mark.parametrize(("release", "latency_us"), [
    ((2, 18), 0.0 + 2 * (7 * 4.0 + 1 * 14.0)),  # tree Simple hop: NVLink 4, network 14
    ((2, 21), 0.0 + 2 * (7 * 28.0 + 1 * 28.0)),  # 2.19-2.22: 28 on both
    ((2, 27), 8.4 + 2 * (7 * 4.0 + 1 * 14.0)),  # 2.23+: base 8.4, NVLink 4.0, network 14
])
def test_tree_simple_latency_by_release(release, latency_us):
    """Tree all_reduce on 2 x 8 H100s: base + 2 ((G-1) x NVLink hop + log2(N) x network hop)."""
    v = h100(nodes=2)
    rel = tuner_release(release)
    assert tuner_time_us("all_reduce", "tree", "simple", 0, v, rel, 16) == pytest.approx(latency_us)


@pytest.mark.parametrize(("release", "share"), [((2, 22), 0.7), ((2, 23), 0.92)])
def test_ring_ll128_at_one_gpu_per_node(release, share):
    """4 nodes of one H100 and one 50 GB/s NIC: ring LL128 takes 0.7 of the bus bandwidth before 2.23,
    0.92 from 2.23 (per-channel caps of 36.7 GB/s do not bind); all_gather algbw = bus x 4/3."""
    v = h100(nodes=4, gpus=1, nics=1)
    rel = tuner_release(release)
    ch = tuner_channels(v, rel, (1, 32))
    per_gb = (tuner_time_us("all_gather", "ring", "ll128", 2 * 10**9, v, rel, ch)
              - tuner_time_us("all_gather", "ring", "ll128", 10**9, v, rel, ch))
    assert per_gb == pytest.approx(1e6 / (50.0 * share * 4 / 3), rel=1e-9)


def test_pat_from_2_23_at_one_gpu_per_node():
    """all_gather of 1 MiB over 4 nodes of one H100: 2.22 runs ring LL128 (26 us + 1 MiB at 46.7 GB/s
    = 48.5 us, against ring LL 53.2 and Simple 66.1); 2.23 adds PAT (8 + 2 x 14 / 3.5 + 4 x 2.8 =
    27.2 us + 1 MiB at 0.85 x 50 GB/s = 51.9 us) and prefers it to ring LL128 (now 39.5 us latency
    with the tree's network hops at one GPU per node, 56.6 us)."""
    v = h100(nodes=4, gpus=1, nics=1)
    for release, chosen in (((2, 22), ("ring", "ll128")), ((2, 23), ("pat", "simple"))):
        assert pair(predict_collective(v, "all_gather", 1 << 20, nccl_release=release, selection="nccl")) == chosen
    rel = tuner_release((2, 23))
    assert tuner_time_us("all_gather", "pat", "simple", 1 << 20, v, rel, 6) == pytest.approx(
        27.2 + (1 << 20) / (1000 * 42.5))


def test_nvls_by_release_on_one_h100_node():
    """NVLS all_reduce from 2.17, NVLS all_gather / reduce_scatter from 2.19, NVLS-tree from 2.18."""
    v = h100(nvls=True)
    assert not enabled("all_reduce", "nvls", "simple", v, tuner_release((2, 16)))
    assert enabled("all_reduce", "nvls", "simple", v, tuner_release((2, 17)))
    assert not enabled("all_gather", "nvls", "simple", v, tuner_release((2, 18)))
    assert enabled("reduce_scatter", "nvls", "simple", v, tuner_release((2, 19)))
    assert not enabled("all_reduce", "nvls_tree", "simple", h100(nodes=2, nvls=True), tuner_release((2, 17)))
    assert not enabled("all_reduce", "nvls", "ll", v, tuner_release((2, 27)))


def test_large_all_reduce_on_one_h100_node_by_release():
    """1 GiB all_reduce on 8 H100s: ring Simple before NVLS (2.16), NVLS from 2.17 (370.8 x 5/6 =
    309 GB/s of algorithm bandwidth against the ring's 370.8 x 8/14 = 212)."""
    v = h100(nvls=True)
    for release, chosen in (((2, 16), ("ring", "simple")), ((2, 27), ("nvls", "simple"))):
        assert pair(predict_collective(v, "all_reduce", 1 << 30, nccl_release=release, selection="nccl")) == chosen


def test_tree_hop_of_2_19_keeps_trees_off_mid_sizes():
    """2 x 8 H100s, 256 KiB: the 28 us tree Simple hops of 2.19-2.22 make every tree Simple estimate
    at least 448 us, so no release of them picks tree Simple there."""
    v = h100(nodes=2)
    rel = tuner_release((2, 20))
    assert tuner_time_us("all_reduce", "tree", "simple", 256 * 1024, v, rel, 16) > 448.0
    chosen = predict_collective(v, "all_reduce", 256 * 1024, nccl_release=(2, 20), selection="nccl")
    assert pair(chosen) != ("tree", "simple")


def test_the_tree_correction_ends_at_512_mib():
    """The table's last column (log2(size / 64) = 22) is 256 - 512 MiB, 0.9 for Simple; from 512 MiB on
    NCCL applies none (`logSize < 23`). Measured on the size term t(S) - latency: doubling S doubles it
    between columns 21 and 22 (0.9 both), and 512 MiB's is 2 x 0.9 of 256 MiB's (factor 1 there)."""
    v = h100(nodes=4)
    rel = tuner_release((2, 19))
    lat = tuner_time_us("all_reduce", "tree", "simple", 0, v, rel, 16)
    term = {s: tuner_time_us("all_reduce", "tree", "simple", s, v, rel, 16) - lat for s in (1 << 27, 1 << 28, 1 << 29)}
    assert term[1 << 28] / term[1 << 27] == pytest.approx(2.0)
    assert term[1 << 29] / term[1 << 28] == pytest.approx(2.0 * 0.9)


def test_channel_limits_from_the_environment():
    """NCCL_MIN/MAX_NCHANNELS (or NCCL_MIN/MAX_CTAS) bound the channels; both are clamped to 32."""
    assert channel_limits({}) == (1, 32)
    assert channel_limits({"NCCL_MAX_NCHANNELS": "4"}) == (1, 4)
    assert channel_limits({"NCCL_MIN_CTAS": "24"}) == (24, 32)
    assert channel_limits({"NCCL_MAX_NCHANNELS": "64"}) == (1, 32)
    v = h100()
    est = predict_collective(v, "all_reduce", 1 << 30, env={"NCCL_MAX_NCHANNELS": "2"})
    assert est.channels <= 2
    wide = predict_collective(v, "all_reduce", 1 << 30)
    assert est.time_s > wide.time_s


@pytest.mark.parametrize("value", ["many", "0", "-3", "2.5"])
def test_a_bad_channel_count_is_an_error(value):
    """A channel limit that is not a whole number >= 1: ConfigError naming the variable."""
    with pytest.raises(ConfigError, match="NCCL_MAX_NCHANNELS"):
        channel_limits({"NCCL_MAX_NCHANNELS": value})


def test_the_choice_is_priced_by_the_physical_model():
    """Whatever the release, the time is the physical model's for the pair chosen: pinning that pair
    gives the same time."""
    v = h100(nodes=2)
    for release in ((2, 8), (2, 18), (2, 27)):
        chosen = predict_collective(v, "all_reduce", 4 << 20, nccl_release=release, selection="nccl")
        algo = "nvls" if chosen.algo == "nvls_tree" else chosen.algo
        pinned = predict_collective(v, "all_reduce", 4 << 20, algo=algo, proto=chosen.proto, nccl_release=release,
                                    selection="nccl")
        assert pinned.time_s == pytest.approx(chosen.time_s)


# Where the algorithm and protocol come from: the model's fastest pair (default) or NCCL's tuner.
# Case: all_reduce of 4 MiB over 2 x 8 H100 with NCCL 2.8's tuner, which ranks tree LL128 first; the
# physical model prices tree LL faster and, choosing for itself, takes it.
SIZE = 4 << 20
RELEASE = (2, 8)


def test_the_default_is_the_model_choice():
    v = h100(nodes=2)
    default = predict_collective(v, "all_reduce", SIZE, nccl_release=RELEASE)
    model = predict_collective(v, "all_reduce", SIZE, nccl_release=RELEASE, selection="model")
    assert pair(default) == pair(model) == ("tree", "ll")
    assert default.time_s == model.time_s


def test_nccl_selection_runs_the_tuner_first_choice():
    """The pair chosen is the argmin of the release's tuner estimates (tree LL128 here), priced by
    the physical model as if pinned."""
    v = h100(nodes=2)
    rel = tuner_release(RELEASE)
    channels = tuner_channels(v, rel, (1, 32))
    ranked = {(s.algo, proto): tuner_time_us("all_reduce", s.algo, proto, SIZE, v, rel, channels)
              for s in shapes_for("all_reduce", v) for proto in PROTOCOLS
              if protocol_allowed(s, proto, v) and enabled("all_reduce", s.algo, proto, v, rel)}
    assert min(ranked, key=lambda key: ranked[key]) == ("tree", "ll128")
    chosen = predict_collective(v, "all_reduce", SIZE, nccl_release=RELEASE, selection="nccl")
    assert pair(chosen) == ("tree", "ll128")
    pinned = predict_collective(v, "all_reduce", SIZE, algo="tree", proto="ll128", nccl_release=RELEASE,
                                selection="nccl")
    assert chosen.time_s == pytest.approx(pinned.time_s)


def test_model_selection_takes_the_fastest_priced_pair():
    """No allowed pair the release offers is priced faster than the model's choice (trees are
    ranked with the tuner's bandwidth credit, which here does not bind)."""
    v = h100(nodes=2)
    chosen = predict_collective(v, "all_reduce", SIZE, nccl_release=RELEASE)
    rel = tuner_release(RELEASE)
    times = [estimate("all_reduce", SIZE, s, proto, v, prior_params(v)).time_s
             for s in shapes_for("all_reduce", v) for proto in PROTOCOLS
             if protocol_allowed(s, proto, v) and enabled("all_reduce", s.algo, proto, v, rel)]
    assert chosen.time_s == pytest.approx(min(times))


@pytest.mark.parametrize("selection", SELECTIONS)
def test_nccl_algo_and_proto_pin_the_choice_in_both_modes(selection):
    v = h100(nodes=2)
    env = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}
    est = predict_collective(v, "all_reduce", SIZE, env=env, nccl_release=RELEASE, selection=selection)
    assert pair(est) == ("ring", "simple")


def test_the_overlapped_handshakes_price_only_nccl_choices():
    """With NCCL's choice a Simple ring over the network hides its chunk handshakes behind the next
    chunk: the same pinned pair is cheaper than with the model's choice, never dearer."""
    v = h100(nodes=2)
    model = predict_collective(v, "all_reduce", 64 << 20, algo="ring", proto="simple")
    nccl = predict_collective(v, "all_reduce", 64 << 20, algo="ring", proto="simple", selection="nccl")
    assert nccl.time_s < model.time_s
    assert nccl.latency_s == model.latency_s


@pytest.mark.parametrize("text", ["tuner", "NCCL", ""])
def test_an_unknown_selection_is_an_error(text):
    with pytest.raises(ConfigError, match="--selection: unknown selection .*valid: model, nccl"):
        selection_option(text)
