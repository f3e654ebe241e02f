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

The load M of the busiest of U uplinks under F uniformly hashed flows is computed exactly (a recursion
over the uplinks, each taking a binomial share of the flows still to place) up to EXACT_MAX_FLOWS flows,
and beyond with the uplinks' loads taken as independent Poisson(F/U) counts (Mitzenmacher and Upfal,
Probability and Computing, 2005, ch. 5.4), which is within a fraction of a percent there. Both are
deterministic; the result depends on flows per node and uplinks, never on the GPU count.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from simulator.collectives.comm import CommView
from simulator.collectives.nccl_search import inter_node_graph, nvls_heads

# Flows up to which the max-load distribution is exact; beyond, the Poisson approximation (docstring).
EXACT_MAX_FLOWS = 512
# P2P channels NCCL opens to each remote peer (paths.cc NCCL_NCHANNELS_PER_NET_PEER, 2).
P2P_CHANNELS_PER_NET_PEER = 2
# connect.cc ncclTopoPostset duplicates the ring graph's channels, and on sm90+ duplicates them once
# more while there are fewer than 16; at most MAXCHANNELS (32).
DUPLICATE_BELOW = 16
MAX_CHANNELS = 32
_TAIL = 1e-12  # the load distribution is summed until this much probability is left


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


def _exact_at_most(flows: int, uplinks: int, cap: int, log_fact: np.ndarray) -> float:
    """P(no uplink draws more than `cap` of `flows` uniformly hashed flows), exactly: placing the flows
    uplink by uplink, the next of j uplinks left takes Binomial(m, 1/j) of the m flows still unplaced."""
    remaining = np.arange(flows + 1)
    taken = np.arange(cap + 1)
    m, i = np.meshgrid(remaining, taken, indexing="ij")
    valid = i <= m
    left = np.where(valid, m - i, 0)
    ok = (remaining <= cap).astype(float)  # the last uplink takes every flow left
    for j in range(2, uplinks + 1):
        log_p = (log_fact[m] - log_fact[i] - log_fact[left]
                 + i * math.log(1.0 / j) + left * math.log1p(-1.0 / j))
        weights = np.where(valid, np.exp(np.where(valid, log_p, 0.0)), 0.0)
        ok = (weights * ok[left]).sum(axis=1)
    return float(ok[flows])


def _poisson_at_most(mean: float, cap: int) -> float:
    """P(Poisson(mean) <= cap)."""
    terms = np.arange(cap + 1)
    log_pmf = terms * math.log(mean) - mean - _log_factorials(cap)
    return float(np.exp(log_pmf).sum())


@functools.lru_cache(maxsize=512)
def max_load_cdf(flows: int, uplinks: int) -> tuple[tuple[int, float], ...]:
    """(t, P(max load <= t)) for t from the least possible max load until the tail is negligible:
    `flows` flows hashed uniformly and independently onto `uplinks` uplinks (module docstring)."""
    low = -(-flows // uplinks)
    exact = flows <= EXACT_MAX_FLOWS
    log_fact = _log_factorials(flows) if exact else np.zeros(0)
    cdf = []
    for cap in range(low, flows + 1):
        if exact:
            p = _exact_at_most(flows, uplinks, cap, log_fact)
        else:
            p = _poisson_at_most(flows / uplinks, cap) ** uplinks
        cdf.append((cap, min(1.0, p)))
        if p >= 1.0 - _TAIL:
            break
    return tuple(cdf)


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
    flows = node_flows(algo, op, v)
    if not (v.ecmp and flows > 0 and crossing > 0.0 and v.uplinks_per_leaf > 0 and v.uplink_Bps > 0.0
            and carrier_Bps > 0.0 and spine_share_Bps > 0.0):
        return 0.0
    per_flow_bytes = volume / (flows * v.flows_per_connection)
    leaf_flows = max(1, round(flows * crossing * v.uplink_Bps * v.uplinks_per_leaf / spine_share_Bps))
    leaf_flows *= v.flows_per_connection
    # the load at which an uplink, not the flow's own NIC share, limits a flow
    free_load = v.uplink_Bps * flows * v.flows_per_connection / carrier_Bps
    return per_flow_bytes * expected_max_load(leaf_flows, v.uplinks_per_leaf, free_load) / v.uplink_Bps
