"""Published NCCL facts the collective model starts from (its prior).

Sources (all NVIDIA/nccl, Apache-2.0 / BSD; numbers only, no code):
- src/graph/tuning.cc: base latencies per (algorithm, protocol) and per-hop hardware latencies per
  link class (NVLink, PCIe, network), in microseconds; per-channel bandwidth caps of the LL128 and
  tree paths in GB/s. The values are not all of one release (checked against the tags v2.18.6,
  v2.19.3, v2.20.5, v2.21.5, v2.22.3, v2.23.4 and v2.27.7; docs/collectives.md, "NCCL's constants
  by release"): each comment below says which releases a value holds for. Moving the LL share and
  cap, or the hop latencies, to the newest release's values made the public validation worse, so
  these are the model's physical priors, not a reproduction of one release's tuner.
- src/include/device.h / collectives.h: NCCL_STEPS = 8 buffer slots per channel and connection;
  LL lines are 16 bytes of which 8 carry data (the other 8 are flags); LL128 lines are 128 bytes of
  which 120 carry data (NCCL_LL128_DATAELEMS 15 of 16 elements).
- Default buffer sizes (docs: NCCL_BUFFSIZE = 4 MiB for Simple; LL 256 KiB x 2 (lines carry half
  data); LL128 about 4.6 MiB (NCCL_LL128_ELEMS_PER_THREAD 120 x 640 threads x 8 B... rounded)).
These are the tuner's constants: clustersim uses them as per-step latencies of its simulated
chunk pipeline, not as a closed-form answer (see simulator.collectives.cost).
"""

from __future__ import annotations

from typing import Final

ALGORITHMS: Final = ("ring", "tree", "nvls", "nvls_tree", "collnet", "pat", "direct")
PROTOCOLS: Final = ("ll", "ll128", "simple")

NCCL_STEPS: Final = 8

# Fraction of the bytes on the wire that are payload, per protocol (LL: 8 data + 8 flag bytes per
# 16-byte line; LL128: 120 of 128 bytes; Simple: all).
WIRE_EFFICIENCY: Final = {"ll": 0.5, "ll128": 120.0 / 128.0, "simple": 1.0}

# Buffer per channel per connection, bytes of payload (NCCL_BUFFSIZE defaults): Simple 4 MiB,
# LL 256 KiB of payload (512 KiB of lines), LL128 ~ 4.5 MiB of payload.
BUFFER_BYTES: Final = {"ll": 256 * 1024, "ll128": 4_718_592 * 120 // 128, "simple": 4 * 1024**2}

# Base latency (us) per algorithm and protocol (tuning.cc baseLat). Ring: all of 2.18-2.27. Tree
# Simple 8.4 is the 2.23+ value (0 in 2.18-2.22). NVLS 23.0 is the 2.18 base (2.19+ put 0 here and
# 25 us in the NVLink hop of NVLS); collnet Simple 10.7 is 2.18's network hop of CollNet Direct.
BASE_LATENCY_US: Final = {
    "ring": {"ll": 6.6, "ll128": 14.0, "simple": 8.4},
    "tree": {"ll": 6.8, "ll128": 14.0, "simple": 8.4},
    "collnet": {"ll": 6.8, "ll128": 14.0, "simple": 10.7},
    "nvls": {"ll": 0.0, "ll128": 0.0, "simple": 23.0},
    "nvls_tree": {"ll": 0.0, "ll128": 0.0, "simple": 23.0},
    "pat": {"ll": 6.6, "ll128": 14.0, "simple": 8.4},
    "direct": {"ll": 6.6, "ll128": 14.0, "simple": 8.4},
}

# Per-hop latency (us) by link class and protocol (tuning.cc hwLat, the same in 2.18-2.27 where
# stated). One row per link class serves every algorithm: LL and Simple are the ring's values
# (NVLink 0.6 / 3.4, PCIe 1.0 / 5.7, network 2.7 / 14), LL128 on NVLink and PCIe is the tree's
# (1.25 and 1.9; the ring's are 1.9 and 2.5). NCCL's tree row differs: NVLink/PCIe Simple 4.0 in
# 2.23+ (28 in 2.19-2.22, 4 / 6 in 2.18), network LL 5.0 and LL128 8.5, network Simple 14 in 2.18
# and 2.23+ (28 in 2.19-2.22). Per-algorithm rows of 2.23+ made the public validation worse
# (median |error| 15.1% / 19.5% -> 15.5% / 28.1% at >= / < 1 MiB).
HOP_LATENCY_US: Final = {
    "nvlink": {"ll": 0.6, "ll128": 1.25, "simple": 3.4},
    "pcie": {"ll": 1.0, "ll128": 1.9, "simple": 5.7},
    "net": {"ll": 2.7, "ll128": 4.0, "simple": 14.0},
}

# LL is slower per byte than the wire efficiency alone says: one 8-byte store per line, polled by
# the receiver. tuning.cc caps LL bandwidth at llMaxBws (GB/s, whole communicator, by GPU family,
# 1 node): Volta 39.0, Ampere 87.7, Hopper 87.7 in 2.18-2.20 (141.0 from 2.21; Blackwell 282.0 in
# 2.27). The Hopper/Blackwell values of 2.21+ made the public validation worse at < 1 MiB (19.5% ->
# 19.7%), so the older cap is kept.
LL_MAX_GBPS: Final = {"volta": 39.0, "turing": 39.0, "ampere": 87.7, "ada": 87.7, "hopper": 87.7,
                      "blackwell": 87.7}

# LL128 per-channel cap (GB/s): perChMaxRingLL128Bws (Volta/Ampere 20.0, Hopper 36.7).
LL128_PER_CHANNEL_GBPS: Final = {"volta": 20.0, "turing": 20.0, "ampere": 20.0, "ada": 20.0,
                                 "hopper": 36.7, "blackwell": 36.7}

# LL128 is enabled by default only where NCCL has validated it: NVLink systems of Volta, Ampere,
# Hopper and Blackwell (tuning.cc protoEnable, LL128 "2" = auto).
LL128_ARCHS: Final = frozenset({"volta", "ampere", "hopper", "blackwell"})

# Per-channel bandwidth (GB/s) of the Simple protocol on trees, by GPU family and scale
# (1 node, 2 nodes, 4+ nodes): tuning.cc perChMaxTreeBws (Volta 26.5/18.5/10.0, Ampere
# 24.0/23.6/17.8, Hopper 38.7/41.4/36.0). It is what one channel (one SM's copy loop) moves, so it
# also sets how many channels a given bandwidth needs.
PER_CHANNEL_GBPS: Final = {
    "volta": (26.5, 18.5, 10.0),
    "turing": (26.5, 18.5, 10.0),
    "ampere": (24.0, 23.6, 17.8),
    "ada": (24.0, 23.6, 17.8),
    "hopper": (38.7, 41.4, 36.0),
    "blackwell": (38.7, 41.4, 36.0),
}

# NVLS heads at most (device.h NCCL_MAX_NVLS_ARITY).
NVLS_MAX_HEADS: Final = 32

# NVLS channels (CTAs) a communicator runs NVLS and NVLS-tree on (transport/nvls.cc: NVLS_NCHANNELS_SM90 16,
# NVLS_NCHANNELS_SM100 32; 2.27+ gives one NVLink domain 24, NVLS_NCHANNELS_SM100_NVL, but NVLS-tree spans
# several domains) and the chunk each of NVLS-tree's concurrent operations (channels x heads) moves a step:
# NCCL_NVLS_CHUNKSIZE 128 KiB, at most 64 KiB on 4 nodes or more (NCCL_NVLSTREE_MAX_CHUNKSIZE's default),
# halved while the operation is small against concurrentOps x chunk: (factor, cap) pairs of enqueue.cc's
# NVLS_TREE branch, unchanged 2.19-2.29.
NVLS_CHANNELS: Final = {"hopper": 16, "blackwell": 32}
NVLS_CHUNK_BYTES: Final = 128 * 1024
NVLS_TREE_MAX_CHUNK_BYTES_4_NODES: Final = 64 * 1024
NVLS_TREE_CHUNK_STEPS: Final = ((32, 256 * 1024), (16, 128 * 1024), (4, 64 * 1024), (1, 32 * 1024))
# NVLS in one NVLink domain: the chunk cut to 64, 32, 16 KiB below 64, 8, 2 x concurrentOps x chunk bytes
# (enqueue.cc's NCCL_ALGO_NVLS branch, unchanged 2.19-2.30), and the pipelined warp groups a channel runs
# (device/*.h, one-node NVLS): all_reduce scatter, reduce-and-multicast, gather (all_reduce.h); reduce_scatter
# scatter, reduce (reduce_scatter.h); all_gather multicast, gather (all_gather.h). One Blackwell domain's channel
# count comes from the release (TunerRelease.blackwell_one_domain_nvls_channels: 24 from 2.27).
NVLS_CHUNK_STEPS: Final = ((64, 64 * 1024), (8, 32 * 1024), (2, 16 * 1024))
NVLS_STAGES: Final = {"all_reduce": 3, "reduce_scatter": 2, "all_gather": 2}

# NCCL_MAX_NCHANNELS (device.h MAXCHANNELS = 32 up to 2.22, 64 later for NVLS/PAT).
MAX_CHANNELS: Final = 32

# Channels NCCL gives a small operation: it drops channels while the bytes are fewer than
# channels x threads x threshold (enqueue.cc; NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD = 8, 8, 64
# bytes per thread; threads per channel 512, 640 for LL128; the LL threshold of rings is
# multiplied by the rank count).
THREADS_PER_CHANNEL: Final = {"ll": 512, "ll128": 640, "simple": 512}
THREAD_THRESHOLD_BYTES: Final = {"ll": 8, "ll128": 8, "simple": 64}


# What the proxy thread's launch of one network operation (a send or a receive) costs, us, by the host's CPU:
# tuning.cc getNetOverhead (2.18 and later), 1.0 on Intel x86, 2.0 on AMD x86, 1.0 on any other CPU. NCCL's
# tuner adds it to every step of a multi-node ring (three times for Simple); the model charges it where the
# proxy launches the operations one after another: a point-to-point operation's peers on other nodes, each
# a send and a receive (P2P_NET_OPS_PER_PEER; simulator.collectives.params.prior_params).
NET_OVERHEAD_US: Final = {"intel": 1.0, "amd": 2.0, "arm": 1.0}
P2P_NET_OPS_PER_PEER: Final = 2
