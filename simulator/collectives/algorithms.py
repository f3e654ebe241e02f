"""The shape of each NCCL algorithm: how many dependent hops, and how many bytes cross each link.

For an operation on S bytes over n ranks in N nodes of G ranks, an `AlgoShape` gives
- `intra_hops`, `net_hops`: hops on the critical dependency chain (what latency adds up over);
- `intra_volume`: bytes each GPU sends over its intra-node links, per byte of S;
- `net_volume`: bytes each node sends into the network, per byte of S;
- `chain_depth`: for pipelined chains (trees, broadcast/reduce), the number of hops a chunk
  travels in sequence, which sets the pipeline fill; 0 for algorithms whose steps overlap.
Volumes are the textbook ones:
- ring: each rank sends 2(n-1)/n S for all_reduce, (n-1)/n S for all_gather / reduce_scatter
  (Patarasuk & Yuan 2009); every channel's ring crosses each node boundary once, so a node sends
  the same amount into the network, and its GPUs carry the rest over NVLink.
- tree: NCCL's intra-node chain plus inter-node double binary tree (Sanders et al. 2009), S/2 per
  tree; a node sends S into the network for 2 nodes and approaches 2S for many (interior in one
  tree, leaf in the other): up to 2S (`tree_net_volume`).
- nvls (all_gather / reduce_scatter, one NVLink domain): (G-1)/G S through the switch.
- nvls: NVLink SHARP reduces in the switch: a GPU sends S (its contributions, pulled by the
  switch) plus S/G (its reduced shard, multicast back) — NVIDIA NVLS whitepaper, NCCL 2.17 notes.
- collnet (SHARP): the network reduces, each node sends S once.
- pat: NCCL 2.23's Parallel Aggregated Trees for all_gather / reduce_scatter at one GPU per node:
  ring volumes, log2(n) steps.
- direct: alltoall and sendrecv as point-to-point sends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.collectives.comm import CommView
from simulator.collectives.sharp import collnet_available


@dataclass(frozen=True)
class AlgoShape:
    algo: str
    intra_hops: int
    net_hops: int
    intra_volume: float
    net_volume: float
    chain_depth: int = 0
    nvls_intra: bool = False  # intra-node traffic goes through NVLS (its own efficiency)
    net_volume_per_nic: float = 0.0  # for single-NIC-bound patterns (sendrecv across nodes)


def _log2_ceil(x: int) -> int:
    return max(1, math.ceil(math.log2(x))) if x > 1 else 0


def tree_net_volume(n_nodes: int) -> float:
    """Bytes the busiest node sends into the network per byte of S in a double binary tree.

    Each tree carries S/2. With 2 nodes a node is root of one tree and leaf of the other: S.
    With 4 or more, the busiest node is interior in one tree (up S/2 + down 2 x S/2) and a leaf in
    the other (S/2): 2S; the pipeline runs at the pace of that node. 3 nodes sit between.
    """
    return min(2.0, 0.5 * n_nodes) if n_nodes > 1 else 0.0


def tree_net_hops(depth: int) -> int:
    """Network hop latencies on a double binary tree's critical path, up and down. The root has one
    child; every other interior node has two, and it takes their chunks one after the other on the
    way up and sends to them one after the other on the way down, so each level below the root
    costs two hops: 2 x (2 depth - 1) (2 nodes: 2; 4: 6; 8: 10)."""
    return 2 * (2 * depth - 1) if depth > 0 else 0


def ring_shape(op: str, v: CommView) -> AlgoShape:
    """Ring (and the pipelined ring chain for broadcast/reduce)."""
    n, nodes, g = v.n_ranks, v.n_nodes, v.ranks_per_node
    if op == "all_reduce":
        steps, net_steps, volume = 2 * (n - 1), 2 * (nodes - 1), 2 * (n - 1) / n
    elif op in ("all_gather", "reduce_scatter"):
        steps, net_steps, volume = n - 1, nodes - 1, (n - 1) / n
    else:  # broadcast, reduce: a pipelined chain through all ranks
        steps, net_steps, volume = n - 1, nodes - 1, 1.0
    chain = n - 1 if op in ("broadcast", "reduce") else 0
    if nodes == 1:
        return AlgoShape("ring", steps, 0, volume, 0.0, chain)
    return AlgoShape("ring", steps - net_steps, net_steps, volume * (g - 1) / g, volume, chain)


def tree_shape(v: CommView) -> AlgoShape:
    """NCCL tree all_reduce: intra-node chain + inter-node double binary tree, up then down."""
    depth = _log2_ceil(v.n_nodes)
    g = v.ranks_per_node
    net = tree_net_volume(v.n_nodes)
    return AlgoShape("tree", 2 * (g - 1), tree_net_hops(depth), 2.0 if g > 1 else 0.0, net, 2 * (g - 1 + depth))


def nvls_shape(v: CommView) -> AlgoShape:
    """NVLS all_reduce inside one NVLink domain; NVLS-tree across nodes."""
    g = v.ranks_per_node
    intra = 1.0 + 1.0 / g
    if v.n_nodes == 1:
        return AlgoShape("nvls", 2, 0, intra, 0.0, 0, nvls_intra=True)
    depth = _log2_ceil(v.n_nodes)
    net = tree_net_volume(v.n_nodes)
    return AlgoShape("nvls_tree", 2, tree_net_hops(depth), intra, net, 2 * (1 + depth), nvls_intra=True)


def nvls_gather_shape(v: CommView) -> AlgoShape:
    """NVLS all_gather / reduce_scatter in one NVLink domain (NCCL 2.19+): each GPU's shard goes to
    the switch once and is multicast (all_gather) or reduced there (reduce_scatter): (G-1)/G S
    crosses a GPU's links in the busier direction."""
    g = v.ranks_per_node
    return AlgoShape("nvls", 2, 0, (g - 1) / g, 0.0, 0, nvls_intra=True)


def collnet_shape(v: CommView) -> AlgoShape:
    """SHARP in-network reduction (CollNet), with NVLS inside the node where available."""
    g = v.ranks_per_node
    intra = 1.0 + 1.0 / g if v.nvls else 2.0 * (g - 1) / g
    return AlgoShape("collnet", 2 if v.nvls else 2 * (g - 1), 2, intra, 1.0, 4, nvls_intra=v.nvls)


def pat_shape(op: str, v: CommView) -> AlgoShape:
    """PAT all_gather / reduce_scatter (one rank per node): log2(n) dependent network steps."""
    n = v.n_ranks
    return AlgoShape("pat", 0, _log2_ceil(n), 0.0, (n - 1) / n)


def direct_shape(op: str, v: CommView) -> AlgoShape:
    """alltoall (every rank to every rank) and sendrecv (rank r to r+1) as direct sends."""
    n, g, nodes = v.n_ranks, v.ranks_per_node, v.n_nodes
    if op == "alltoall":
        return AlgoShape("direct", 1, 1 if nodes > 1 else 0, (g - 1) / n, g * (n - g) / n if nodes > 1 else 0.0)
    if nodes == 1:
        return AlgoShape("direct", 1, 0, 1.0, 0.0)
    # one GPU per node sends across: bound by a single NIC; the others (if any) send to a neighbour
    # over NVLink, so a pair alone on its nodes (pipeline stages) loads no intra-node link
    return AlgoShape("direct", 0, 1, 1.0 if g > 1 else 0.0, 0.0, net_volume_per_nic=1.0)


def shapes_for(op: str, v: CommView) -> list[AlgoShape]:
    """Every algorithm NCCL could run for this operation on this communicator."""
    if op in ("alltoall", "sendrecv"):
        return [direct_shape(op, v)]
    out = [ring_shape(op, v)]
    if op == "all_reduce":
        if v.multi_node:
            out.append(tree_shape(v))
        if v.nvls and v.ranks_per_node > 1:
            out.append(nvls_shape(v))
        if collnet_available(v):
            out.append(collnet_shape(v))
    if op in ("all_gather", "reduce_scatter") and v.ranks_per_node == 1 and v.n_ranks > 1:
        out.append(pat_shape(op, v))
    if op in ("all_gather", "reduce_scatter") and v.nvls and not v.multi_node and v.ranks_per_node > 1:
        out.append(nvls_gather_shape(v))
    return out
