"""DeepEP's expert all-to-alls: a token crosses the network once per node, then NVLink.

NCCL's all-to-all (Megatron-Core's alltoall token dispatcher) sends each token once to every rank that holds one
of the k experts its router chose. DeepEP's normal kernels (deepseek-ai/DeepEP; Megatron-Core's flex dispatcher
with its DeepEP or HybridEP backend) forward between the two domains instead (the DeepSeek-V3 technical report,
section 3.2.2): a token goes over RDMA once to each node holding one of its experts, to the GPU of the same
index there, which passes it over NVLink to the GPUs holding its experts; the combine sums a node's outputs of a
token before they go back. Over an expert-parallel group of N nodes of g GPUs, with the k experts uniform over
its ranks, per byte a rank sends in NCCL's all-to-all (k copies of each token):
- the network carries D / k, D = (N - 1) (1 - (1 - 1/N)^k) the expected number of other nodes a token has an
  expert on (k = 8 over 4 nodes: 2.7 of the 6 copies NCCL sends there);
- NVLink carries (g - 1) / g: the copies for the other GPUs of its own node, and those it passes on for the
  tokens other nodes sent it.
The kernels run at the hardware's rates (DeepEP's measured normal kernels on H800 with one 400 Gb/s CX7 NIC a GPU:
43-58 GB/s through RDMA against the NIC's ~50, 153-158 GB/s through NVLink against ~160: docs/legacy.md): the
network at the NIC's achievable rate (ModelParams.net_efficiency), NVLink at DEEPEP_NVLINK_EFFICIENCY, each kernel
moving its bytes on its own SMs rather than NCCL's channels. Latency is that of NCCL's all-to-all on the same
group (a network hop, the launch), which DeepEP's host-side count exchange does not undercut.
"""

from __future__ import annotations

from simulator.collectives.comm import CommView
from simulator.collectives.cost import CollectiveEstimate
from simulator.collectives.params import ModelParams

# DeepEP's intranode dispatch and combine: 153 and 158 GB/s of H800's ~160 GB/s of NVLink (docs/legacy.md)
DEEPEP_NVLINK_EFFICIENCY = 0.95


def remote_nodes_per_token(nodes: int, top_k: int) -> float:
    """Expected number of other nodes holding at least one of a token's `top_k` experts, the experts uniform over
    `nodes` nodes of the group."""
    if nodes <= 1:
        return 0.0
    return (nodes - 1) * (1.0 - (1.0 - 1.0 / nodes) ** top_k)


def deepep_estimate(v: CommView, size_bytes: int, top_k: int, p: ModelParams, latency_s: float) -> CollectiveEstimate:
    """One DeepEP dispatch (or combine) on the expert-parallel group `v`: `size_bytes` is what the rank would send in
    NCCL's all-to-all (k copies of each token), `latency_s` NCCL's all-to-all latency on the group (module
    docstring)."""
    g = v.ranks_per_node
    intra_eff = DEEPEP_NVLINK_EFFICIENCY if v.intra_kind == "nvlink" else p.intra_efficiency
    demands = {"intra": (g - 1) / g / (v.intra_Bps * intra_eff)} if g > 1 else {}
    if v.n_nodes > 1 and v.net_Bps > 0:
        # the node's GPUs each send D / k of their bytes through the node's NICs
        demands["net"] = g * remote_nodes_per_token(v.n_nodes, top_k) / top_k / (v.net_Bps * p.net_efficiency)
    if not demands:
        return CollectiveEstimate("alltoall", size_bytes, "deepep", "simple", latency_s, latency_s, 0.0, 0.0, "none", 0)
    bottleneck = max(demands, key=lambda k: demands[k])
    bandwidth_s = size_bytes * demands[bottleneck]
    return CollectiveEstimate("alltoall", size_bytes, "deepep", "simple", latency_s + bandwidth_s, latency_s, 0.0,
                              bandwidth_s, bottleneck, 0, tuple(sorted(demands.items())))
