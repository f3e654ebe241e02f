"""How many channels carry a GPU's point-to-point traffic to other nodes (alltoall, sendrecv).

NCCL runs each send/receive pair of a point-to-point group on `p2pnChannelsPerPeer` channels (CTAs).
Which channels a peer gets follows its place in the schedule: a channel base per node distance and per
group of eight local ranks (channel.h ncclP2pChannelBaseForRound, ncclChannelComputeBase in 2.18), so the
up to eight peers of one remote node that share a base share its channels, and a GPU's network traffic
runs on `p2pnChannelsPerPeer` x (nodes - 1) x ceil(ranks per node / 8) channels at most, never more than
the communicator's `p2pnChannels`. For sendrecv (one peer) it is `p2pnChannelsPerPeer`.

Channels per network peer (graph/paths.cc ncclTopoGetNchannels, ncclTopoComputeP2pChannels):
- up to 2.19: NCCL_NCHANNELS_PER_NET_PEER, 2 by default;
- 2.20 to 2.28: 2, halved while 2 x ranks > 4 x p2pnChannels, so a large communicator's peers get one
  each; but at least the local NICs whose bandwidth adds up to the GPU's own link to its CPU
  (topo.cc getLocalNetCountByBw). NCCL counts that link only where the GPU attaches to the CPU directly:
  a Grace GPU's NVLink-C2C, wider than all its NICs (all of them count); a GPU behind a PCIe switch (HGX
  servers) has none, so none count;
- 2.29 and later: as many as the GPU's NICs need at P2P_NET_CHANNEL_GBPS each (their bandwidth / 14 GB/s,
  rounded up; at least one a local NIC), then halved while channels x ceil(ranks / 8) > p2pnChannels, so
  that every peer fits in one round (paths.cc ncclTopoComputeP2pChannels);
- every release rounds it up to a power of two and takes the smallest over all peers (local peers get two
  per NVLink's worth of bandwidth, two over PCIe), and p2pnChannels = the communicator's channels
  (NCCL_MIN/MAX_P2P_NCHANNELS), rounded up to a power of two.

What one such channel moves through the network is NCCL's own figure, P2P_PER_CHANNEL_NET_BW = 14 GB/s
(paths.cc, 2.29, where NCCL starts to give a peer as many channels as its NICs need at that rate). So a
2-node alltoall of 8-GPU servers with 400 Gb/s NICs runs its network traffic on two channels, 28 GB/s a GPU
a direction, about half its NIC: the "one NIC's worth" of bus bandwidth nccl-tests users see there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from simulator.collectives.comm import CommView
from simulator.collectives.nccl_releases import TunerRelease
from simulator.collectives.tuner import MAX_CHANNELS, env_channels, tuner_channels

# paths.cc P2P_PER_CHANNEL_NET_BW (NCCL 2.29): what one channel of point-to-point traffic moves to the network
P2P_NET_CHANNEL_GBPS = 14.0
# peers one channel serves at once (device.h NCCL_MAX_DEV_WORK_P2P_PER_BATCH; NCCL_MAX_WORK_ELEMENTS_P2P / 2
# in 2.18): the local ranks that share a channel base
PEERS_PER_BATCH = 8
DEFAULT_NET_PEER_CHANNELS = 2  # NCCL_NCHANNELS_PER_NET_PEER's default before 2.20, the start value since


def _pow2_up(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


def p2p_channels(v: CommView, rel: TunerRelease, env: Mapping[str, str] | None, limits: tuple[int, int],
                 release: tuple[int, int] | None = None) -> tuple[int, int]:
    """(p2pnChannels, p2pnChannelsPerPeer) of a multi-node communicator under NCCL `release` (None: the
    release of the tuner table `rel`), module docstring."""
    env = env or {}
    version = release or rel.first
    low = env_channels(env, "NCCL_MIN_P2P_NCHANNELS") or 1
    high = env_channels(env, "NCCL_MAX_P2P_NCHANNELS") or MAX_CHANNELS
    comm_channels = max(low, min(tuner_channels(v, rel, limits), high))
    total = min(_pow2_up(comm_channels), MAX_CHANNELS)
    local_nics = max(1, v.nics_per_node // max(1, v.ranks_per_node))
    per_peer = env_channels(env, "NCCL_NCHANNELS_PER_NET_PEER")
    if per_peer is None and version >= (2, 29):
        gpu_net_gbps = v.net_Bps / max(1, v.ranks_per_node) / 1e9
        per_peer = _pow2_up(max(local_nics, math.ceil(gpu_net_gbps / P2P_NET_CHANNEL_GBPS)))
        while per_peer * math.ceil(v.n_ranks / PEERS_PER_BATCH) > total and per_peer > 1:
            per_peer //= 2
    elif per_peer is None:
        per_peer = DEFAULT_NET_PEER_CHANNELS
        if version >= (2, 20):
            while per_peer * v.n_ranks > comm_channels * 4 and per_peer > 1:
                per_peer //= 2
            if v.gpu_nic_path == "c2c":
                per_peer = max(local_nics, per_peer)
    if v.ranks_per_node > 1 and v.intra_kind != "nvlink":
        per_peer = min(per_peer, DEFAULT_NET_PEER_CHANNELS)  # local peers over PCIe get two
    return total, min(_pow2_up(per_peer), total)


def p2p_net_channels(op: str, v: CommView, rel: TunerRelease, env: Mapping[str, str] | None,
                     limits: tuple[int, int], release: tuple[int, int] | None = None) -> int:
    """Channels that carry one GPU's point-to-point traffic to other nodes at once under NCCL `release`;
    0 for one node or a collective algorithm."""
    if op not in ("alltoall", "sendrecv") or not v.multi_node:
        return 0
    total, per_peer = p2p_channels(v, rel, env, limits, release)
    if op == "sendrecv":
        return per_peer
    bases = (v.n_nodes - 1) * math.ceil(v.ranks_per_node / PEERS_PER_BATCH)
    return min(total, per_peer * bases)
