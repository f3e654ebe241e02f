"""Where the ranks of each parallel group sit, and the communicator each group's collectives see.

Ranks are laid out by `ParallelSpec.placement`, innermost dimension first: with "tp-pp-dp" on
8-GPU nodes, rank r has tp index r % tp, stage (r // tp) % pp and data-parallel index
r // (tp pp), so a TP group of 8 fills a node, consecutive stages sit on consecutive nodes and a
DP group takes one GPU from each of dp nodes. A group whose members are spread k per node over
n nodes communicates like a cluster of n nodes with k GPUs each, and owns k / G of each node's
NICs (the other G - k GPUs of the node run their own groups' copies of the same collective at the
same time; rail-optimised servers give every GPU its own NIC). A placement that spreads a TP
group over several nodes therefore sends its all-reduces over the network: slower, as it should be.

Context-parallel ranks sit right after the TP ranks whatever the placement (Megatron-Core's order is
tp-cp-ep-dp-pp; torchtitan's mesh ends in cp, tp). They hold the same parameters as the data-parallel
ranks, so gradients are reduced, and ZeRO / FSDP states sharded, over the data- and context-parallel
ranks together (Megatron-Core's data-parallel group "with context parallel", torchtitan's FSDP over
dp_shard x cp): the "grad" group, of `replicas` ranks.

Expert-parallel ranks are the first ep members of that group (context-parallel ranks first, then
data-parallel ones: Megatron-Core's expert ranks follow tp, its expert data-parallel group folds cp
in): the "ep" group splits each MoE block's experts and trades tokens by all-to-all; the members
holding the same experts, every ep-th one, reduce the expert gradients: the "edp" group, of
replicas / ep ranks. With experts whole on one GPU (ParallelSpec.expert_tp 1 under tp > 1, Megatron-Core
--expert-tensor-parallel-size 1) its expert rank generator splits the TP x context x data-parallel ranks of a
stage, TP index innermost, into expert-parallel groups of ep consecutive ones instead (x = tp index + tp (cp index
+ cp dp index); an expert-parallel group is ep consecutive x, the "edp" group every ep-th x, tp x replicas / ep
ranks). With HSDP the expert-parallel group lies inside each shard group (torchtitan carves
ep out of dp_shard x cp): the experts' states shard over the ranks of a shard group holding the same
experts ("eshard", shard / ep of them) and all-reduce across the shard groups as the dense part does.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, replace

from simulator.collectives.comm import CommView
from simulator.core.errors import ConfigError
from simulator.training.shards import expert_replicas, expert_shard_group
from workloads.spec import ParallelSpec


@dataclass(frozen=True)
class Layout:
    """Degrees of the parallel dimensions, their order over ranks, and the node size."""

    tp: int
    pp: int
    dp: int
    gpus_per_node: int
    order: tuple[str, ...]  # innermost first
    cp: int = 1
    ep: int = 1
    shard: int = 0  # HSDP's shard group: that many consecutive ranks of the gradient group (0: one node's)
    etp: int = 0  # the experts' tensor-parallel degree (ParallelSpec.expert_tp; 0: tp)

    @property
    def split_experts(self) -> bool:
        """Whether the expert groups are carved out of the TP ranks too (experts whole on one GPU, tp > 1)."""
        return self.ep > 1 and self.etp == 1 and self.tp > 1

    @property
    def expert_replicas(self) -> int:
        """Ranks of the expert data-parallel group: those holding the same experts."""
        return expert_replicas(self.replicas, self.tp, self.ep, self.etp or self.tp)

    @property
    def replicas(self) -> int:
        """Ranks that hold the same parameters and reduce gradients together: data- x context-parallel."""
        return self.dp * self.cp

    def size(self, dim: str) -> int:
        return {"tp": self.tp, "cp": self.cp, "pp": self.pp, "dp": self.dp}[dim]

    def stride(self, dim: str) -> int:
        """Rank distance between neighbours of the `dim` group."""
        stride = 1
        for inner in self.order[: self.order.index(dim)]:
            stride *= self.size(inner)
        return stride

    @property
    def n_ranks(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    def _dims(self, dim: str) -> tuple[str, ...]:
        """The parallel dimensions a group spans ("grad", "ep" and "edp": the context- and data-parallel; the
        expert groups the tensor-parallel too when they split the TP ranks)."""
        if dim in ("ep", "edp") and self.split_experts:
            return ("tp", "cp", "dp")
        return ("cp", "dp") if dim in ("grad", "ep", "edp") else (dim,)

    def _expert_rank(self, x: int) -> int:
        """The rank of index x of a stage's TP x context x data-parallel ranks, TP index innermost (module
        docstring)."""
        rest = x // self.tp
        cp_part = (rest % self.cp) * self.stride("cp") if self.cp > 1 else 0
        return (x % self.tp) * self.stride("tp") + cp_part + (rest // self.cp) * self.stride("dp")

    def _origins(self, dims: tuple[str, ...], period: int) -> set[int]:
        """The first ranks of the groups over `dims` (the ranks whose index in each of them is 0), modulo
        `period`: a group's place relative to nodes and leaf groups of `period` ranks depends on nothing
        else. Built one dimension at a time, each taking at most `period` steps, so the cost does not grow
        with the ranks."""
        residues = {0}
        for d in self.order:
            if d in dims:
                continue
            stride, size = self.stride(d), self.size(d)
            steps = min(size, period // math.gcd(stride, period))
            residues = {(r + i * stride) % period for r in residues for i in range(steps)}
        return residues

    def _enumerated(self, dim: str) -> list[int]:
        """The ranks of rank 0's `dim` group, listed ("grad": the data- and context-parallel ranks together,
        context-parallel ranks first; "ep": the first ep of them, "edp": every ep-th, see the module docstring)."""
        if dim in ("ep", "edp") and self.split_experts:
            members = range(self.ep) if dim == "ep" else range(0, self.tp * self.replicas, self.ep)
            return [self._expert_rank(x) for x in members]
        ranks = [0]
        for d in [d for d in self._dims(dim) if d in self.order]:
            stride = self.stride(d)
            ranks = [r + i * stride for i in range(self.size(d)) for r in ranks]
        return {"ep": ranks[: self.ep], "edp": ranks[:: self.ep]}.get(dim, ranks)

    @functools.cache  # noqa: B019 (layouts are few, small and frozen; a step asks for each group often)
    def _digits(self, dim: str) -> tuple[tuple[int, int], ...] | None:
        """Rank 0's `dim` group as (stride, size) digits: its ranks are the sums of i x stride over the digits,
        0 <= i < size; None for an expert group that takes part of a context-parallel digit (then listed)."""
        if dim in ("ep", "edp") and self.split_experts:
            return None
        digits = [(self.stride(d), self.size(d)) for d in self._dims(dim) if d in self.order]
        if dim not in ("ep", "edp") or (dim == "edp" and self.ep == 1):
            return tuple(digits) or ((1, 1),)
        (cp_stride, cp), (dp_stride, dp) = digits if len(digits) == 2 else ((1, 1), digits[0])
        if dim == "ep" and self.ep <= cp:
            return ((cp_stride, self.ep),)
        if dim == "ep" and self.ep % cp == 0:
            return (cp_stride, cp), (dp_stride, self.ep // cp)
        if dim == "edp" and cp % self.ep == 0:
            return (cp_stride * self.ep, cp // self.ep), (dp_stride, dp)
        if dim == "edp" and self.ep % cp == 0:
            return ((dp_stride * (self.ep // cp), dp // (self.ep // cp)),)
        return None

    def adjacent_pair(self, dim: str) -> bool:
        """True when rank 0's `dim` group is ranks 0 and 1 (every group of the dimension is then an even rank and
        the next one): on a server of cards bridged in pairs, one bridge joins each group."""
        digits = self._digits(dim)
        return digits == ((1, 2),) or (digits is None and self._enumerated(dim) == [0, 1])

    def shard_ranks(self) -> int:
        """Ranks of an HSDP shard group: `shard`, else the gradient group's ranks on one node (also the group of
        ZeRO++'s secondary partition)."""
        return self.shard or self.members_per_node("grad")

    def expert_shard_ranks(self) -> int:
        """Ranks of an HSDP shard group that hold the same experts (every ep-th of its ranks: expert parallelism
        runs inside each shard group), over which they shard the experts' states."""
        return expert_shard_group(self.shard_ranks(), self.ep)

    @functools.cache  # noqa: B019 (as _digits)
    def members_per_node(self, dim: str) -> int:
        """How many members of rank 0's `dim` group share its node: the sums of digits below the node size
        (a digit of stride s contributes at most ceil(G / s) values), so the count costs at most G^2 steps."""
        below = self.gpus_per_node
        digits = self._digits(dim)
        if digits is None:
            return sum(1 for r in self._enumerated(dim) if r < below)
        ranges = [range(0, min(size, -(-below // stride)) * stride, stride) for stride, size in digits]
        return sum(1 for values in itertools.product(*ranges) if sum(values) < below)

    def _blocks(self, dim: str, origin: int, period: int) -> int:
        """How many blocks of `period` ranks the `dim` group starting at `origin` touches. The digit with the
        most values is walked as a range: its ranks step by its stride, so with a stride up to `period` they
        cover every block between the first and the last; the other digits' combinations are enumerated."""
        digits = self._digits(dim)
        if digits is None:
            return len({(origin + m) // period for m in self._enumerated(dim)})
        (stride, size), *others = sorted(digits, key=lambda digit: -digit[1])
        blocks: set[int] = set()
        for values in itertools.product(*(range(0, n * s, s) for s, n in others)):
            first = origin + sum(values)
            if stride <= period:
                blocks.update(range(first // period, (first + (size - 1) * stride) // period + 1))
            else:
                blocks.update((first + i * stride) // period for i in range(size))
        return len(blocks)

    @functools.cache  # noqa: B019 (layouts are few, small and frozen; a step's runs ask again)
    def leaf_groups(self, dim: str, leaf_nodes: int) -> int:
        """The most leaf groups (of `leaf_nodes` consecutive nodes) any `dim` group's nodes span: a group
        strided over the nodes (data parallelism outside TP and PP) spans more than a group of neighbouring
        nodes, and groups of the same dimension can differ (stage 0's on nodes {0, 3} under one leaf of 4,
        stage 1's on {1, 4} across two); a step runs at its slowest group's pace. The expert groups are
        taken at their place in each data-parallel group, as rank 0's are."""
        per_leaf = self.gpus_per_node * leaf_nodes
        return max(self._blocks(dim, origin, per_leaf) for origin in self._origins(self._dims(dim), per_leaf))

    @functools.cache  # noqa: B019 (as leaf_groups)
    def pipeline_peer(self, a: int, b: int, leaf_nodes: int) -> str:
        """The communicator of a transfer between stages `a` and `b`, the worst over every pipeline (the
        step waits for the slowest): "pp:intra" on one node, "pp:inter" across nodes under one leaf group
        (`leaf_nodes` consecutive nodes), "pp:spine" across leaf groups (through the spines)."""
        stride, worst = self.stride("pp"), "pp:intra"
        one_leaf = leaf_nodes * self.gpus_per_node >= self.n_ranks  # then only the nodes tell transfers apart
        for origin in self._origins(("pp",), self.gpus_per_node * (1 if one_leaf else leaf_nodes)):
            node_a = (origin + a * stride) // self.gpus_per_node
            node_b = (origin + b * stride) // self.gpus_per_node
            if node_a // leaf_nodes != node_b // leaf_nodes:
                return "pp:spine"
            if node_a != node_b:
                worst = "pp:inter"
        return worst


def layout_of(parallel: ParallelSpec, n_gpus: int, gpus_per_node: int) -> Layout:
    """The layout of `parallel` on `n_gpus` GPUs; ConfigError when tp x pp x cp does not divide them."""
    model_parallel = parallel.tp * parallel.pp * parallel.cp
    if n_gpus % model_parallel:
        cp = f" x cp {parallel.cp}" if parallel.cp > 1 else ""
        raise ConfigError(f"training.parallel: tp {parallel.tp} x pp {parallel.pp}{cp} = {model_parallel} "
                          f"does not divide the {n_gpus} GPUs of the topology")
    order = tuple(parallel.placement.split("-"))
    if parallel.cp > 1:  # right after tp (module docstring)
        at = order.index("tp") + 1
        order = (*order[:at], "cp", *order[at:])
    dp = n_gpus // model_parallel
    if parallel.expert_tp == 1 and parallel.tp > 1:
        if (dp * parallel.cp * parallel.tp) % parallel.ep:
            raise ConfigError(f"training.parallel.ep {parallel.ep} must divide the {dp * parallel.cp * parallel.tp} "
                              "tensor- x data- x context-parallel ranks of a stage (etp 1: expert-parallel ranks are "
                              "taken from them)")
    elif (dp * parallel.cp) % parallel.ep:
        raise ConfigError(f"training.parallel.ep {parallel.ep} must divide the {dp * parallel.cp} data- x "
                          f"context-parallel ranks (GPUs / (tp x pp) = {n_gpus // (parallel.tp * parallel.pp)}): "
                          "expert-parallel ranks are taken from them")
    return Layout(parallel.tp, parallel.pp, dp, gpus_per_node, order, parallel.cp, parallel.ep,
                  etp=parallel.expert_tp)


def group_view(v: CommView, size: int, per_node: int, leaf_groups: int = 0, pair: bool = False) -> CommView:
    """The communicator of a group of `size` ranks, `per_node` of them on each node, its nodes spanning
    `leaf_groups` leaf groups (0: consecutive nodes), see module docstring; `v` is the whole cluster's
    view. A `pair` of GPUs 2k and 2k + 1 (Layout.adjacent_pair) on a server of cards bridged in pairs talks over
    its NVLink bridge (v.bridge_Bps), whatever the rest of the server runs at."""
    if size <= per_node:
        local = replace(v, n_ranks=size, n_nodes=1, ranks_per_node=size, net_Bps=0.0, transport=None)
        if pair and size == 2 and v.bridge_Bps > 0:
            return replace(local, intra_kind="nvlink", intra_Bps=v.bridge_Bps)
        return local
    share, n_nodes = per_node / v.ranks_per_node, size // per_node
    return replace(v, n_ranks=size, n_nodes=n_nodes, ranks_per_node=per_node, net_Bps=v.net_Bps * share,
                   spine_Bps=v.spine_Bps * share, nics_per_node=max(1, round(v.nics_per_node * share)),
                   leaf_groups=min(leaf_groups, n_nodes))


def communicators(v: CommView, layout: Layout) -> dict[str, CommView]:
    """The views of the groups a step communicates in: "dp" (the gradient group: data- x context-parallel
    ranks), "tp", HSDP's "shard" (Layout.shard_ranks consecutive ranks of the gradient group: one node's, a
    part of them or whole nodes) and "replica" (the ranks holding the same shard, one of each shard group),
    "pp:intra" / "pp:inter" / "pp:spine" for a transfer between neighbouring stages on the same node, across
    nodes of one leaf group or across leaf groups, "cp" for a step of the context-parallel ring: a neighbour
    exchange that crosses the network when the ring spans nodes (every rank steps at once, so the slowest hop
    paces the ring), "cp:all" for the whole context-parallel group (all-to-all CP), "ep" for the expert-parallel
    group's all-to-alls, "edp" for the expert gradients' reduction and, with HSDP, "eshard" for the ranks of a
    shard group that hold the same experts (every ep-th; their replicas are the dense part's)."""
    dp_per_node = layout.members_per_node("grad")

    def leaf(dim: str) -> int:
        return layout.leaf_groups(dim, v.nodes_per_leaf_group) if v.nodes_per_leaf_group < v.n_nodes else 1

    pair = layout.adjacent_pair
    views = {
        "dp": group_view(v, layout.replicas, dp_per_node, leaf("grad"), pair("grad")),
        "tp": group_view(v, layout.tp, layout.members_per_node("tp"), leaf("tp"), pair("tp")),
        "pp:intra": group_view(v, 2, 2, pair=layout.stride("pp") == 1),
        "pp:inter": group_view(v, 2, 1, leaf_groups=1),  # two nodes under one leaf group
        "pp:spine": group_view(v, 2, 1, leaf_groups=2),  # two nodes under different leaf groups
    }
    shard, expert_shard = layout.shard_ranks(), layout.expert_shard_ranks()
    views["shard"] = group_view(v, shard, min(shard, dp_per_node))
    views["eshard"] = group_view(v, expert_shard, min(expert_shard, layout.members_per_node("edp")))
    views["replica"] = group_view(v, max(1, layout.replicas // shard), max(1, dp_per_node // shard), leaf("grad"))
    views["cp"] = views["pp:intra" if layout.members_per_node("cp") == layout.cp else
                        "pp:spine" if leaf("cp") > 1 else "pp:inter"]
    views["cp:all"] = group_view(v, layout.cp, layout.members_per_node("cp"), leaf("cp"), pair("cp"))
    views["ep"] = group_view(v, layout.ep, layout.members_per_node("ep"), leaf("ep"), pair("ep"))
    views["edp"] = group_view(v, layout.expert_replicas, layout.members_per_node("edp"), leaf("edp"), pair("edp"))
    return views
