"""NCCL's tuner: which algorithm and protocol a release would run (not how long it takes).

NCCL ranks every enabled (algorithm, protocol) pair by its own alpha-beta model (tuning.cc,
ncclTopoTuneModel and ncclTopoGetAlgoTime) and runs the fastest:

    time = latency(algo, proto) + size / algbw(algo, proto)

- algbw = the bus bandwidth its topology search found for that algorithm's graph (channels x
  bandwidth a channel), refined per protocol (LL's share and llMaxBws cap, LL128's share and
  per-channel caps, the tree's 0.92 and per-channel caps, PAT's and CollNet's factors), times the
  algorithm's bus -> algorithm ratio (ring n / steps, tree and CollNet 1/2, NVLS 5/6);
- latency = base + per-hop latencies over the algorithm's steps (ring: 2(n-1) steps for
  all_reduce, of which the network ones pay the network hop; tree: 2 (G-1) intra + 2 log2(N)
  network hops; NVLS, NVLS-tree, CollNet and PAT their own forms);
- a tree's bandwidth is scaled by the size's tree correction factor (one column per power of two
  from 64 B; from 512 MiB on, past the table, none: enqueue.cc / tuning.cc `logSize < 23`); a
  multi-node Simple ring all_reduce's latency by the "plateau" factor.
Every constant comes from the release's table (simulator.collectives.nccl_releases).

What NCCL's search would find is approximated from the cluster: a GPU's NVLink bandwidth as NCCL
rates its links (topo.h: 20.0 GB/s a link for Volta and Ampere, 20.6 Hopper, 40.1 Blackwell,
against 25 / 25 / 25 / 50 GB/s of line rate: 80-82%), PCIe at PCI_BW 12 GB/s of a Gen3 x16 link's
15.75 (76%), the NICs at their line rate, and a ring's channel count of two per NVLink's worth of
bandwidth (the search's one channel per link, duplicated), at most NCCL_MAX_NCHANNELS (32). The
host CPU (CommView.host_cpu) picks the multi-node llMaxBws row (multi_node_ll_row) and the network
overhead (nccl_constants.NET_OVERHEAD_US), as NCCL's own detection of the CPU does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from simulator.collectives.comm import CommView
from simulator.collectives.nccl_constants import NET_OVERHEAD_US
from simulator.collectives.nccl_releases import TunerRelease, family
from simulator.collectives.transports import plugin_net_latency_us
from simulator.core.errors import ConfigError

PROTO_INDEX = {"ll": 0, "ll128": 1, "simple": 2}
MAX_CHANNELS = 32  # device.h MAXCHANNELS (the ring and tree channel limit of every release here)
# NCCL's rating of one NVLink (topo.h SMxx_NVLINK_BW, GB/s) and the line rate of one link of that
# generation per direction (NVLink2/3/4: 25 GB/s, NVLink5: 50 GB/s; NVIDIA datasheets).
NCCL_NVLINK_GBPS = {"volta": 20.0, "turing": 20.0, "ampere": 20.0, "ada": 20.0, "hopper": 20.6,
                    "blackwell": 40.1}
NVLINK_LINE_GBPS = {"volta": 25.0, "turing": 25.0, "ampere": 25.0, "ada": 25.0, "hopper": 25.0,
                    "blackwell": 50.0}
PCI_BW_GBPS = 12.0  # topo.h PCI_BW: NCCL's rating of a PCIe Gen3 x16 link
PCIE3_X16_LINE_GBPS = 15.75


def env_channels(env: Mapping[str, str], name: str) -> int | None:
    """A channel count an NCCL variable sets (None when unset); ConfigError naming it unless a whole number >= 1."""
    if name not in env:
        return None
    text = env[name]
    if not text.strip().isdigit() or int(text) < 1:
        raise ConfigError(f"{name}: expected a whole number of channels >= 1, got {text!r}")
    return int(text)


def channel_limits(env: Mapping[str, str] | None) -> tuple[int, int]:
    """(min, max) channels from NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS (and their 2.17+ names
    NCCL_MIN_CTAS / NCCL_MAX_CTAS); NCCL clamps them to 1..MAXCHANNELS."""
    env = env or {}
    limits = [1, MAX_CHANNELS]
    for index, names in enumerate((("NCCL_MIN_NCHANNELS", "NCCL_MIN_CTAS"), ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS"))):
        for name in names:
            count = env_channels(env, name)
            if count is not None:
                limits[index] = min(MAX_CHANNELS, count)
    low, high = limits
    return min(low, high), high


def _log2i(n: int) -> int:
    return int(math.log2(n)) if n > 0 else -1


def nccl_intra_gbps(v: CommView) -> float:
    """A GPU's intra-node bandwidth as NCCL's topology rates it (see the module docstring)."""
    if v.intra_kind == "nvlink":
        return v.intra_Bps / 1e9 * NCCL_NVLINK_GBPS.get(v.arch, 20.0) / NVLINK_LINE_GBPS.get(v.arch, 25.0)
    return v.intra_Bps / 1e9 * PCI_BW_GBPS / PCIE3_X16_LINE_GBPS


def bus_gbps(algo: str, op: str, v: CommView, rel: TunerRelease) -> float:
    """The bus bandwidth NCCL's search gives an algorithm's graph (channels x a channel's bandwidth)."""
    intra = nccl_intra_gbps(v)
    net = v.net_Bps / 1e9 if v.multi_node and v.net_Bps > 0 else math.inf
    if algo == "nvls":
        if op != "all_reduce" and rel.nvls_gather_bw_2_27:
            bus = min(intra * (v.ranks_per_node - 1) / v.ranks_per_node, 0.9 * net)
        else:
            bus = min(intra, net)
    elif algo == "nvls_tree":
        bus = min(intra, net if v.n_nodes <= 2 else net / 2)
    else:
        bus = min(intra, net)
    if rel.ampere_bus_cap_gbps is not None and family(rel, v.arch) == "ampere":
        bus = min(bus, rel.ampere_bus_cap_gbps)
    return max(bus, 1e-6)  # a link a fault took down still ranks (the physical model prices it)


def tuner_channels(v: CommView, rel: TunerRelease, limits: tuple[int, int]) -> int:
    """The ring's channel count: two per NVLink's (or PCIe link's) worth of bus bandwidth, within limits."""
    link = NCCL_NVLINK_GBPS.get(v.arch, 20.0) if v.intra_kind == "nvlink" else PCI_BW_GBPS
    wanted = 2 * max(1, math.ceil(bus_gbps("ring", "all_reduce", v, rel) / link - 1e-9))
    low, high = limits
    return max(low, min(high, wanted))


def multi_node_ll_row(v: CommView) -> str:
    """The llMaxBws row NCCL caps LL with across nodes: the host CPU's vendor picks it, AMD hosts the second row
    (the release table's "ampere" row: 22.5 / 19.0 GB/s on 2 / 4+ nodes), every other host the first ("volta":
    39.0 / 20.4). tuning.cc ncclTopoTuneModel, `index1`, the same in 2.8-2.27 (2.27 adds mixed-vendor hosts to
    AMD's row, which CommView does not describe)."""
    return "ampere" if v.host_cpu == "amd" else "volta"


def _algbw_gbps(op: str, algo: str, proto: str, v: CommView, rel: TunerRelease, channels: int) -> float:
    n, nodes, ppn = v.n_ranks, v.n_nodes, v.n_ranks / v.n_nodes
    scale = 0 if nodes == 1 else (1 if nodes == 2 else 2)
    fam = family(rel, v.arch)
    ll_max = rel.ll_max_gbps[fam][0] if nodes == 1 else rel.ll_max_gbps[multi_node_ll_row(v)][scale]
    bus = bus_gbps(algo, op, v, rel)
    if algo == "ring" and proto == "ll":
        share = rel.ring_ll_share
        if share is None:
            share = 0.25 if (nodes > 1 or op in ("all_reduce", "reduce")) else 1.0 / 3.0
        bus = min(ll_max, bus * share)
    if algo == "ring" and proto == "ll128":
        bus = min(bus * (rel.ring_ll128_one_ppn if ppn < 2 else 0.92),
                  channels * rel.per_channel_ring_ll128_gbps[fam][scale])
    if algo == "tree":
        bus = min(bus * 0.92, channels * rel.per_channel_tree_gbps[fam][scale])
        if proto == "ll":
            bus = min(bus / 3.8, ll_max)
        if proto == "ll128":
            bus = min(bus * (7.0 / 9.0 if nodes == 1 else rel.tree_ll128_multi_node),
                      channels * rel.per_channel_tree_ll128_gbps[fam][scale])
    if algo == "pat":
        bus *= rel.pat_share or 0.0
    if algo == "collnet":
        # CollNet Direct wants a NIC per GPU; fewer NICs cost part of the bandwidth (GPU/NIC ratio)
        factor = ppn / max(1, v.nics_per_node)
        bus /= max(1.0, factor - (factor - 1) / 2)
        if fam in ("hopper", "blackwell"):
            bus *= 0.85
    if op in ("all_gather", "reduce_scatter") and algo != "ring" and rel.non_ring_gather_no_ratio:
        return bus
    if algo == "ring":
        steps = 2 * (n - 1) if op == "all_reduce" else (n - 1 if op in ("all_gather", "reduce_scatter") else n)
        return bus * n / steps
    if algo == "nvls_tree" and rel.nvls_tree_ratio_2_18:
        return bus * 0.70 * nodes / (2 * (nodes - 1))
    if algo in ("nvls", "nvls_tree"):
        return bus * 5.0 / 6.0
    return bus * 0.5


def _latency_us(op: str, algo: str, proto: str, v: CommView, rel: TunerRelease) -> float:
    n, nodes, ppn = v.n_ranks, v.n_nodes, v.ranks_per_node
    p = PROTO_INDEX[proto]
    intra_hw = "nvlink" if v.intra_kind == "nvlink" else "pcie"
    if algo == "pat":
        net_lat = rel.hop_lat_us["net"]["tree"][p]
        return 8.0 + _log2i(nodes) * net_lat / 3.5 + n * 2.8
    base = rel.base_lat_us[algo][p]
    intra = rel.hop_lat_us[intra_hw][algo][p]
    inter = rel.hop_lat_us["net"]["tree" if rel.ppn1_tree_net_lat and ppn == 1 else algo][p]
    reported = plugin_net_latency_us(v.transport, v.arch) if nodes > 1 else 0.0
    if reported and rel.plugin_latency == "replace":
        inter = reported
    elif rel.plugin_latency == "add":
        inter += reported * (2 if proto == "simple" else 1)  # tuning.cc: "Also add the flush extra latency"
    if nodes > 1 and proto == "ll":
        intra *= rel.ll_intra_multi_node
    if algo == "ring":
        if op in ("broadcast", "reduce"):
            return base + rel.hop_lat_us["net" if nodes > 1 else intra_hw]["ring"][p]
        steps = 2 * (n - 1) if op == "all_reduce" else n - 1
        if nodes > 1 and rel.ring_net_overhead:
            intra = max(intra, NET_OVERHEAD_US[v.host_cpu] * (3 if proto == "simple" else 1))
        if nodes == 1:
            inter_steps = 0
        elif op == "all_reduce":
            inter_steps = 2 * nodes if rel.ring_all_reduce_inter_steps_2n else 2 * (nodes - 1)
        else:
            inter_steps = nodes - 1
        return base + (steps - inter_steps) * intra + inter_steps * inter
    if algo == "tree":
        return base + 2 * ((ppn - 1) * intra + _log2i(nodes) * inter)
    if algo == "collnet":
        return base + 2 * (min(1, ppn - 1) * intra + (ppn - 1) * rel.collnet_arity_us) + inter
    if algo == "nvls":
        return base + intra + (inter if nodes > 1 else 0.0)
    # nvls_tree
    if rel.nvls_tree_ratio_2_18:
        return base + 2 * (nodes - 1) * inter
    return base + intra + 2 * _log2i(nodes) * inter


def enabled(op: str, algo: str, proto: str, v: CommView, rel: TunerRelease) -> bool:
    """Whether the release offers this pair at all (the protocol rules of the cluster are the cost
    model's protocol_allowed; this adds what depends on the release)."""
    if algo == "nvls":
        return rel.nvls and (op == "all_reduce" or rel.nvls_gather) and proto == "simple"
    if algo == "nvls_tree":
        return rel.nvls_tree and proto == "simple"
    if algo == "pat":
        return rel.pat_share is not None and proto == "simple"
    if algo == "collnet":
        return proto == "simple"
    # tuning.cc: LL128 across nodes needs the NIC within PXB of the GPU, or within PXN on Hopper and later (graph
    # typeInter). A NIC on the CPU's root port is PHB, beyond both: off. Without GPUDirect RDMA NCCL routes the
    # network traffic through the GPU's CPU (paths.cc: PHB): off. Behind a Grace CPU over NVLink-C2C the path is
    # PHB before 2.27 (off) and P2C from 2.27 (on, NCCL_LL128_C2C's default)
    if proto != "ll128" or not v.multi_node:
        return True
    if not v.gpudirect_rdma or v.gpu_nic_path == "phb":
        return False
    return v.gpu_nic_path != "c2c" or rel.ll128_c2c


def tuner_time_us(op: str, algo: str, proto: str, size_bytes: int, v: CommView, rel: TunerRelease,
                  channels: int) -> float:
    """NCCL's estimate of the pair's time (us): latency + size / algbw, with the tree correction and
    the ring plateau of the release (ncclTopoGetAlgoTime)."""
    bw = _algbw_gbps(op, algo, proto, v, rel, channels)
    lat = _latency_us(op, algo, proto, v, rel)
    column = max(0, _log2i(size_bytes >> 6))
    if algo == "tree" and column < len(rel.tree_correction[0]) and (
            op == "all_reduce" or not rel.tree_correction_all_reduce_only):
        bw *= rel.tree_correction[PROTO_INDEX[proto]][column]
    if algo == "ring" and proto == "simple" and v.multi_node and op == "all_reduce":
        fam = family(rel, v.arch)
        if rel.plateau == "per_channel":
            if size_bytes / (channels * v.n_ranks) >= 64:
                lat *= 1.9 if fam == "volta" else 1.4
        elif size_bytes >= v.n_ranks / 16.0 * 65536:
            lat *= 1.5 if rel.plateau == "size_hopper" and fam in ("hopper", "blackwell") else 1.9
    if bw <= 0.0:
        return math.inf
    return lat + size_bytes / (1000.0 * bw)
