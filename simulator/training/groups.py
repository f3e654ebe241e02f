"""Where the ranks of each parallel group sit, and the communicator each group's collectives see.

Ranks are laid out by `ParallelSpec.placement`, innermost dimension first: with "tp-pp-dp" on
8-GPU nodes, rank r has tp index r % tp, stage (r // tp) % pp and data-parallel index
r // (tp pp), so a TP group of 8 fills a node, consecutive stages sit on consecutive nodes and a
DP group takes one GPU from each of dp nodes. A group whose members are spread k per node over
n nodes communicates like a cluster of n nodes with k GPUs each, and owns k / G of each node's
NICs (the other G - k GPUs of the node run their own groups' copies of the same collective at the
same time; rail-optimised servers give every GPU its own NIC). A placement that spreads a TP
group over several nodes therefore sends its all-reduces over the network: slower, as it should be.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simulator.collectives.comm import CommView
from simulator.core.errors import ConfigError
from workloads.spec import ParallelSpec


@dataclass(frozen=True)
class Layout:
    """Degrees of the parallel dimensions, their order over ranks, and the node size."""

    tp: int
    pp: int
    dp: int
    gpus_per_node: int
    order: tuple[str, ...]  # innermost first

    def size(self, dim: str) -> int:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp}[dim]

    def stride(self, dim: str) -> int:
        """Rank distance between neighbours of the `dim` group."""
        stride = 1
        for inner in self.order[: self.order.index(dim)]:
            stride *= self.size(inner)
        return stride

    def node_of(self, dim: str, index: int) -> int:
        """The node of member `index` of rank 0's `dim` group."""
        return index * self.stride(dim) // self.gpus_per_node

    def members_per_node(self, dim: str) -> int:
        """How many members of rank 0's `dim` group share its node."""
        return sum(1 for i in range(self.size(dim)) if self.node_of(dim, i) == 0)

    def stages_cross_node(self, a: int, b: int) -> bool:
        """Whether stages `a` and `b` of rank 0's pipeline sit on different nodes."""
        return self.node_of("pp", a) != self.node_of("pp", b)


def layout_of(parallel: ParallelSpec, n_gpus: int, gpus_per_node: int) -> Layout:
    """The layout of `parallel` on `n_gpus` GPUs; ConfigError when tp x pp does not divide them."""
    if n_gpus % (parallel.tp * parallel.pp):
        raise ConfigError(f"training.parallel: tp {parallel.tp} x pp {parallel.pp} = {parallel.tp * parallel.pp} "
                          f"does not divide the {n_gpus} GPUs of the topology")
    return Layout(parallel.tp, parallel.pp, n_gpus // (parallel.tp * parallel.pp), gpus_per_node,
                  tuple(parallel.placement.split("-")))


def group_view(v: CommView, size: int, per_node: int) -> CommView:
    """The communicator of a group of `size` ranks, `per_node` of them on each node (see module
    docstring); `v` is the whole cluster's view."""
    if size <= per_node:
        return replace(v, n_ranks=size, n_nodes=1, ranks_per_node=size, net_Bps=0.0, transport=None)
    share = per_node / v.ranks_per_node
    return replace(v, n_ranks=size, n_nodes=size // per_node, ranks_per_node=per_node, net_Bps=v.net_Bps * share,
                   spine_Bps=v.spine_Bps * share, nics_per_node=max(1, round(v.nics_per_node * share)))


def communicators(v: CommView, layout: Layout) -> dict[str, CommView]:
    """The views of the groups a step communicates in: "dp", "tp", HSDP's "shard" (one node of the
    DP group) and "replica" (the same GPU of every node), and "pp:intra" / "pp:inter" for a
    transfer between neighbouring stages on the same node or across nodes."""
    dp_per_node = layout.members_per_node("dp")
    views = {
        "dp": group_view(v, layout.dp, dp_per_node),
        "tp": group_view(v, layout.tp, layout.members_per_node("tp")),
        "pp:intra": group_view(v, 2, 2),
        "pp:inter": group_view(v, 2, 1),
        "shard": group_view(v, dp_per_node, dp_per_node),
    }
    views["replica"] = group_view(v, max(1, layout.dp // dp_per_node), 1)
    return views
