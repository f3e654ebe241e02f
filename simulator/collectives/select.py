"""Choosing the algorithm and protocol as NCCL does: by its tuner's ranking, unless pinned.

Pins follow NCCL's environment: NCCL_ALGO and NCCL_PROTO take comma-separated lists (case does
not matter; a leading '^' excludes the listed ones), NCCL_NVLS_ENABLE=0 turns NVLink SHARP off,
NCCL_COLLNET_ENABLE=0 turns SHARP off. The CLI's --algo/--proto pin one each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from simulator.collectives.algorithms import AlgoShape, shapes_for
from simulator.collectives.comm import CommView
from simulator.collectives.cost import CollectiveEstimate, estimate, protocol_allowed
from simulator.collectives.nccl_constants import PROTOCOLS
from simulator.collectives.params import ModelParams
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


def view_for_env(v: CommView, env: Mapping[str, str] | None) -> CommView:
    """Apply NCCL switches that change what hardware features NCCL may use."""
    env = env or {}
    if env.get("NCCL_NVLS_ENABLE") == "0" and v.nvls:
        v = replace(v, nvls=False)
    if env.get("NCCL_COLLNET_ENABLE") == "0" and v.sharp:
        v = replace(v, sharp=False)
    return v


def candidate_shapes(op: str, v: CommView, algos: set[str] | None) -> list[AlgoShape]:
    """The algorithm shapes NCCL could run for op on v, filtered by the allowed set."""
    shapes = shapes_for(op, v)
    if algos is None or op in ("alltoall", "sendrecv"):
        return shapes
    return [shape for shape in shapes if shape.algo in algos]


def selection_time_s(est: CollectiveEstimate, ring: dict[str, CollectiveEstimate], v: CommView) -> float:
    """The time NCCL's tuner ranks a candidate by. It models a tree's bandwidth as 0.9 x half the
    channels' bus bandwidth, a ring's as n / 2(n-1) of it (tuning.cc), so for the same channels it
    never credits a tree with more bandwidth than 0.9 (n-1)/n of the ring's: trees win on latency,
    rings on bandwidth, whatever a tree could do on two nodes. The prediction itself keeps the
    tree's own time; only the choice follows the tuner."""
    if est.algo != "tree" or est.proto not in ring:
        return est.time_s
    ring_est = ring[est.proto]
    ring_bw_s = ring_est.size_bytes * max(spb for _, spb in ring_est.demand_s_per_byte)
    credited = max(est.bandwidth_s, ring_bw_s / (0.9 * (v.n_ranks - 1) / v.n_ranks))
    return est.latency_s + est.fill_s + credited


def best_estimate(op: str, size_bytes: int, shapes: list[AlgoShape], v: CommView,
                  protos: set[str] | None, params: ModelParams) -> CollectiveEstimate:
    """The (algorithm, protocol) NCCL would pick among those allowed; ConfigError if none is."""
    candidates = [
        estimate(op, size_bytes, shape, proto, v, params)
        for shape in shapes
        for proto in PROTOCOLS
        if (protos is None or proto in protos) and protocol_allowed(shape, proto, v)
    ]
    if not candidates:
        names = ", ".join(shape.algo for shape in shapes) or "none of those --algo / NCCL_ALGO allow"
        raise ConfigError(
            f"no allowed algorithm/protocol for {op} on this cluster (algorithms available: {names}; "
            f"protocols allowed: {', '.join(sorted(protos)) if protos is not None else 'any'})"
        )
    ring = {est.proto: est for est in candidates if est.algo == "ring"}
    return min(candidates, key=lambda est: selection_time_s(est, ring, v))
