"""Rank groups counted from their digits (strides and sizes) instead of rank by rank: the same members per
node, leaf groups spanned and pipeline peers as listing every rank of every group."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.training.groups import Layout


def listed_members(layout: Layout, dim: str) -> list[int]:
    """Rank 0's group, every rank listed (context-parallel ranks first; "ep" the first ep, "edp" every ep-th)."""
    ranks = [0]
    for d in [d for d in (("cp", "dp") if dim in ("grad", "ep", "edp") else (dim,)) if d in layout.order]:
        ranks = [r + i * layout.stride(d) for i in range(layout.size(d)) for r in ranks]
    return {"ep": ranks[: layout.ep], "edp": ranks[:: layout.ep]}.get(dim, ranks)


def listed_origins(layout: Layout, dim: str) -> list[int]:
    """Every group's first rank: the ranks whose index in the group's dimensions is 0."""
    dims = ("cp", "dp") if dim in ("grad", "ep", "edp") else (dim,)
    fixed = [(layout.stride(d), layout.size(d)) for d in dims if d in layout.order]
    return [r for r in range(layout.n_ranks) if all((r // stride) % size == 0 for stride, size in fixed)]


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    tp, pp, cp = (draw(st.sampled_from([1, 2, 4, 8])) for _ in range(3))
    dp = draw(st.sampled_from([1, 2, 3, 4, 6, 8, 16]))
    ep = draw(st.sampled_from([e for e in (1, 2, 3, 4, 8, 16) if (dp * cp) % e == 0]))
    order = tuple(draw(st.permutations(["tp", "pp", "dp"])))
    if cp > 1:
        at = order.index("tp") + 1
        order = (*order[:at], "cp", *order[at:])
    return Layout(tp, pp, dp, draw(st.sampled_from([2, 4, 8])), order, cp, ep)


@settings(max_examples=300, deadline=None)
@given(layouts(), st.sampled_from(["tp", "pp", "cp", "dp", "grad", "ep", "edp"]), st.sampled_from([1, 2, 3, 4]))
def test_groups_from_digits_are_the_listed_groups(layout: Layout, dim: str, leaf_nodes: int) -> None:
    """Members per node and the most leaf groups spanned equal those of the listed ranks."""
    members = listed_members(layout, dim)
    assert layout.members_per_node(dim) == sum(1 for r in members if r < layout.gpus_per_node)
    per_leaf = layout.gpus_per_node * leaf_nodes
    spanned = max(len({(origin + m) // per_leaf for m in members}) for origin in listed_origins(layout, dim))
    assert layout.leaf_groups(dim, leaf_nodes) == spanned


@settings(max_examples=200, deadline=None)
@given(layouts(), st.integers(0, 7), st.integers(0, 7), st.sampled_from([1, 2, 3, 4, 1 << 30]))
def test_pipeline_peers_from_residues_are_the_listed_ones(layout: Layout, a: int, b: int, leaf_nodes: int) -> None:
    """The worst transfer between two stages over every pipeline, from group origins modulo a leaf group,
    is the one found by walking every pipeline."""
    a, b = a % layout.pp, b % layout.pp
    stride, worst = layout.stride("pp"), "pp:intra"
    for origin in listed_origins(layout, "pp"):
        node_a, node_b = (origin + a * stride) // layout.gpus_per_node, (origin + b * stride) // layout.gpus_per_node
        if node_a // leaf_nodes != node_b // leaf_nodes:
            worst = "pp:spine"
            break
        if node_a != node_b:
            worst = "pp:inter"
    assert layout.pipeline_peer(a, b, leaf_nodes) == worst
