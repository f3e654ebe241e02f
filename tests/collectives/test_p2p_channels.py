"""Channels that carry point-to-point traffic to other nodes: NCCL's rules per release, and what they cost."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.algorithms import direct_shape
from simulator.collectives.busbw import busbw_factor
from simulator.collectives.cost import estimate
from simulator.collectives.nccl_releases import tuner_release
from simulator.collectives.p2p_channels import P2P_NET_CHANNEL_GBPS, p2p_channels, p2p_net_channels
from simulator.collectives.params import prior_params
from simulator.collectives.predict import predict_collective
from simulator.core.errors import ConfigError
from tests.collectives.test_collective_model import view

LIMITS = (1, 32)
GIB = 1024**3


def b200(nodes: int) -> object:
    """HGX B200 servers, one 400 Gb/s NIC a GPU (the validation set's Vultr cluster)."""
    return view(nodes=nodes, gpus=8, intra_GBps=900.0, net_gbps=400.0, nics=8, arch="blackwell")


def test_before_2_20_every_network_peer_gets_two_channels():
    """2.18 (paths.cc): NCCL_NCHANNELS_PER_NET_PEER, default 2, however many ranks."""
    assert p2p_channels(view(nodes=128), tuner_release((2, 18)), {}, LIMITS) == (32, 2)


def test_from_2_20_a_large_communicator_gives_each_peer_one_channel():
    """2.20-2.28: 2 halved while 2 x ranks > 4 x p2pnChannels: 1,024 ranks on 32 channels get one."""
    assert p2p_channels(view(nodes=128), tuner_release((2, 21)), {}, LIMITS)[1] == 1
    assert p2p_channels(view(nodes=2), tuner_release((2, 21)), {}, LIMITS)[1] == 2


def test_from_2_20_a_grace_gpu_gets_a_channel_per_local_nic():
    """getLocalNetCountByBw counts a GPU's local NICs up to the bandwidth of its own link to the CPU: a Grace
    GPU (NVLink-C2C) with two NICs gets two channels even on 1,024 ranks; an HGX GPU behind a PCIe switch
    (AWS p5's four EFA NICs a GPU) has no such link, so the halving alone decides."""
    grace = replace(view(nodes=256, gpus=4, nics=8), gpu_nic_path="c2c")
    assert p2p_channels(grace, tuner_release((2, 21)), {}, LIMITS)[1] == 2
    hgx = view(nodes=128, nics=32, net_gbps=100.0)
    assert p2p_channels(hgx, tuner_release((2, 21)), {}, LIMITS)[1] == 1


def test_env_sets_channels_per_peer_rounded_to_a_power_of_two():
    rel = tuner_release(None)
    assert p2p_channels(view(nodes=128), rel, {"NCCL_NCHANNELS_PER_NET_PEER": "3"}, LIMITS)[1] == 4
    # two p2p channels for 16 ranks: 2 x 16 > 4 x 2, so each peer gets one
    assert p2p_channels(view(nodes=2), rel, {"NCCL_MAX_P2P_NCHANNELS": "2"}, LIMITS) == (2, 1)
    with pytest.raises(ConfigError, match="NCCL_NCHANNELS_PER_NET_PEER"):
        p2p_channels(view(nodes=2), rel, {"NCCL_NCHANNELS_PER_NET_PEER": "many"}, LIMITS)


def test_alltoall_peers_of_one_node_share_a_channel_base():
    """Eight ranks of a remote node share one channel base (channel.h), so a GPU's network traffic runs on
    channels per peer x remote nodes x ceil(ranks per node / 8), at most p2pnChannels; sendrecv on its peer's."""
    rel = tuner_release(None)
    counts = [p2p_net_channels("alltoall", view(nodes=n, gpus=8), rel, {}, LIMITS) for n in (1, 2, 3, 4, 64)]
    assert counts == [0, 2, 4, 6, 32]
    assert p2p_net_channels("alltoall", view(nodes=2, gpus=16), rel, {}, LIMITS) == 4
    assert p2p_net_channels("sendrecv", view(nodes=16, gpus=1), rel, {}, LIMITS) == 2
    assert p2p_net_channels("all_reduce", view(nodes=2), rel, {}, LIMITS) == 0


def test_two_b200_servers_alltoall_runs_at_two_channels():
    """2 x 8 B200, 16 GiB: each GPU sends half of S off its node on two channels of 14 GB/s, so its bus
    bandwidth is at most 2 x 28 x 15/16 = 52.5 GB/s, about one NIC's worth (the validation set's Vultr log:
    42.4 GB/s). With four channels a peer (NCCL_NCHANNELS_PER_NET_PEER=4) the NICs bind instead."""
    size = 16 * GIB
    capped = predict_collective(b200(2), "alltoall", size)
    wire_s = size / 2 / (2 * P2P_NET_CHANNEL_GBPS * 1e9)
    assert capped.bottleneck == "channels"
    assert wire_s <= capped.time_s <= 1.2 * wire_s
    busbw = size / capped.time_s / 1e9 * busbw_factor("alltoall", 16)
    assert 42.0 <= busbw <= 52.5
    wider = predict_collective(b200(2), "alltoall", size, env={"NCCL_NCHANNELS_PER_NET_PEER": "4"})
    assert wider.bottleneck == "net" and wider.time_s < 0.7 * capped.time_s


def test_six_h100_servers_alltoall_is_nic_bound():
    """nccl-tests #267: on six H100 servers with 400 Gb/s NICs alltoall reaches a single NIC's bandwidth;
    ten channels carry a GPU's network traffic there, so the channels do not bind."""
    v = view(nodes=6, gpus=8, intra_GBps=450.0, net_gbps=400.0, arch="hopper")
    est = predict_collective(v, "alltoall", GIB)
    assert est.bottleneck == "net"
    assert 40.0 <= GIB / est.time_s / 1e9 * busbw_factor("alltoall", 48) <= 50.0


@given(nodes=st.sampled_from([2, 3, 4, 16]), size=st.integers(1, 16 * GIB),
       op=st.sampled_from(["alltoall", "sendrecv"]), fewer=st.integers(1, 16), more=st.integers(0, 16))
def test_more_channels_never_slower(nodes, size, op, fewer, more):
    """A point-to-point operation on more network channels is never slower, and unlimited is fastest."""
    v = b200(nodes)
    shape, params = direct_shape(op, v), prior_params(v)
    for proto in ("ll", "simple"):
        few = estimate(op, size, shape, proto, v, params, p2p_net_channels=fewer).time_s
        many = estimate(op, size, shape, proto, v, params, p2p_net_channels=fewer + more).time_s
        free = estimate(op, size, shape, proto, v, params).time_s
        assert few >= many - 1e-15 and many >= free - 1e-15


def test_from_2_29_a_peer_gets_the_channels_its_nics_need():
    """2.29 (paths.cc, P2P_PER_CHANNEL_NET_BW; its release notes: "improves the default number of channels per
    net peer for all-to-all, send, and recv"): a 400 Gb/s NIC needs ceil(50 / 14) = 4 channels, halved only
    while the peers of one round would not fit: two B200 servers' alltoall is then bound by the NICs."""
    rel = tuner_release((2, 29))
    assert p2p_channels(b200(2), rel, {}, LIMITS, (2, 29)) == (32, 4)
    assert p2p_channels(b200(128), rel, {}, LIMITS, (2, 29))[1] == 1  # 4 x 128 batches > 32 channels
    newer = predict_collective(b200(2), "alltoall", 16 * GIB, nccl_release=(2, 29))
    older = predict_collective(b200(2), "alltoall", 16 * GIB, nccl_release=(2, 27))
    assert newer.bottleneck == "net" and older.bottleneck == "channels"
    assert newer.time_s < 0.7 * older.time_s
