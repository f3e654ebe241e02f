"""Time of one collective: latency chain + pipeline fill + bottleneck bandwidth + chunk handshakes.

For an algorithm shape (simulator.collectives.algorithms) run with a protocol on a communicator:

    time = base(algo, proto) + intra_hops x hop(intra) + net_hops x (hop(net) + transport floor)
         + fill
         + S x max(intra_volume / intra_rate, net_volume / net_rate)
         + chunks x sync_hops x hop(slowest link)

- Latencies are NCCL's published per-hop constants (the tuner's prior) plus the transport's own
  per-message floor (simulator.collectives.transports), which the tuner does not know.
- Rates are line rates x achievable efficiency (link kind, transport) x the protocol's share
  (LL128 120/128 less; LL a quarter of Simple for reductions, a third otherwise, at most
  llMaxBw; tuning.cc), capped by the channels: one channel (one SM's copy loop) moves a published
  per-channel rate; NCCL opens as many as the bandwidth needs (at most MAX_CHANNELS) and, for small
  operations, drops channels until each has its threads' worth of bytes (enqueue.cc).
- chunks: a channel moves its share in chunks (S / (channels x ranks) per ring step, up to
  CHUNK_SLOTS buffer slots; a tree's Simple chunks one slot, NCCL's chunkSteps being 1 for every pair but
  Simple rings (enqueue.cc); at least one 8-byte word per thread), and each chunk ends with a
  handshake with its peer (ready flag, free slot) that does not overlap the copy. Through the
  network that handshake goes through the proxy thread (NCCL's network hop latency). This is why
  mid-size operations (64 KiB - 64 MiB) are slower than the tuner's alpha-beta form says. NVLS
  runs one operation per head (up to 32) on each channel at once, so its chunks per channel are
  that many times fewer (enqueue.cc, concurrentOps).
- overlapped handshakes (`overlap`, used when NCCL's tuner chooses the pair): with Simple over the
  network two chunks are in flight (NCCL_STEPS = 8 buffer slots, a chunk takes
  ALLREDUCE_CHUNKSTEPS = 4), so a chunk's handshake is hidden behind the next chunk's transfer as
  far as that transfer lasts; LL rings and trees pay the intra-node handshake only (LL lines carry
  their own flags, and the proxy forwards them without a per-chunk exchange with the remote peer).
  When the model chooses the pair itself they are off: they make it choose LL and network Simple
  pairs where NCCL runs others, and its measured error (uncalibrated, and fitted on 1-2 nodes and
  predicting 4-8) gets worse (docs/collectives.md, "NCCL's choice per release").
- fill: a pipelined chain (tree, broadcast/reduce) streams slices of up to a buffer slot hop by
  hop; the last hop starts only after the first slice crossed the (depth - 1) hops before it.
  NVLS-tree runs NVLS channels x heads operations at once, each streaming NCCL's NVLS-tree chunk
  (nvls_chunk_bytes), so its fill is (depth - 1) steps of all of them at the bottleneck's rate.
  NVLS inside one NVLink domain is a pipeline of its own, warp groups a channel (device/*.h, the
  one-node NVLS paths): for all_reduce scatter copies the input into each head's slot of the NVLS
  buffer, the head reduces its chunk from every GPU through the switch and multicasts the sum, and
  gather copies the result out; reduce_scatter is scatter then the reduction into the output,
  all_gather the multicast of each GPU's input then gather. A step of all channels x heads operations
  moves NCCL's NVLS chunk each (128 KiB, cut to 64, 32 and 16 KiB as the operation shrinks against
  them; enqueue.cc), and the first step crosses the stages before the last one: a fill of 2 such steps
  for all_reduce, 1 for the other two, the whole operation that many times below one step (no overlap).
  From 1 MiB to 64 MiB that is 15-50% of an all_reduce's time on an 8-GPU NVSwitch node; with
  registered user buffers (regUsed) the copies do nothing, which nccl-tests and the frameworks' default
  allocations do not use.
- NCCL's tree chunks (`nccl_tree_chunks`, used when NCCL's tuner chooses the pair, as the overlapped
  handshakes are): NCCL halves a tree's chunk while a small operation would give each channel too few of
  them (Simple in 2.4-2.19, LL128 in every release; tree_chunk_bytes), so a 1-4 MiB tree all_reduce on a
  few nodes fills its pipeline with 32-128 KiB chunks, not 512 KiB slots, and hands off more often. When
  the model chooses the pair itself they are off, for the same reason as the overlapped handshakes: the
  cheaper trees win sizes where NCCL runs rings, and the error of the model's own choice gets worse
  (docs/collectives.md, "NCCL's tree chunks").
- back-to-back calls (repeated_latency_s): each pays its latency and fill, except a chain (broadcast,
  reduce) whose calls go to successive roots of the same ring, as a reduce or a broadcast per rank does
  (DeepSpeed's ZeRO-1/2 average_tensor before 0.12.4, InternEvo's broadcast_params). Every rank runs the
  calls in order, and call k + 1's chain starts one rank after call k's, so it follows call k down the
  ring as a wavefront instead of waiting for it to drain: the hops and the fill are paid once, and each
  further call adds its launch (NCCL's base latency) and its bytes. Priced call by call, n such calls
  over n ranks would cost n chains of n hops, n squared hops: minutes a step on 1,024 GPUs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.collectives import nccl_constants as C
from simulator.collectives.algorithms import AlgoShape
from simulator.collectives.comm import CommView
from simulator.collectives.ecmp import collision_s_per_byte
from simulator.collectives.nccl_search import nics_reached, nvls_heads
from simulator.collectives.p2p_channels import P2P_NET_CHANNEL_GBPS
from simulator.collectives.params import ModelParams
from topologies.layout import GPUS_PER_PCIE_SWITCH

US = 1e-6
# Chunks grow up to this many buffer slots (NCCL ALLREDUCE_CHUNKSTEPS = NCCL_STEPS / 2).
CHUNK_SLOTS = C.NCCL_STEPS // 2
# NCCL halves a lone channel's threads for small operations, down to 64 of 512.
MIN_THREAD_FRACTION = 1.0 / 8.0


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
    bandwidth_s: float  # bottleneck bytes plus chunk handshakes
    bottleneck: str  # "intra", "net" or "channels"
    channels: int
    # seconds per byte of S that each resource ("intra": a GPU's intra-node links, "net": a
    # node's NICs) needs at its achievable rate; the flow engine turns these into usage
    demand_s_per_byte: tuple[tuple[str, float], ...] = ()
    launch_s: float = 0.0  # the algorithm's base latency (NCCL's baseLat: launch and setup), part of latency_s


CHAINED_OPS = ("broadcast", "reduce")  # pipelined chains whose per-rank calls run as a wavefront


def repeated_latency_s(est: CollectiveEstimate, count: int) -> float:
    """The latency and fill of `count` back-to-back calls of `est` (module docstring)."""
    if est.op in CHAINED_OPS:
        return est.latency_s + est.fill_s + (count - 1) * est.launch_s
    return count * (est.latency_s + est.fill_s)


def repeated_time_s(est: CollectiveEstimate, count: int) -> float:
    """The time of `count` back-to-back calls of `est` alone on idle links."""
    return repeated_latency_s(est, count) + count * est.bandwidth_s


def _scale_index(n_nodes: int) -> int:
    return 0 if n_nodes == 1 else (1 if n_nodes == 2 else 2)


def protocol_allowed(shape: AlgoShape, proto: str, v: CommView) -> bool:
    """NCCL's protocol rules: NVLS/CollNet run Simple only; point-to-point operations (alltoall, sendrecv)
    LL or Simple, never LL128 (enqueue.cc addP2pToPlan: LL up to P2P_LL_THRESHOLD bytes a channel, else
    Simple); LL128 only on validated NVLink GPUs."""
    if shape.algo in ("nvls", "nvls_tree", "collnet") and proto != "simple":
        return False
    if shape.algo == "direct" and proto == "ll128":
        return False
    if proto == "ll128":
        return v.intra_kind == "nvlink" and v.arch in C.LL128_ARCHS
    return True


def protocol_share(op: str, algo: str, proto: str, v: CommView) -> float:
    """Fraction of the Simple protocol's bandwidth a protocol reaches (tuning.cc refinements).

    Ring LL: 1/4 (multi-node, all_reduce, reduce) or 1/3, as NCCL 2.18-2.20 model it; 2.21+ model
    0.5 (capped by llMaxBws): with the 2.21+ caps that made the public validation worse at < 1 MiB
    (19.5% -> 19.8%).
    LL128 0.92 is the 2.23+ rule; 2.18-2.22 used 0.7 at one GPU per node."""
    if proto == "simple":
        return 1.0
    if proto == "ll128":
        return 0.92
    if algo == "tree":
        return 1.0 / 3.8
    return 0.25 if (v.multi_node or op in ("all_reduce", "reduce")) else 1.0 / 3.0


def resource_demands(op: str, shape: AlgoShape, proto: str, v: CommView, p: ModelParams) -> dict[str, float]:
    """Seconds per byte of S each resource needs at its achievable rate."""
    share = protocol_share(op, shape.algo, proto, v)
    demands: dict[str, float] = {}
    if shape.intra_volume:
        intra_eff = p.nvls_efficiency if shape.nvls_intra else p.intra_efficiency
        # staged through host memory, a GPU's traffic shares its PCIe switch's uplink with the switch's other GPUs
        # (topologies.layout: GPUs in pairs under a switch)
        senders = min(GPUS_PER_PCIE_SWITCH, v.ranks_per_node - (1 if shape.chain_depth else 0)) \
            if v.intra_kind == "shm" else 1
        demands["intra"] = shape.intra_volume * senders / (v.intra_Bps * intra_eff * share)
    if v.transport is not None and (shape.net_volume or shape.net_volume_per_nic):
        # only the NICs NCCL's graph reaches carry it (nccl_search: 15 of an NVL72 rack's 72)
        reached = nics_reached(shape.algo, v) / max(1, v.nics_per_node)
        net_Bps = v.net_Bps * reached * p.net_efficiency * share
        if shape.net_volume_per_nic:  # one GPU's traffic through its own NIC
            demands["net"] = shape.net_volume_per_nic / (net_Bps / max(1, v.nics_per_node))
        else:
            demands["net"] = shape.net_volume / net_Bps
        crossing = cross_leaf_fraction(shape, v)
        if crossing > 0.0 and math.isfinite(v.spine_Bps):
            spine_Bps = v.spine_Bps * p.net_efficiency * share
            demands["spine"] = (shape.net_volume_per_nic * crossing / (spine_Bps / max(1, v.nics_per_node))
                                if shape.net_volume_per_nic else shape.net_volume * crossing / spine_Bps)
            # under ECMP the busiest uplink sets the pace (simulator.collectives.ecmp)
            carrier = (1 / max(1, v.nics_per_node)) if shape.net_volume_per_nic else 1.0
            collisions = collision_s_per_byte(
                shape.algo, op, v, shape.net_volume_per_nic or shape.net_volume, v.net_Bps * reached * carrier,
                v.spine_Bps * carrier, crossing) / (p.net_efficiency * share)
            demands["spine"] = max(demands["spine"], collisions)
    return demands


def cross_leaf_fraction(shape: AlgoShape, v: CommView) -> float:
    """Share of a node's network traffic that leaves its leaf group (the communicator's nodes in order,
    spanning `spanned_leaf_groups` leaf groups). A ring enters and leaves each group once
    per channel: groups / nodes of the traffic on average. A double binary tree's edges mostly
    join distant nodes: about 1 - 1/groups. Direct sends (alltoall, sendrecv) go to every other node
    alike: the share of those outside the leaf group (a pair of nodes under different leaves: all)."""
    return crossing_fraction(shape.algo, v.n_nodes, v.spanned_leaf_groups)


def crossing_fraction(algo: str, n_nodes: int, groups: int) -> float:
    """Share of a node's network traffic (and of its network hops) that leaves its group, for nodes in
    order spanning `groups` groups of a fabric tier (cross_leaf_fraction gives the reasoning)."""
    if groups <= 1:
        return 0.0
    if algo == "ring":
        return min(1.0, groups / n_nodes)
    if algo == "direct":  # the other nodes outside a node's group, n / groups nodes a group
        return n_nodes * (1.0 - 1.0 / groups) / (n_nodes - 1)
    return 1.0 - 1.0 / groups


def fabric_hop_us(shape: AlgoShape, v: CommView) -> float:
    """What a network hop pays on average for the fabric tiers it crosses, us: the share of hops that
    leave the leaf group times the latency of going up to a spine and down (two switch links), plus
    the share that leave the pod of a three-tier fabric times two more (comm.fabric_tier_latencies).
    NCCL's network hop constant is the cost of a hop under one leaf."""
    return (crossing_fraction(shape.algo, v.n_nodes, v.spanned_leaf_groups) * v.cross_leaf_hop_us
            + crossing_fraction(shape.algo, v.n_nodes, v.spanned_pods) * v.cross_pod_hop_us)


def buffer_bytes(proto: str, v: CommView) -> float:
    """A channel's buffer per connection with this protocol: NCCL_BUFFSIZE for Simple, the fixed LL and LL128
    buffers otherwise (nccl_constants.BUFFER_BYTES)."""
    return float(v.simple_buffer_bytes) if proto == "simple" else float(C.BUFFER_BYTES[proto])


def per_channel_Bps(op: str, shape: AlgoShape, proto: str, v: CommView) -> float:
    """What one channel moves per second with this protocol (tuning.cc per-channel tables)."""
    rate = C.PER_CHANNEL_GBPS[v.arch][_scale_index(v.n_nodes)] * 1e9 * protocol_share(op, shape.algo, proto, v)
    if proto == "ll128":
        rate = min(rate, C.LL128_PER_CHANNEL_GBPS[v.arch] * 1e9)
    return rate


def channel_count(shape: AlgoShape, proto: str, size_bytes: float, bus_Bps: float, per_channel: float,
                  v: CommView, limits: tuple[int, int] = (1, C.MAX_CHANNELS)) -> float:
    """Channels NCCL runs: enough for the bus rate (at most MAX_CHANNELS), but fewer for small
    operations: NCCL drops channels while one would get fewer than threads x threshold bytes, and
    at one channel halves its threads, down to one warp in eight (enqueue.cc). The count is
    returned as the continuous parallelism that rule approaches (NCCL's whole-channel steps would
    make a slightly larger operation finish sooner; the smooth form keeps time monotone in size).
    `limits` are NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS (simulator.collectives.tuner.channel_limits)."""
    wanted = max(limits[0], min(limits[1], math.ceil(bus_Bps / per_channel)))
    threshold = C.THREADS_PER_CHANNEL[proto] * C.THREAD_THRESHOLD_BYTES[proto]
    if proto == "ll" and shape.algo == "ring":
        threshold *= v.n_ranks
    return min(float(wanted), max(MIN_THREAD_FRACTION, size_bytes / threshold))


def chunk_bytes(size_bytes: float, shape: AlgoShape, channels: float, v: CommView, proto: str,
                tree_chunk: float | None = None) -> float:
    """Bytes one channel moves per step before it hands off to its peer: its share of the step, at most
    CHUNK_SLOTS buffer slots, or one for a tree's Simple chunks (NCCL's chunkSteps, enqueue.cc), or a tree's
    `tree_chunk` where given (tree_chunk_bytes: NCCL's own sizing)."""
    if shape.algo == "ring" and shape.chain_depth == 0:
        per_step = size_bytes / (channels * v.n_ranks)
    elif shape.nvls_intra:
        per_step = size_bytes / (channels * v.ranks_per_node)
    else:
        per_step = size_bytes / channels
    slot = buffer_bytes(proto, v) / C.NCCL_STEPS
    if shape.algo == "tree" and tree_chunk is not None:
        cap = tree_chunk
    else:
        cap = slot if shape.algo == "tree" and proto == "simple" else CHUNK_SLOTS * slot
    # every thread of the channel moves at least one 8-byte word per step
    return max(C.THREADS_PER_CHANNEL[proto] * 8.0, min(per_step, cap))


def tree_chunk_bytes(size_bytes: float, channels: float, v: CommView, proto: str, shrink_simple: bool) -> float:
    """The chunk a tree all_reduce streams per channel and step (enqueue.cc): one buffer slot, halved while the
    operation would leave each channel too few chunks to keep the tree's pipeline busy. Simple (NCCL 2.4-2.19,
    `shrink_simple`): fewer than 8 x depth chunks down to 128 KiB, 4 x depth down to 64 KiB, depth down to
    32 KiB, depth being NCCL's ranks per node - 1 + log2(nodes) (connect.cc). LL128 (every release with it):
    fewer than 64 x s / ppn chunks down to 128 KiB, 16 x s / ppn down to 32 KiB, s = 1 + log2(nodes) + ppn / 10.
    LL's slot is small already and stays."""
    chunk = buffer_bytes(proto, v) / C.NCCL_STEPS
    nodes_log2 = int(math.log2(v.n_nodes)) if v.n_nodes > 1 else 0
    ppn = v.n_ranks / v.n_nodes
    rules: tuple[tuple[float, float], ...]  # (chunks a channel should have, the chunk's floor), in order
    if proto == "simple" and shrink_simple:
        depth = v.ranks_per_node - 1 + nodes_log2
        rules = ((8.0 * depth, 131072.0), (4.0 * depth, 65536.0), (float(depth), 32768.0))
    elif proto == "ll128":
        steps = 1 + nodes_log2 + 0.1 * ppn
        rules = ((steps * 64.0 / ppn, 131072.0), (steps * 16.0 / ppn, 32768.0))
    else:
        return chunk
    per_channel = size_bytes / max(1, round(channels))
    for wanted, floor in rules:
        while per_channel // chunk < wanted and chunk > floor:
            chunk /= 2
    return chunk


def nvls_chunk_bytes(size_bytes: float, concurrent: int, n_nodes: int, tree: bool) -> float:
    """The chunk each of NVLS's or NVLS-tree's `concurrent` operations (channels x heads) moves a step
    (enqueue.cc): NCCL_NVLS_CHUNKSIZE, NVLS-tree's at most 64 KiB on 4 nodes or more, then cut while the operation
    is small against concurrent x chunk (nccl_constants.NVLS_CHUNK_STEPS, NVLS_TREE_CHUNK_STEPS)."""
    chunk = float(C.NVLS_CHUNK_BYTES)
    if tree and n_nodes >= 4:
        chunk = min(chunk, C.NVLS_TREE_MAX_CHUNK_BYTES_4_NODES)
    for factor, cap in C.NVLS_TREE_CHUNK_STEPS if tree else C.NVLS_CHUNK_STEPS:
        if size_bytes < factor * concurrent * chunk and chunk > cap:
            chunk = cap
    return chunk


def network_peers(op: str, shape: AlgoShape, v: CommView) -> int:
    """Peers on other nodes that a rank exchanges with one after another in a point-to-point operation: every
    rank off its node for alltoall, the one neighbour for sendrecv; none for the collective algorithms."""
    if shape.algo != "direct" or not v.multi_node:
        return 0
    return v.n_ranks - v.ranks_per_node if op == "alltoall" else 1


def hop_latencies_us(proto: str, v: CommView, p: ModelParams, fabric_us: float = 0.0) -> tuple[float, float, float]:
    """(intra-node hop, network hop, network handshake) latencies with this protocol, us; `fabric_us`
    is what a network hop adds for the fabric tiers it crosses (fabric_hop_us)."""
    intra = C.HOP_LATENCY_US["nvlink" if v.intra_kind == "nvlink" else "pcie"][proto] * p.latency_scale
    if v.multi_node and proto == "ll":
        intra *= 1.8  # tuning.cc: LL intra-node latency under a multi-node communicator
    handshake = C.HOP_LATENCY_US["net"][proto] * p.net_latency_scale + fabric_us
    return intra, handshake + p.net_extra_latency_us, handshake


def p2p_channel_s_per_byte(op: str, shape: AlgoShape, proto: str, v: CommView, net_channels: int) -> float:
    """Seconds per byte of S that a GPU's network point-to-point traffic needs on the `net_channels`
    channels that carry it (simulator.collectives.p2p_channels); 0 where none is counted."""
    if shape.algo != "direct" or not v.multi_node or net_channels <= 0:
        return 0.0
    per_gpu = (v.n_ranks - v.ranks_per_node) / v.n_ranks if op == "alltoall" else shape.net_volume_per_nic
    rate = net_channels * P2P_NET_CHANNEL_GBPS * 1e9 * (0.5 if proto == "ll" else 1.0)
    return per_gpu / rate


def estimate(op: str, size_bytes: int, shape: AlgoShape, proto: str, v: CommView,
             p: ModelParams, limits: tuple[int, int] = (1, C.MAX_CHANNELS),
             overlap: bool = False, p2p_net_channels: int = 0,
             nccl_tree_chunks: bool | None = None, nvls_channels: int | None = None) -> CollectiveEstimate:
    """Predict the time of `op` on `size_bytes` with this algorithm shape, protocol and parameters,
    on at least / at most `limits` channels; `overlap`: the overlapped handshakes (module docstring);
    `p2p_net_channels`: the channels a GPU's point-to-point traffic to other nodes runs on (0: unlimited);
    `nccl_tree_chunks`: a tree's chunks as NCCL sizes them, with (True) or without the Simple loop of
    releases before 2.20, or None for whole buffer slots (module docstring); `nvls_channels`: the NVLS channels
    the release runs (None: nccl_constants.NVLS_CHANNELS for the GPU generation)."""
    demands = resource_demands(op, shape, proto, v, p)
    bottleneck = max(demands, key=lambda k: demands[k])
    seconds_per_byte = demands[bottleneck]
    per_channel = per_channel_Bps(op, shape, proto, v)
    busiest = max(shape.intra_volume, shape.net_volume, shape.net_volume_per_nic)
    channels = channel_count(shape, proto, size_bytes, busiest / seconds_per_byte, per_channel, v, limits)
    channel_limit = busiest / (channels * per_channel)
    if proto == "ll":
        channel_limit = max(channel_limit, busiest / (C.LL_MAX_GBPS[v.arch] * 1e9))
    channel_limit = max(channel_limit, p2p_channel_s_per_byte(op, shape, proto, v, p2p_net_channels))
    if channel_limit > seconds_per_byte:
        seconds_per_byte, bottleneck = channel_limit, "channels"

    intra_hop, net_hop, net_handshake = hop_latencies_us(proto, v, p, fabric_hop_us(shape, v))
    base = C.BASE_LATENCY_US[shape.algo][proto] * p.latency_scale
    latency_s = (base + shape.intra_hops * intra_hop + shape.net_hops * net_hop
                 + network_peers(op, shape, v) * p.p2p_peer_us) * US

    tree_chunk = None
    if shape.algo == "tree" and nccl_tree_chunks is not None:
        tree_chunk = tree_chunk_bytes(size_bytes, channels, v, proto, nccl_tree_chunks)
    chunk = chunk_bytes(size_bytes, shape, channels, v, proto, tree_chunk)
    chunks = busiest * size_bytes / (channels * chunk)
    if shape.nvls_intra:  # each channel runs one operation per NVLS head at once (enqueue.cc concurrentOps)
        chunks /= nvls_heads(v)
    ll_intra = overlap and proto == "ll" and shape.algo != "direct"
    sync_hop = net_handshake if shape.net_hops and not ll_intra else intra_hop
    exposed_s = p.sync_hops * sync_hop * US
    if overlap and proto == "simple" and shape.net_hops:
        exposed_s = max(0.0, exposed_s - chunk * channels * seconds_per_byte / busiest)
    bandwidth_s = size_bytes * seconds_per_byte + chunks * exposed_s

    fill_s = 0.0
    # NVLS and NVLS-tree: every concurrent operation's first chunk crosses the stages before the last
    nvls_stages = C.NVLS_STAGES.get(op, 0) if shape.algo == "nvls" else shape.chain_depth
    if shape.algo in ("nvls", "nvls_tree") and nvls_stages > 1:
        channels_nvls = nvls_channels or C.NVLS_CHANNELS.get(v.arch, C.NVLS_CHANNELS["hopper"])
        concurrent = channels_nvls * nvls_heads(v)
        step_bytes = concurrent * nvls_chunk_bytes(size_bytes, concurrent, v.n_nodes, shape.algo == "nvls_tree")
        fill_s = (nvls_stages - 1) * min(step_bytes, size_bytes) * seconds_per_byte
    elif shape.chain_depth > 1:
        slot = buffer_bytes(proto, v) / C.NCCL_STEPS if tree_chunk is None else tree_chunk
        slice_bytes = min(slot, size_bytes / channels)
        fill_s = (shape.chain_depth - 1) * slice_bytes / per_channel
    return CollectiveEstimate(op, size_bytes, shape.algo, proto, latency_s + fill_s + bandwidth_s,
                              latency_s, fill_s, bandwidth_s, bottleneck, max(1, round(channels)),
                              tuple(sorted(demands.items())), base * US)
