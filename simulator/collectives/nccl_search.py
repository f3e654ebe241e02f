"""What NCCL's topology search gives a communicator across nodes: channels, NVLS heads and the NICs
they reach (facts from NVIDIA/nccl src/graph/search.cc, connect.cc and init.cc, v2.18-v2.28; no code).

A node here is what NCCL's graph search sees as one system: a server, or a whole multi-node NVLink
domain (MNNVL, GB200/GB300 NVL72: init.cc fuses the topology of every rank of the NVLink clique,
topo.cc ncclTopoGetSystem, so nNodes counts racks and localRanks is 72).

- Ring and tree graphs (search.cc ncclTopoCompute): a channel enters the node through one NIC,
  visits every GPU of the node over NVLink, and leaves through one NIC; the search charges the
  channel's speed on every GPU's NVLink and on its NIC (ncclTopoSearchRecNet takes `bw` off the
  NIC), tries speeds from the top of its inter-node table down (sm90/sm100: 48, 45, 42, 40, 30,
  24, ... GB/s; older GPUs 48, 30, 28, 24, ...) while the next is more than 0.49 of the best found,
  keeps the most channels x speed, and stops when that reaches a GPU's NVLink bandwidth. At most
  MAXCHANNELS/2 = 32 ring channels (init.cc). Channels start on successive NICs, so they reach
  min(NICs, channels) distinct NICs. Later duplication (connect.cc ncclTopoPostset: x2, and x2 more
  on sm90+ below 16) copies the channels with their NICs: it adds no NIC.
  On a 72-GPU NVL72 rack with 72 NICs of 400 Gb/s: a GPU's NVLink is rated 18 x 40 = 720 GB/s, so
  15 channels of 48 GB/s (720 / 48) reach 15 of the 72 NICs; an 8-GPU DGX H100 (371 GB/s rated,
  8 NICs): 8 channels of 45 GB/s, all 8 NICs.
- NVLS-tree (search.cc ncclTopoSearchTryNvls, nvls.cc): one head per NIC with a local GPU, at most
  NCCL_MAX_NVLS_ARITY = 32; each head's inter-node traffic goes through its own NIC.
"""

from __future__ import annotations

import math

from simulator.collectives import nccl_constants as C
from simulator.collectives.comm import CommView
from simulator.collectives.tuner import nccl_intra_gbps

# search.cc speedArrayInter (pre-Hopper) and sm90SpeedArrayInter / sm100SpeedArrayInter (equal), GB/s
INTER_SPEEDS_GBPS = (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
                     2.4, 1.2, 0.24, 0.12)
SM90_INTER_SPEEDS_GBPS = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4,
                          1.2, 0.24, 0.12)
MAX_RING_CHANNELS = 32  # init.cc: ringGraph->maxChannels = MAXCHANNELS / 2
NEXT_SPEED_RATIO = 0.49  # search.cc: a lower speed is tried while it is above 0.49 of the best found


def inter_node_graph(v: CommView) -> tuple[int, float]:
    """(channels, GB/s a channel) of NCCL's ring graph across nodes of NVLink GPUs (module docstring).
    (0, 0.0) when the search does not apply: one node, no NIC, or GPUs without NVLink."""
    if not v.multi_node or v.nics_per_node < 1 or v.net_Bps <= 0.0 or v.intra_kind != "nvlink":
        return 0, 0.0
    nvlink = nccl_intra_gbps(v)
    nic = v.net_Bps / v.nics_per_node / 1e9
    table = SM90_INTER_SPEEDS_GBPS if v.arch in ("hopper", "blackwell") else INTER_SPEEDS_GBPS
    best_channels, best_speed = 0, 0.0
    for speed in (s for s in table if s <= nic):
        if best_channels and speed / best_speed <= NEXT_SPEED_RATIO:
            break
        channels = min(MAX_RING_CHANNELS, math.floor(nvlink / speed + 1e-9),
                       v.nics_per_node * math.floor(nic / speed + 1e-9))
        if channels * speed > best_channels * best_speed:
            best_channels, best_speed = channels, speed
        if best_channels * best_speed >= nvlink - 1e-9:
            break
    return best_channels, best_speed


def nvls_heads(v: CommView) -> int:
    """NVLS heads: every GPU of the NVLink domain, or one per NIC across domains, at most
    NCCL_MAX_NVLS_ARITY = 32 (search.cc, device.h)."""
    heads = v.ranks_per_node if not v.multi_node else min(v.ranks_per_node, max(1, v.nics_per_node))
    return max(1, min(C.NVLS_MAX_HEADS, heads))


def nics_reached(algo: str, v: CommView) -> int:
    """How many of a node's NICs an algorithm's inter-node traffic goes through: the ring or tree
    graph's channels (inter_node_graph), the NVLS-tree's heads; all of them otherwise (direct
    sends, CollNet, PAT, and GPUs the search does not bound by NVLink). Nodes with several NICs per
    GPU keep all of them (AWS p5: 4 EFA NICs a GPU): NCCL's search sees the devices the network plugin
    presents, not the physical NICs, and counting p5's 32 NICs as NCCL devices makes its public 2-node
    log worse (median |error| 11.6% -> 20.1% at >= 1 MiB)."""
    if v.nics_per_node > v.ranks_per_node:
        return v.nics_per_node
    if algo in ("ring", "tree"):
        channels, _ = inter_node_graph(v)
        return min(v.nics_per_node, channels) if channels else v.nics_per_node
    if algo == "nvls_tree":
        return min(v.nics_per_node, nvls_heads(v))
    return v.nics_per_node
