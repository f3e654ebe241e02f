"""Choosing the algorithm and protocol of a collective, unless pinned; the physical model
(simulator.collectives.cost) prices the pair chosen.

Two selections (SELECTIONS):
- model (the default without a calibration profile): the pair the physical model prices fastest,
  ranking a tree's bandwidth as NCCL's tuner credits it (selection_time_s), among the pairs the NCCL
  release offers; for a series of
  back-to-back chained calls (reduces or broadcasts per rank), the pair whose series is fastest
  (cost.repeated_time_s: the series pays its fill once, so its bandwidth decides);
- nccl: the pair the tuner of the NCCL release in use ranks first (simulator.collectives.tuner,
  with the constants of simulator.collectives.nccl_releases), whatever the model thinks of it. A
  calibration fits the measured rows with it by default, and predictions with its profile take it
  (simulator.calibration.fit.FIT_SELECTION).

Pins follow NCCL's environment: NCCL_ALGO and NCCL_PROTO take comma-separated lists (case does
not matter; a leading '^' excludes the listed ones), NCCL_NVLS_ENABLE=0 turns NVLink SHARP off,
NCCL_COLLNET_ENABLE=0 turns SHARP off. The CLI's --algo/--proto pin one each.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from simulator.collectives.algorithms import AlgoShape, shapes_for
from simulator.collectives.comm import CommView
from simulator.collectives.cost import (
    CHAINED_OPS,
    CollectiveEstimate,
    estimate,
    protocol_allowed,
    repeated_time_s,
)
from simulator.collectives.nccl_constants import PROTOCOLS
from simulator.collectives.nccl_releases import TunerRelease, family, tuner_release
from simulator.collectives.nccl_search import inter_node_graph
from simulator.collectives.params import ModelParams
from simulator.collectives.tuner import MAX_CHANNELS, enabled, nccl_intra_gbps, tuner_channels, tuner_time_us
from simulator.core.errors import ConfigError

# NCCL_ALGO spellings -> our algorithm names (NVLS covers NVLS and NVLS-tree, CollNet both forms).
_ALGO_ALIASES = {
    "ring": ("ring",),
    "tree": ("tree",),
    "nvls": ("nvls",),
    "nvlstree": ("nvls_tree",),
    "nvls_tree": ("nvls_tree",),
    "collnet": ("collnet",),
    "collnetdirect": ("collnet",),
    "collnetchain": ("collnet",),
    "pat": ("pat",),
}
SELECTIONS = ("model", "nccl")
SELECTION_HELP = ("Where the algorithm and protocol come from: 'model' (the pair the cost model prices "
                  "fastest) or 'nccl' (the pair NCCL's tuner of the release ranks first). Default: 'model'; with "
                  "--calibration, the selection the profile's fit priced its logs with ('nccl' unless it was "
                  "fitted with --selection model).")
ALGO_CHOICES = ("auto", "ring", "tree", "nvls", "collnet", "pat")
PROTO_CHOICES = ("auto", "ll", "ll128", "simple")


def _parse_list(text: str, universe: Mapping[str, tuple[str, ...]], var: str) -> set[str]:
    negate = text.startswith("^")
    names: set[str] = set()
    for token in text.lstrip("^").split(","):
        key = token.strip().lower()
        if not key:
            continue
        if key not in universe:
            raise ConfigError(f"{var}: unknown value {token.strip()!r} (valid: {', '.join(sorted(universe))})")
        names.update(universe[key])
    if negate:
        every = {name for group in universe.values() for name in group}
        return every - names
    return names


def allowed_sets(algo: str = "auto", proto: str = "auto",
                 env: Mapping[str, str] | None = None) -> tuple[set[str] | None, set[str] | None]:
    """Algorithms and protocols allowed by the CLI pins and NCCL environment (None = any)."""
    env = env or {}
    algos: set[str] | None = None
    protos: set[str] | None = None
    if "NCCL_ALGO" in env:
        algos = _parse_list(env["NCCL_ALGO"], _ALGO_ALIASES, "NCCL_ALGO")
    if "NCCL_PROTO" in env:
        protos = _parse_list(env["NCCL_PROTO"], {p: (p,) for p in PROTOCOLS}, "NCCL_PROTO")
    if algo != "auto":
        if algo not in ALGO_CHOICES:
            raise ConfigError(f"--algo: unknown algorithm {algo!r} (valid: {', '.join(ALGO_CHOICES)})")
        algos = {"nvls", "nvls_tree"} if algo == "nvls" else {algo}
    if proto != "auto":
        if proto not in PROTO_CHOICES:
            raise ConfigError(f"--proto: unknown protocol {proto!r} (valid: {', '.join(PROTO_CHOICES)})")
        protos = {proto}
    return algos, protos


# NCCL's caps: NCCL_IB_MAX_QPS (net_ib) queue pairs a connection, MAX_THREADS socket threads and
# MAX_SOCKETS sockets a connection (net_socket.cc).
MAX_QPS_PER_CONNECTION = 128
MAX_SOCKET_THREADS = 16
MAX_SOCKETS_PER_CONNECTION = 64


def _env_count(env: Mapping[str, str], name: str, high: int) -> int:
    """A whole-number NCCL variable from 1 to `high` (1 when unset); ConfigError otherwise."""
    text = env.get(name, "1").strip()
    if not text.isdigit() or not 1 <= int(text) <= high:
        raise ConfigError(f"{name}: expected a whole number from 1 to {high}, got {env[name]!r}")
    return int(text)


def flows_per_connection(transport: str | None, env: Mapping[str, str]) -> int:
    """Flows NCCL opens per connection, each hashed on its own under ECMP: NCCL_IB_QPS_PER_CONNECTION
    queue pairs on InfiniBand and RoCE (default 1), NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD sockets on
    the socket transport (default 1 x 1 on plain Ethernet; NCCL caps the product at 64). Other
    transports' plugins: 1."""
    if transport in ("ib", "roce"):
        return _env_count(env, "NCCL_IB_QPS_PER_CONNECTION", MAX_QPS_PER_CONNECTION)
    if transport in ("sockets", "ethernet"):
        threads = _env_count(env, "NCCL_SOCKET_NTHREADS", MAX_SOCKET_THREADS)
        return min(MAX_SOCKETS_PER_CONNECTION,
                   threads * _env_count(env, "NCCL_NSOCKS_PERTHREAD", MAX_SOCKETS_PER_CONNECTION))
    return 1


def view_for_env(v: CommView, env: Mapping[str, str] | None) -> CommView:
    """Apply NCCL switches that change what hardware features NCCL may use, and the flows it opens per
    connection (flows_per_connection)."""
    env = env or {}
    if env.get("NCCL_NVLS_ENABLE") == "0" and v.nvls:
        v = replace(v, nvls=False)
    if env.get("NCCL_COLLNET_ENABLE") == "0" and v.sharp:
        v = replace(v, sharp=False)
    flows = flows_per_connection(v.transport, env)
    if flows != v.flows_per_connection:
        v = replace(v, flows_per_connection=flows)
    if "NCCL_BUFFSIZE" in env:
        v = replace(v, simple_buffer_bytes=_buffer_size(env["NCCL_BUFFSIZE"]))
    return v


def _buffer_size(text: str) -> int:
    """NCCL_BUFFSIZE's bytes (decimal or 0x hex, as NCCL reads it); ConfigError unless a positive whole number."""
    try:
        value = int(text.strip(), 0)
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(f"NCCL_BUFFSIZE: expected a positive number of bytes (e.g. 8388608), got {text!r}")
    return value


def candidate_shapes(op: str, v: CommView, algos: set[str] | None) -> list[AlgoShape]:
    """The algorithm shapes NCCL could run for op on v, filtered by the allowed set."""
    shapes = shapes_for(op, v)
    if algos is None or op in ("alltoall", "sendrecv"):
        return shapes
    return [shape for shape in shapes if shape.algo in algos]


def selection_option(text: str, option: str = "--selection") -> str:
    """A user-given selection (CLI option); ConfigError unless it is one of SELECTIONS."""
    if text not in SELECTIONS:
        raise ConfigError(f"{option}: unknown selection {text!r} (valid: {', '.join(SELECTIONS)})")
    return text


def selection_time_s(est: CollectiveEstimate, ring: dict[str, CollectiveEstimate], v: CommView,
                     gain: float) -> float:
    """The time the model's own selection ranks a candidate by. NCCL's tuner models a tree's
    bandwidth as 0.9 x half the channels' bus bandwidth, a ring's as n / 2(n-1) of it (tuning.cc), so
    for the same bus bandwidth it never credits a tree with more than 0.9 (n-1)/n of the ring's: trees
    win on latency, rings on bandwidth, except on two nodes of NVSwitch servers, whose tree graph NCCL's
    search rates above the network (`gain`, tree_gain). The prediction itself keeps the tree's own time; only
    the choice follows the tuner."""
    if est.algo != "tree" or est.proto not in ring:
        return est.time_s
    ring_est = ring[est.proto]
    ring_bw_s = ring_est.size_bytes * max(spb for _, spb in ring_est.demand_s_per_byte)
    credited = max(est.bandwidth_s, ring_bw_s / (0.9 * (v.n_ranks - 1) / v.n_ranks * gain))
    return est.latency_s + est.fill_s + credited


def tree_gain(v: CommView, rel: TunerRelease) -> float:
    """How much more bus bandwidth NCCL's tuner gives a tree than the ring of the same channels. On two nodes
    NCCL's search raises the tree graph's intra-node bandwidth above the inter-node one, up to twice it, while
    the chain inside the node carries it (search.cc, pass 2: "increase bwIntra for trees (2 nodes or collnet)",
    every release 2.8-2.30), and the tuner rates trees on at most two nodes by that intra-node bandwidth, then
    caps a tree at perChMaxTreeBw a channel (tuning.cc). NCCL's maintainers: "On two nodes, NCCL uses the tree
    (or nvlstree) algorithm which can indeed go beyond the network bottleneck (provided the intra-node bandwidth
    can sustain that higher speed)" (nccl-tests #196). With the ring graph's channels x speed
    (nccl_search.inter_node_graph) as the ring's: the tree's is min(twice that, a GPU's NVLink as NCCL rates
    it, channels x the release's cap / 0.92, the tree's own 0.92 being in selection_time_s's 0.9). A DGX A100
    with 8 x 200 Gb/s: 8 channels of 24 GB/s, the cap (23.6 a channel from 2.10) holds the tree to 1.07x the
    ring; OCI's A100 with 16 x 100 Gb/s: 16 channels of 12, the NVLink's 240 against the ring's 192, 1.25x;
    p4de's 4 x 100 Gb/s: 4 of 12, 2x. A chain sustains it through an NVSwitch (a GPU's whole NVLink rate a
    hop); in a mesh a hop has one pair's links. Meshes keep 1: A100 meshes' 2-node logs (Perlmutter,
    Polaris) run under a ring's network bound, GH200 quads' (Alps, Olivia) above it, and ranking either by
    the gain made those logs worse at >= 1 MiB (docs/collectives.md). Elsewhere 1. NCCL up to 2.18 duplicates
    the channels after raising the tree (doubling its cap); the ring graph's count is kept here, as ABCI's NCCL
    2.8.4 logs measure ring-bound runs (docs/collectives.md, "Trees on two nodes of NVSwitch servers")."""
    if v.n_nodes != 2 or not v.nvswitch or v.intra_kind != "nvlink":
        return 1.0
    channels, speed = inter_node_graph(v)
    if not channels:
        return 1.0
    ring = channels * speed
    cap = channels * rel.per_channel_tree_gbps[family(rel, v.arch)][1] / 0.92
    return max(1.0, min(2 * ring, nccl_intra_gbps(v), cap) / ring)


def _no_pair(op: str, shapes: list[AlgoShape], protos: set[str] | None, release: TunerRelease) -> ConfigError:
    names = ", ".join(shape.algo for shape in shapes) or "none of those --algo / NCCL_ALGO allow"
    allowed = ", ".join(sorted(protos)) if protos is not None else "any"
    return ConfigError(
        f"no allowed algorithm/protocol for {op} on this cluster with NCCL {release.first[0]}.{release.first[1]}+ "
        f"(algorithms available: {names}; protocols allowed: {allowed})"
    )


def best_estimate(op: str, size_bytes: int, shapes: list[AlgoShape], v: CommView, protos: set[str] | None,
                  params: ModelParams, release: TunerRelease | None = None,
                  limits: tuple[int, int] = (1, MAX_CHANNELS), selection: str = "model",
                  repeat: int = 1, p2p_net_channels: int = 0) -> CollectiveEstimate:
    """The (algorithm, protocol) chosen among those allowed by `selection`, priced by the physical
    model; ConfigError if none is allowed. `repeat`: the call is one of that many back-to-back calls;
    `p2p_net_channels`: the channels a GPU's point-to-point traffic to other nodes runs on (cost.estimate).

    Both choose among the pairs NCCL `release` offers (tuner.enabled: NVLS, NVLS-tree and PAT from
    their releases, with Simple only). 'model': the fastest as priced (trees ranked by
    selection_time_s). 'nccl': what the tuner of NCCL `release` ranks first
    (simulator.collectives.tuner), whatever the physical model thinks of it (NCCL runs what its
    model ranks first), priced with the overlapped handshakes (simulator.collectives.cost).
    Point-to-point operations (alltoall, sendrecv) are not tuned by NCCL (LL for small per-channel
    sizes, Simple otherwise): the faster of the two as priced is taken in both."""
    rel = release or tuner_release(None)
    nvls_channels = release_nvls_channels(v, rel)
    pairs = [(shape, proto) for shape in shapes for proto in PROTOCOLS
             if (protos is None or proto in protos) and protocol_allowed(shape, proto, v)
             and (shape.algo == "direct" or enabled(op, shape.algo, proto, v, rel))]
    if selection == "model" or (shapes and shapes[0].algo == "direct"):
        if not pairs:
            raise _no_pair(op, shapes, protos, rel)
        candidates = [estimate(op, size_bytes, shape, proto, v, params, limits, overlap=selection == "nccl",
                               p2p_net_channels=p2p_net_channels,
                               nccl_tree_chunks=rel.tree_simple_chunks_shrink if selection == "nccl" else None,
                               nvls_channels=nvls_channels)
                      for shape, proto in pairs]
        if repeat > 1 and op in CHAINED_OPS:
            return min(candidates, key=lambda est: repeated_time_s(est, repeat))
        ring = {est.proto: est for est in candidates if est.algo == "ring"}
        gain = tree_gain(v, rel)
        return min(candidates, key=lambda est: selection_time_s(est, ring, v, gain))
    channels = tuner_channels(v, rel, limits)
    ranked = [(tuner_time_us(op, shape.algo, proto, size_bytes, v, rel, channels), shape, proto)
              for shape, proto in pairs]
    ranked = [item for item in ranked if math.isfinite(item[0])]
    if not ranked:
        raise _no_pair(op, shapes, protos, rel)
    _, shape, proto = min(ranked, key=lambda item: item[0])
    return estimate(op, size_bytes, shape, proto, v, params, limits, overlap=True, p2p_net_channels=p2p_net_channels,
                    nccl_tree_chunks=rel.tree_simple_chunks_shrink, nvls_channels=nvls_channels)


def release_nvls_channels(v: CommView, rel: TunerRelease) -> int | None:
    """The NVLS channels `rel` runs on this communicator where they differ from nccl_constants.NVLS_CHANNELS: one
    Blackwell NVLink domain (TunerRelease.blackwell_one_domain_nvls_channels); None elsewhere."""
    return rel.blackwell_one_domain_nvls_channels if v.arch == "blackwell" and not v.multi_node else None
