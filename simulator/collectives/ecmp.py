"""ECMP collisions: few large flows hashed onto a leaf's uplinks, and the collective waits for the busiest.

Where a fabric pins each flow to one uplink by a hash of its headers (TopologySpec.routing "ecmp": RoCE and
TCP on Ethernet ECMP, InfiniBand with static routing), the flows leaving a leaf do not spread evenly over
its U uplinks: each picks one at random, and a link that drew M flows gives each a 1/M share. A
collective's flows carry equal bytes and it ends with its slowest flow, so its time through the spines
is a flow's bytes x E[max(M, m)] / (uplink rate), where m is the load an uplink carries before it, not
the flow's NIC, is what limits a flow (m = uplink rate / a flow's share of its NIC). With adaptive routing
the same bytes spread over every uplink (the fluid spine model of cost.resource_demands).

The flows are NCCL's connections: one per channel and peer across nodes, with NCCL_IB_QPS_PER_CONNECTION
queue pairs each on InfiniBand/RoCE (default 1; src/transport/net_ib.cc) and NCCL_NSOCKS_PERTHREAD x
NCCL_SOCKET_NTHREADS sockets on the socket transport (default 1 x 1 on plain Ethernet;
src/transport/net_socket.cc). A connection's messages go to its QPs in turn (NCCL_IB_SPLIT_DATA_ON_QPS=0,
the default) or are split over them: over a large transfer each QP carries an equal share, so a connection
of q QPs is q flows of 1/q of its bytes. RoCE v2 puts a per-QP UDP source port in the 5-tuple, so each QP
hashes on its own. Meta measured up to 40% faster all_reduce on its RoCE training fabric from more QPs per
connection and hashing on them (Gangidi et al., "RDMA over Ethernet for Distributed Training at Meta
Scale", SIGCOMM 2024); Alibaba's HPN reports the same hash polarisation of few, large, synchronous flows
(Qian et al., SIGCOMM 2024).

Flows per node (`node_flows`): a ring's channels each leave a node once (NCCL's ring graph channels,
duplicated by connect.cc ncclTopoPostset: simulator.collectives.nccl_search); a tree node sends to its
parent and children, about two flows a channel; alltoall one connection per remote GPU pair and P2P
channel (NCCL_NCHANNELS_PER_NET_PEER, 2: src/graph/paths.cc); sendrecv one per P2P channel. CollNet
(SHARP) is routed on the aggregation manager's trees, not hashed: unaffected.

The load M of the busiest of U uplinks under F uniformly hashed flows is computed exactly (two uplinks:
max(X, F - X) with X binomial; more: a recursion over the uplinks, each taking a binomial share of the
flows still to place) up to EXACT_MAX_FLOWS flows, and beyond with the uplinks' loads taken as
independent Poisson(F/U) counts (Mitzenmacher and Upfal, Probability and Computing, 2005, ch. 5.4): at
256 flows that is within 0.03% of the exact value on 64 uplinks, 0.2% on 4, 0.5% on 3. Both are
deterministic; the result depends on flows per node and uplinks, never on the GPU count.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from simulator.collectives.comm import CommView
from simulator.collectives.nccl_search import inter_node_graph, nvls_heads

# Flows up to which the max-load distribution is exact; beyond, the Poisson approximation (docstring).
EXACT_MAX_FLOWS = 256
# P2P channels NCCL opens to each remote peer (paths.cc NCCL_NCHANNELS_PER_NET_PEER, 2).
P2P_CHANNELS_PER_NET_PEER = 2
# connect.cc ncclTopoPostset duplicates the ring graph's channels, and on sm90+ duplicates them once
# more while there are fewer than 16; at most MAXCHANNELS (32).
DUPLICATE_BELOW = 16
MAX_CHANNELS = 32


def ring_channels(v: CommView) -> int:
    """Channels of NCCL's ring (and tree) graph across nodes, after duplication; two per NIC where the
    graph search does not apply (GPUs without NVLink)."""
    channels, _ = inter_node_graph(v)
    if not channels:
        return 2 * max(1, v.nics_per_node)
    channels *= 2
    if v.arch in ("hopper", "blackwell") and channels < DUPLICATE_BELOW:
        channels *= 2
    return min(MAX_CHANNELS, channels)


def node_flows(algo: str, op: str, v: CommView) -> int:
    """Network flows a node keeps busy at once for this algorithm, before NCCL's per-connection split
    (module docstring); 0 for CollNet (not hashed)."""
    if algo in ("ring", "pat"):
        return ring_channels(v)
    if algo == "tree":
        return 2 * ring_channels(v)
    if algo == "nvls_tree":
        return 2 * nvls_heads(v)
    if algo == "direct":
        remote_peers = v.n_ranks - v.ranks_per_node if op == "alltoall" else 1
        senders = v.ranks_per_node if op == "alltoall" else 1
        return senders * remote_peers * P2P_CHANNELS_PER_NET_PEER
    return 0


def _log_factorials(n: int) -> np.ndarray:
    return np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=float)))))


def _log_binomial(log_fact: np.ndarray, trials: np.ndarray, taken: np.ndarray, p: float) -> np.ndarray:
    """log P(Binomial(trials, p) = taken), for taken <= trials."""
    rest = trials - taken
    return log_fact[trials] - log_fact[taken] - log_fact[rest] + taken * math.log(p) + rest * math.log1p(-p)


def _highest_load(flows: int, uplinks: int) -> int:
    """A load no uplink exceeds but with negligible probability: the mean plus ten standard deviations of a
    Poisson count (the tail beyond is below 1e-20 an uplink)."""
    mean = flows / uplinks
    return min(flows, math.ceil(mean + 10.0 * math.sqrt(mean) + 10.0))


def _exact_cdf(flows: int, uplinks: int, caps: range) -> list[float]:
    """P(no uplink draws more than each cap of `caps`), exactly: placing the flows uplink by uplink, the next
    of j uplinks left takes Binomial(m, 1/j) of the m flows still unplaced (the last takes the rest)."""
    log_fact = _log_factorials(flows)
    m, i = np.meshgrid(np.arange(flows + 1), np.arange(caps.stop), indexing="ij")
    valid = i <= m
    left = np.where(valid, m - i, 0)
    weights = []  # Binomial(m, 1/j) at i, for j = 2 .. uplinks
    for j in range(2, uplinks + 1):
        log_p = _log_binomial(log_fact, m, np.where(valid, i, 0), 1.0 / j)
        weights.append(np.where(valid, np.exp(log_p), 0.0))
    cdf = []
    for cap in caps:
        ok = (np.arange(flows + 1) <= cap).astype(float)
        for w in weights:
            ok = (w[:, :cap + 1] * ok[left[:, :cap + 1]]).sum(axis=1)
        cdf.append(float(ok[flows]))
    return cdf


def _poisson_cdf(mean: float, highest: int) -> np.ndarray:
    k = np.arange(highest + 1)
    return np.cumsum(np.exp(k * math.log(mean) - mean - _log_factorials(highest)))


@functools.lru_cache(maxsize=512)
def max_load_cdf(flows: int, uplinks: int) -> tuple[tuple[int, float], ...]:
    """(t, P(max load <= t)) for t from the least possible max load until the tail is negligible:
    `flows` flows hashed uniformly and independently onto `uplinks` >= 2 uplinks (module docstring). Two
    uplinks: exact from the binomial split; up to EXACT_MAX_FLOWS flows: exact; beyond: Poisson."""
    caps = range(-(-flows // uplinks), _highest_load(flows, uplinks) + 1)
    if uplinks == 2:  # max(X, F - X), X ~ Binomial(F, 1/2)
        taken = np.arange(flows + 1)
        cumulative = np.cumsum(np.exp(_log_binomial(_log_factorials(flows), np.full_like(taken, flows), taken, 0.5)))
        cdf = [float(cumulative[cap] - (cumulative[flows - cap - 1] if flows - cap - 1 >= 0 else 0.0)) for cap in caps]
    elif flows <= EXACT_MAX_FLOWS:
        cdf = _exact_cdf(flows, uplinks, caps)
    else:
        poisson = _poisson_cdf(flows / uplinks, caps.stop - 1)
        cdf = [float(poisson[cap]) ** uplinks for cap in caps]
    return tuple((cap, min(1.0, p)) for cap, p in zip(caps, cdf, strict=True))


def expected_max_load(flows: int, uplinks: int, floor: float = 0.0) -> float:
    """E[max(M, floor)], M the most flows any of `uplinks` uplinks draws among `flows` hashed ones."""
    if flows <= 0 or uplinks <= 0:
        return floor
    if uplinks == 1:
        return max(float(flows), floor)
    total, below = 0.0, 0.0
    for cap, at_most in max_load_cdf(flows, uplinks):
        total += (at_most - below) * max(float(cap), floor)
        below = at_most
    return total + (1.0 - below) * max(float(flows), floor)


def collision_s_per_byte(algo: str, op: str, v: CommView, volume: float, carrier_Bps: float,
                         spine_share_Bps: float, crossing: float) -> float:
    """Seconds per byte of S the busiest uplink sets under ECMP, at line rates (the caller applies
    efficiency and protocol share); 0.0 where nothing is hashed (module docstring). `volume` bytes per
    byte of S leave the carrier (a node's NICs that carry the algorithm, or the one NIC of a sendrecv) at
    `carrier_Bps` in its node_flows flows, `crossing` of them through `spine_share_Bps`, the carrier's
    part of its leaf's U uplinks of uplink_Bps each. The flows leaving that leaf are the carrier's
    crossing ones times the carriers that share those uplinks alike (U x uplink_Bps / spine_share_Bps):
    concurrent groups of a training step load the same uplinks."""
    if not (v.ecmp and crossing > 0.0 and v.uplinks_per_leaf > 0 and v.uplink_Bps > 0.0
            and carrier_Bps > 0.0 and spine_share_Bps > 0.0):
        return 0.0  # adaptive routing, or nothing crosses the spines: no flow count needed
    flows = node_flows(algo, op, v)
    if flows <= 0:
        return 0.0
    per_flow_bytes = volume / (flows * v.flows_per_connection)
    leaf_flows = max(1, round(flows * crossing * v.uplink_Bps * v.uplinks_per_leaf / spine_share_Bps))
    leaf_flows *= v.flows_per_connection
    # the load at which an uplink, not the flow's own NIC share, limits a flow
    free_load = v.uplink_Bps * flows * v.flows_per_connection / carrier_Bps
    return per_flow_bytes * expected_max_load(leaf_flows, v.uplinks_per_leaf, free_load) / v.uplink_Bps
