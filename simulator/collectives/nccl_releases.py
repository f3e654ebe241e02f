"""NCCL's tuner constants per release: the data `simulator.collectives.tuner` decides with.

Each `TunerRelease` holds what src/graph/tuning.cc of NVIDIA/nccl (Apache-2.0/BSD; numbers only,
no code) uses to rank (algorithm, protocol) pairs, from the first release in which the values hold
until the next entry of `_CHANGES`. Checked against the tags v2.8.4, v2.10.3, v2.12.12, v2.14.3,
v2.15.5, v2.17.1, v2.18.6, v2.19.3, v2.20.5, v2.21.5, v2.22.3, v2.23.4, v2.24.3, v2.25.1, v2.26.5
and v2.27.7. Latencies in microseconds, bandwidths in GB/s. Algorithm keys are clustersim's
(collnet = CollNet Direct); protocol triples are (LL, LL128, Simple).

These constants decide only *which* algorithm, protocol and channel limits NCCL would run; the time
of that choice is priced by the physical model (simulator.collectives.cost), whose own constants
(simulator.collectives.nccl_constants) are not of one release.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Final

from simulator.core.errors import ConfigError

Triple = tuple[float, float, float]

# Trees are modelled slower than they run for mid sizes; tuning.cc scales a tree's bandwidth by this
# table, one column per power of two of the size from 64 B (log2(size / 64)) up to 256 MiB; from 512 MiB
# on (log2(size / 64) >= 23) it leaves the bandwidth as it is.
_TREE_CORRECTION_2_8: Final = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8, .9, .9, .92, .92),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
)
# 2.10+ changed the LL128 row only.
_TREE_CORRECTION_2_10: Final = (
    _TREE_CORRECTION_2_8[0],
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    _TREE_CORRECTION_2_8[2],
)


@dataclass(frozen=True)
class TunerRelease:
    """The tuner of NCCL releases `first` up to the next entry (see the module docstring)."""

    first: tuple[int, int]
    base_lat_us: dict[str, Triple]
    # per-hop latency by link class ("nvlink", "pcie", "net") and algorithm
    hop_lat_us: dict[str, dict[str, Triple]]
    # llMaxBws (N1 / N2 / N4+ nodes): single node by GPU family; multi-node by CPU vendor
    # (Intel rows are the "volta" row, AMD the "ampere" row)
    ll_max_gbps: dict[str, Triple]
    per_channel_tree_gbps: dict[str, Triple]
    per_channel_ring_ll128_gbps: dict[str, Triple]
    per_channel_tree_ll128_gbps: dict[str, Triple]
    # GPU families the release knows; a newer GPU is tuned as the newest family it knows
    families: tuple[str, ...] = ("volta", "ampere")
    ring_ll_share: float | None = None  # None: 1/4 multi-node, all_reduce or reduce, else 1/3
    ring_ll128_one_ppn: float = 0.7  # ring LL128 share at one GPU per node (0.92 otherwise)
    tree_ll128_multi_node: float = 120.0 / 128.0
    ampere_bus_cap_gbps: float | None = None  # 2.8-2.14: every A100 algorithm capped at 235 GB/s
    tree_correction: tuple[tuple[float, ...], ...] = _TREE_CORRECTION_2_10
    # ring plateau: "size" (bytes >= ranks/16 x 64 KiB, x1.9), "size_hopper" (x1.5 on Hopper, as
    # 2.17), "per_channel" (bytes per channel and rank >= 64: x1.9 before Ampere, else x1.4)
    plateau: str = "per_channel"
    ring_all_reduce_inter_steps_2n: bool = True  # 2N network steps (2.12-2.22) or 2(N-1)
    # the proxy's launch cost of a network operation charged to every intra-node step of a multi-node ring (x3 for
    # Simple), at the host CPU's figure (nccl_constants.NET_OVERHEAD_US)
    ring_net_overhead: bool = False
    nvls: bool = False  # NVLS all_reduce on one NVLink domain
    nvls_tree: bool = False
    nvls_gather: bool = False  # NVLS all_gather / reduce_scatter
    # NVLS-tree as 2.18 models it: algbw 0.70 N / 2(N-1) of its bus bandwidth, latency base + 2(N-1) network hops
    nvls_tree_ratio_2_18: bool = False
    pat_share: float | None = None  # PAT (one GPU per node, all_gather / reduce_scatter)
    ppn1_tree_net_lat: bool = False  # at one GPU per node every algorithm pays the tree's network hop
    non_ring_gather_no_ratio: bool = False  # no bus -> algbw ratio for non-ring all_gather / reduce_scatter
    nvls_gather_bw_2_27: bool = False  # NVLS all_gather bus = min(intra (G-1)/G, 0.9 inter)
    # LL128 across nodes when a GPU reaches its NIC through its CPU over NVLink-C2C (Grace: GH200/GB200/GB300):
    # 2.27 rates that path P2C, within PXN (LL128 on); before it was PHB, beyond PXN (LL128 off)
    ll128_c2c: bool = False
    # NVLS channels on one Blackwell NVLink domain (transport/nvls.cc): NVLS_NCHANNELS_SM100, 32, from 2.25;
    # NVLS_NCHANNELS_SM100_NVL, 24, from 2.27 (several domains keep 32)
    blackwell_one_domain_nvls_channels: int = 32
    collnet_arity_us: float = 0.5
    ll_intra_multi_node: float = 1.8  # LL intra-node hop latency x this under a multi-node communicator
    tree_correction_all_reduce_only: bool = False  # 2.23+: the tree correction for all_reduce only (enqueue.cc)
    # a tree all_reduce's Simple chunks halved for small operations (enqueue.cc, 2.4-2.19; gone from 2.20)
    tree_simple_chunks_shrink: bool = True
    # how the tuner takes the network plugin's reported latency (ncclNetProperties latency: graph latencyInter,
    # tuning.cc): not at all (up to 2.11), in place of the network hop latency when non-zero (2.12-2.17), or added to
    # it, and once more for Simple's flush (2.18+)
    plugin_latency: str = "none"


_BASE_2_8 = TunerRelease(
    first=(2, 8),
    base_lat_us={"tree": (4.4, 4.4, 0.0), "ring": (3.6, 10.0, 8.4), "collnet": (4.4, 4.4, 0.0),
                 "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0)},
    hop_lat_us={
        "nvlink": {"tree": (.52, 1.25, 28.0), "ring": (.47, 1.9, 3.4), "collnet": (.5, 1.2, 4.0),
                   "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0)},
        "pcie": {"tree": (1.0, 1.9, 28.0), "ring": (1.0, 2.5, 5.7), "collnet": (1.0, 1.9, 5.5),
                 "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0)},
        "net": {"tree": (5.0, 8.5, 28.0), "ring": (2.7, 4.0, 9.6), "collnet": (5.0, 5.0, 10.7),
                "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0)},
    },
    ll_max_gbps={"volta": (39.0, 39.0, 20.4), "ampere": (87.7, 22.5, 19.0)},
    per_channel_tree_gbps={"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 22.5, 16.0)},
    # 2.8-2.9: one LL128 cap per collective (all_reduce 16.9 GB/s a channel), not per family
    per_channel_ring_ll128_gbps={"volta": (16.9, 16.9, 16.9), "ampere": (16.9, 16.9, 16.9)},
    per_channel_tree_ll128_gbps={"volta": (16.9, 16.9, 16.9), "ampere": (16.9, 16.9, 16.9)},
    tree_ll128_multi_node=0.915,
    ampere_bus_cap_gbps=235.0,
    tree_correction=_TREE_CORRECTION_2_8,
    plateau="size",
    ring_all_reduce_inter_steps_2n=False,
)

_LL128_20: Final = {"volta": (20.0, 20.0, 20.0), "ampere": (20.0, 20.0, 20.0)}
_HOPPER_2_18: Final = {
    "ll_max_gbps": (87.7, 22.5, 19.0), "per_channel_tree_gbps": (38.7, 41.4, 36.0),
    "per_channel_ring_ll128_gbps": (36.7, 36.7, 36.7), "per_channel_tree_ll128_gbps": (36.7, 36.7, 29.0)}
_NVLINK_2_19: Final = {"tree": (.6, 1.25, 28.0), "ring": (.6, 1.9, 3.4), "collnet": (0.0, 0.0, 3.7),
                       "nvls": (0.0, 0.0, 23.0), "nvls_tree": (0.0, 0.0, 23.0)}
_NET_2_19: Final = {"tree": (5.0, 8.5, 28.0), "ring": (2.7, 4.0, 14.0), "collnet": (0.0, 0.0, 31.0),
                    "nvls": (0.0, 0.0, 18.0), "nvls_tree": (0.0, 0.0, 14.0)}


def _with(release: TunerRelease, first: tuple[int, int], **changes: Any) -> TunerRelease:
    return replace(release, first=first, **changes)


def _hopper(release: TunerRelease, values: dict[str, Triple]) -> dict[str, Any]:
    """The per-family tables of `release` with a Hopper row added."""
    return {key: {**getattr(release, key), "hopper": row} for key, row in values.items()}


def _blackwell(release: TunerRelease) -> dict[str, Any]:
    """2.25+: Blackwell rows, twice Hopper's (tuning.cc writes them as 2 x the Hopper values)."""
    keys = ("ll_max_gbps", "per_channel_tree_gbps", "per_channel_ring_ll128_gbps", "per_channel_tree_ll128_gbps")
    doubled = {key: {**getattr(release, key), "blackwell": tuple(2 * x for x in getattr(release, key)["hopper"])}
               for key in keys}
    return {**doubled, "families": (*release.families, "blackwell")}


def _build() -> tuple[TunerRelease, ...]:
    r28 = _BASE_2_8
    r210 = _with(r28, (2, 10), per_channel_tree_gbps={"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8)},
                 per_channel_ring_ll128_gbps=_LL128_20, per_channel_tree_ll128_gbps=_LL128_20,
                 tree_correction=_TREE_CORRECTION_2_10)
    r212 = _with(r210, (2, 12), plugin_latency="replace", ring_all_reduce_inter_steps_2n=True,
                 hop_lat_us={**r210.hop_lat_us, "net": {**r210.hop_lat_us["net"], "ring": (2.7, 4.0, 28.0)}})
    r214 = _with(r212, (2, 14), hop_lat_us=r210.hop_lat_us)
    r215 = _with(r214, (2, 15), ampere_bus_cap_gbps=None, families=("volta", "ampere", "hopper"),
                 **_hopper(r214, {"ll_max_gbps": (87.7, 22.5, 19.0), "per_channel_tree_gbps": (24.0, 23.6, 17.8),
                                  "per_channel_ring_ll128_gbps": (20.0, 20.0, 20.0),
                                  "per_channel_tree_ll128_gbps": (20.0, 20.0, 20.0)}))
    r217 = _with(r215, (2, 17), nvls=True, plateau="size_hopper",
                 base_lat_us={**r215.base_lat_us, "nvls": (0.0, 0.0, 40.0)},
                 **_hopper(r215, {"per_channel_tree_gbps": (38.7, 41.4, 33.0),
                                  "per_channel_ring_ll128_gbps": (36.7, 36.7, 36.7),
                                  "per_channel_tree_ll128_gbps": (36.7, 36.7, 36.7)}))
    r218 = _with(r217, (2, 18), plugin_latency="add", nvls_tree=True, nvls_tree_ratio_2_18=True, plateau="per_channel",
                 ring_net_overhead=True, ll_intra_multi_node=1.0,
                 base_lat_us={"tree": (6.8, 14.0, 0.0), "ring": (6.6, 14.0, 8.4), "collnet": (6.8, 14.0, 0.0),
                              "nvls": (0.0, 0.0, 23.0), "nvls_tree": (0.0, 0.0, 23.0)},
                 hop_lat_us={
                     "nvlink": {"tree": (.6, 1.25, 4.0), "ring": (.6, 1.9, 3.4), "collnet": (0.0, 0.0, 8.0),
                                "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0)},
                     "pcie": {"tree": (1.0, 1.9, 6.0), "ring": (1.0, 2.5, 5.7), "collnet": (0.0, 0.0, 8.0),
                              "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0)},
                     "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "collnet": (0.0, 0.0, 10.7),
                             "nvls": (0.0, 0.0, 18.0), "nvls_tree": (0.0, 0.0, 19.0)}},
                 **_hopper(r217, _HOPPER_2_18))
    r219 = _with(r218, (2, 19), nvls_gather=True, nvls_tree_ratio_2_18=False, collnet_arity_us=0.4,
                 base_lat_us={**r218.base_lat_us, "collnet": (0.0, 0.0, 0.0), "nvls": (0.0, 0.0, 0.0),
                              "nvls_tree": (0.0, 0.0, 0.0)},
                 hop_lat_us={"nvlink": _NVLINK_2_19,
                             "pcie": {**r218.hop_lat_us["pcie"], "tree": (1.0, 1.9, 28.0),
                                      "collnet": (0.0, 0.0, 3.7)},
                             "net": _NET_2_19})
    r220 = _with(r219, (2, 20), tree_simple_chunks_shrink=False)
    r221 = _with(r220, (2, 21), ring_ll_share=0.5,
                 hop_lat_us={**r220.hop_lat_us, "nvlink": {**_NVLINK_2_19, "nvls": (0.0, 0.0, 25.0),
                                                           "nvls_tree": (0.0, 0.0, 25.0)}},
                 **_hopper(r220, {"ll_max_gbps": (141.0, 45.0, 35.0)}))
    r223 = _with(r221, (2, 23), ring_ll128_one_ppn=0.92, pat_share=0.85, ppn1_tree_net_lat=True,
                 non_ring_gather_no_ratio=True, tree_correction_all_reduce_only=True,
                 ring_all_reduce_inter_steps_2n=False,
                 base_lat_us={**r221.base_lat_us, "tree": (6.8, 14.0, 8.4)},
                 hop_lat_us={"nvlink": {**r221.hop_lat_us["nvlink"], "tree": (.6, 1.25, 4.0)},
                             "pcie": {**r221.hop_lat_us["pcie"], "tree": (1.0, 1.9, 4.0)},
                             "net": {**r221.hop_lat_us["net"], "tree": (5.0, 8.5, 14.0)}})
    r224 = _with(r223, (2, 24), pat_share=0.75)
    r225 = _with(r224, (2, 25), **_blackwell(r224))
    r227 = _with(r225, (2, 27), nvls_gather_bw_2_27=True, ll128_c2c=True, blackwell_one_domain_nvls_channels=24)
    return (r28, r210, r212, r214, r215, r217, r218, r219, r220, r221, r223, r224, r225, r227)


RELEASES: Final = _build()
NCCL_VERSION_HELP: Final = ("NCCL release (e.g. 2.27, 2.18.6): the algorithms it offers, and with --selection "
                            "nccl the tuner that chooses the algorithm and protocol; "
                            "default: the newest of the calibration profile's logs, else the newest modelled "
                            "(2.27).")
NEWEST: Final = RELEASES[-1].first
_RELEASE_TEXT = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+][0-9A-Za-z.+-]*)?")


def parse_release(text: str | None) -> tuple[int, int] | None:
    """(major, minor) of a version as manifests and logs state it ('2.8.4', '2.26.2+cuda12.8',
    '2.8.4-1 (CUDA 11.2.2)'); None for 'unknown', 'not stated' or nothing."""
    if not text:
        return None
    match = _RELEASE_TEXT.match(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def checked_release(text: str) -> tuple[int, int]:
    """(major, minor) of a user-given release; ValueError unless it reads as 2.x[.y]."""
    release = parse_release(text)
    if release is None or release[0] != 2:
        raise ValueError(f"expected an NCCL 2.x release such as 2.27 or 2.18.6, got {text!r}")
    return release


def release_option(text: str | None, option: str = "--nccl-version") -> tuple[int, int] | None:
    """A user-given release (a CLI option); ConfigError naming `option` unless it reads as 2.x[.y]."""
    if text is None:
        return None
    try:
        return checked_release(text)
    except ValueError as exc:
        raise ConfigError(f"{option}: {exc}") from None


def tuner_release(release: tuple[int, int] | None) -> TunerRelease:
    """The tuner table of an NCCL release: the newest entry at or before it; the newest table when
    the release is unknown (None); releases before 2.8 are tuned as 2.8 (the oldest table kept)."""
    if release is None:
        return RELEASES[-1]
    chosen = RELEASES[0]
    for entry in RELEASES:
        if entry.first <= release:
            chosen = entry
    return chosen


def family(release: TunerRelease, arch: str) -> str:
    """The GPU family whose row `release` uses for `arch`: Turing and Ada are tuned as Volta and
    Ampere by compute capability (7.5 and 8.9 fall in those rows), a family newer than the release
    knows as the newest it knows."""
    known = {"volta": "volta", "turing": "volta", "ampere": "ampere", "ada": "ampere",
             "hopper": "hopper", "blackwell": "blackwell"}.get(arch, "ampere")
    order = ("volta", "ampere", "hopper", "blackwell")
    while known not in release.families:
        known = order[order.index(known) - 1]
    return known
