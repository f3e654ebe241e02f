"""Choosing the algorithm and protocol as NCCL does: by its tuner's ranking, unless pinned.

The ranking is the tuner of the NCCL release in use (simulator.collectives.tuner, with the constants
of simulator.collectives.nccl_releases); the chosen pair is then priced by the physical model
(simulator.collectives.cost).

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
from simulator.collectives.cost import CollectiveEstimate, estimate, protocol_allowed
from simulator.collectives.nccl_constants import PROTOCOLS
from simulator.collectives.nccl_releases import TunerRelease, tuner_release
from simulator.collectives.params import ModelParams
from simulator.collectives.tuner import MAX_CHANNELS, enabled, tuner_channels, tuner_time_us
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


def _no_pair(op: str, shapes: list[AlgoShape], protos: set[str] | None, release: TunerRelease) -> ConfigError:
    names = ", ".join(shape.algo for shape in shapes) or "none of those --algo / NCCL_ALGO allow"
    allowed = ", ".join(sorted(protos)) if protos is not None else "any"
    return ConfigError(
        f"no allowed algorithm/protocol for {op} on this cluster with NCCL {release.first[0]}.{release.first[1]}+ "
        f"(algorithms available: {names}; protocols allowed: {allowed})"
    )


def best_estimate(op: str, size_bytes: int, shapes: list[AlgoShape], v: CommView, protos: set[str] | None,
                  params: ModelParams, release: TunerRelease | None = None,
                  limits: tuple[int, int] = (1, MAX_CHANNELS)) -> CollectiveEstimate:
    """The (algorithm, protocol) NCCL `release` would pick among those allowed, priced by the physical
    model; ConfigError if none is allowed.

    The choice is the release's tuner's (simulator.collectives.tuner), whatever the physical model
    thinks of it: NCCL runs what its model ranks first. Point-to-point operations (alltoall,
    sendrecv) are not tuned by NCCL (LL for small per-channel sizes, Simple otherwise): the faster
    of the two as priced is taken."""
    rel = release or tuner_release(None)
    pairs = [(shape, proto) for shape in shapes for proto in PROTOCOLS
             if (protos is None or proto in protos) and protocol_allowed(shape, proto, v)]
    if shapes and shapes[0].algo == "direct":
        if not pairs:
            raise _no_pair(op, shapes, protos, rel)
        return min((estimate(op, size_bytes, shape, proto, v, params, limits) for shape, proto in pairs),
                   key=lambda est: est.time_s)
    channels = tuner_channels(v, rel, limits)
    ranked = [(tuner_time_us(op, shape.algo, proto, size_bytes, v, rel, channels), shape, proto)
              for shape, proto in pairs if enabled(op, shape.algo, proto, v, rel)]
    ranked = [item for item in ranked if math.isfinite(item[0])]
    if not ranked:
        raise _no_pair(op, shapes, protos, rel)
    _, shape, proto = min(ranked, key=lambda item: item[0])
    return estimate(op, size_bytes, shape, proto, v, params, limits)
