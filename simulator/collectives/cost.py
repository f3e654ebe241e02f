"""Time of one collective: latency chain + pipeline fill + bottleneck bandwidth at the chunk size.

For an algorithm shape (simulator.collectives.algorithms) run with a protocol on a communicator:

    time = base(algo, proto)
         + intra_hops x hop(intra link, proto) + net_hops x (hop(net, proto) + transport floor)
         + fill
         + S x max(intra_volume / intra_rate, net_volume / net_rate) / ramp(chunk)

- Latencies are NCCL's published per-hop constants (the tuner's prior) plus the transport's own
  per-message floor (simulator.collectives.transports), which the tuner does not know.
- Rates are line rates x achievable efficiency (link kind, transport) x the protocol's share
  (LL128 120/128; LL a quarter of Simple for reductions, a third otherwise, and at most llMaxBw;
  tuning.cc), capped by what the channels move: one channel (one SM's copy loop) moves a
  published per-channel rate, and NCCL runs at most MAX_CHANNELS of them.
- ramp(chunk): each step of a channel moves one chunk and then synchronises with its peer (flag
  write, poll, fence) for about one hop latency. A channel moving chunks of c bytes at rate B
  therefore averages B x c / (c + hop x B). Chunks are S / (channels x ranks) for rings (one
  block per rank per step), up to a slice of the buffer; this is what makes mid-size messages
  (64 KiB - 64 MiB) slower than the tuner's alpha-beta form says.
- fill: a pipelined chain (tree, broadcast/reduce) streams slices hop by hop; the last hop starts
  only after the first slice crossed the (depth - 1) hops before it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.collectives import nccl_constants as C
from simulator.collectives.algorithms import AlgoShape
from simulator.collectives.comm import INTRA_EFFICIENCY, NVLS_EFFICIENCY, CommView
from simulator.collectives.transports import TRANSPORTS

US = 1e-6
# Chunks grow up to this many buffer slots before a ring step is split into several loops
# (NCCL ALLREDUCE_CHUNKSTEPS = NCCL_STEPS / 2).
CHUNK_SLOTS = C.NCCL_STEPS // 2
SYNC_HOPS = 1.0
# The smallest unit a channel moves: one LL line of payload.
MIN_CHUNK_BYTES = 8.0


@dataclass(frozen=True)
class CollectiveEstimate:
    """Predicted time of one collective and how it splits."""

    op: str
    size_bytes: int
    algo: str
    proto: str
    time_s: float
    latency_s: float
    fill_s: float
    bandwidth_s: float
    bottleneck: str  # "intra", "net" or "channels"
    channels: int
    # seconds per byte of S that each resource ("intra": a GPU's intra-node links, "net": a
    # node's NICs) needs, at its line rate; the flow engine turns these into usage coefficients
    demand_s_per_byte: tuple[tuple[str, float], ...] = ()


def _scale_index(n_nodes: int) -> int:
    return 0 if n_nodes == 1 else (1 if n_nodes == 2 else 2)


def protocol_allowed(shape: AlgoShape, proto: str, v: CommView) -> bool:
    """NCCL's protocol rules: NVLS/CollNet run Simple only; LL128 only on validated NVLink GPUs."""
    if shape.algo in ("nvls", "nvls_tree", "collnet") and proto != "simple":
        return False
    if proto == "ll128":
        return v.intra_kind == "nvlink" and v.arch in C.LL128_ARCHS
    return True


def protocol_share(op: str, algo: str, proto: str, v: CommView) -> float:
    """Fraction of the Simple protocol's bandwidth a protocol reaches (tuning.cc refinements)."""
    if proto == "simple":
        return 1.0
    if proto == "ll128":
        return 0.92
    if algo == "tree":
        return 1.0 / 3.8
    return 0.25 if (v.multi_node or op in ("all_reduce", "reduce")) else 1.0 / 3.0


def _chunk_bytes(op: str, size_bytes: float, shape: AlgoShape, channels: int, v: CommView,
                 proto: str) -> float:
    """Bytes one channel moves per step before it synchronises with its peer."""
    slot = C.BUFFER_BYTES[proto] / C.NCCL_STEPS
    if shape.algo == "ring" and shape.chain_depth == 0:
        per_step = size_bytes / (channels * v.n_ranks)
    elif shape.nvls_intra:
        per_step = size_bytes / (channels * v.ranks_per_node)
    else:
        per_step = size_bytes / channels
    return max(MIN_CHUNK_BYTES, min(per_step, CHUNK_SLOTS * slot))


def max_channels(shape: AlgoShape, proto: str, per_channel_Bps: float, bus_Bps: float) -> int:
    """Channels NCCL opens to reach the bus rate, each moving at most `per_channel_Bps`."""
    return max(1, min(C.MAX_CHANNELS, math.ceil(bus_Bps / per_channel_Bps)))


def small_message_channels(shape: AlgoShape, proto: str, size_bytes: float, v: CommView) -> int:
    """NCCL drops channels until each has at least threads x threshold bytes (enqueue.cc)."""
    threshold = C.THREADS_PER_CHANNEL[proto] * C.THREAD_THRESHOLD_BYTES[proto]
    if proto == "ll" and shape.algo == "ring":
        threshold *= v.n_ranks
    return max(1, int(size_bytes // threshold))


def estimate(op: str, size_bytes: int, shape: AlgoShape, proto: str, v: CommView) -> CollectiveEstimate:
    """Predict the time of `op` on `size_bytes` with this algorithm shape and protocol."""
    share = protocol_share(op, shape.algo, proto, v)
    intra_eff = NVLS_EFFICIENCY if shape.nvls_intra else INTRA_EFFICIENCY[v.intra_kind]
    demands: dict[str, float] = {}
    if shape.intra_volume:
        # staged through host memory, every GPU's traffic shares the host path of its node
        senders = (v.ranks_per_node - (1 if shape.chain_depth else 0)) if v.intra_kind == "shm" else 1
        demands["intra"] = shape.intra_volume * senders / (v.intra_Bps * intra_eff * share)
    net_Bps = v.net_Bps * TRANSPORTS[v.transport].efficiency * share if v.transport else 0.0
    if shape.net_volume:
        demands["net"] = shape.net_volume / net_Bps
    if shape.net_volume_per_nic:
        demands["net"] = shape.net_volume_per_nic / (net_Bps / max(1, v.nics_per_node))
    bottleneck = max(demands, key=lambda k: demands[k])
    seconds_per_byte = demands[bottleneck]

    # channels: as many as the bottleneck needs, each moving at most `per_channel` bytes/s
    per_channel = C.PER_CHANNEL_GBPS[v.arch][_scale_index(v.n_nodes)] * 1e9 * share
    if proto == "ll128":
        per_channel = min(per_channel, C.LL128_PER_CHANNEL_GBPS[v.arch] * 1e9)
    busiest = max(shape.intra_volume, shape.net_volume, shape.net_volume_per_nic)
    channels = min(max_channels(shape, proto, per_channel, busiest / seconds_per_byte),
                   small_message_channels(shape, proto, size_bytes, v))
    channel_limit = busiest / (channels * per_channel)
    if proto == "ll":
        channel_limit = max(channel_limit, busiest / (C.LL_MAX_GBPS[v.arch] * 1e9))
    if channel_limit > seconds_per_byte:
        seconds_per_byte, bottleneck = channel_limit, "channels"

    intra_hop = C.HOP_LATENCY_US["nvlink" if v.intra_kind == "nvlink" else "pcie"][proto]
    if v.multi_node and proto == "ll":
        intra_hop *= 1.8  # tuning.cc: LL intra-node latency under a multi-node communicator
    net_hop = C.HOP_LATENCY_US["net"][proto]
    if v.transport is not None:
        net_hop += TRANSPORTS[v.transport].extra_hop_latency_us
    base = C.BASE_LATENCY_US[shape.algo][proto]
    latency_s = (base + shape.intra_hops * intra_hop + shape.net_hops * net_hop) * US

    # Each chunk a channel moves ends with a handshake with its peer (ready flag, free slot)
    # that does not overlap the copy: about SYNC_HOPS hop latencies per chunk.
    chunk = _chunk_bytes(op, size_bytes, shape, channels, v, proto)
    ramp = chunk / (chunk + SYNC_HOPS * intra_hop * US * per_channel)
    bandwidth_s = size_bytes * seconds_per_byte / ramp

    fill_s = 0.0
    if shape.chain_depth > 1:
        slice_bytes = min(C.BUFFER_BYTES[proto] / C.NCCL_STEPS, size_bytes / channels)
        fill_s = (shape.chain_depth - 1) * slice_bytes / per_channel
    return CollectiveEstimate(op, size_bytes, shape.algo, proto, latency_s + fill_s + bandwidth_s,
                              latency_s, fill_s, bandwidth_s, bottleneck, channels,
                              tuple(sorted(demands.items())))
