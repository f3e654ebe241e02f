"""ZeRO-1 in optimizer groups (strategy.shard_group_gpus with kind zero1): InternEvo's zero1=N and Megatron-Core's
distributed optimizer instances. The optimizer states shard within groups of N data-parallel ranks; the updated
parameters are gathered within a group; gradients are reduce-scattered within it and all-reduced across the groups,
or all-reduced over every rank where the whole gradient is all-reduced (InternEvo, DeepSpeed's bucket all-reduce)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from simulator.training.predict import predict_step
from simulator.training.prediction import StepPrediction
from topologies.presets import load_preset
from workloads.spec import ModelSpec, ParallelSpec, StrategySpec, TrainingSpec

SMALL = ModelSpec(name="tiny-vocab", layers=8, hidden=2048, heads=16, vocab=8, max_seq_len=1024)


def zero1(shard: int | None, nodes: int = 2, tp: int = 1, pp: int = 1, all_reduce: bool = False,
          topology: str = "dgx-h100") -> StepPrediction:
    strategy = StrategySpec(kind="zero1", shard_group_gpus=shard, zero_grad_all_reduce=all_reduce)
    training = TrainingSpec(model=SMALL, seq_len=1024, micro_batch=1, global_batch=8 * nodes // (tp * pp) * 2,
                            strategy=strategy, parallel=ParallelSpec(tp=tp, pp=pp))
    return predict_step(load_preset(topology, nodes=nodes), training, SMALL)


def collective_bytes(p: StepPrediction, name: str) -> list[int]:
    return [s.size_bytes for s in p.spans if s.name.startswith(name)]


@pytest.mark.parametrize(("tp", "pp", "all_reduce"), [(1, 1, False), (1, 1, True), (2, 1, False), (1, 2, False),
                                                      (2, 2, True)])
def test_one_group_of_every_rank_is_zero1(tp: int, pp: int, all_reduce: bool):
    """A group of the whole data-parallel group leaves one replica: the step and memory of plain ZeRO-1 (2 DGX H100),
    with tensor and pipeline parallelism too."""
    ranks = 16 // (tp * pp)
    grouped, whole = zero1(ranks, tp=tp, pp=pp, all_reduce=all_reduce), zero1(None, tp=tp, pp=pp,
                                                                               all_reduce=all_reduce)
    assert grouped.step_time_s == pytest.approx(whole.step_time_s, rel=1e-12)
    assert grouped.memory_per_gpu_bytes == pytest.approx(whole.memory_per_gpu_bytes, rel=1e-12)


def test_optimizer_states_shard_within_the_group():
    """Adam's 12 bytes a parameter over 8 ranks instead of 16 (2 DGX H100): twice the optimizer states; parameters
    and gradients are whole on every rank either way."""
    grouped, whole = zero1(8).memory, zero1(None).memory
    assert grouped.optimizer_bytes == pytest.approx(2 * whole.optimizer_bytes, rel=1e-9)
    assert (grouped.parameters_bytes, grouped.gradients_bytes) == (whole.parameters_bytes, whole.gradients_bytes)


def test_parameters_are_gathered_within_the_group_only():
    """Groups of one node's 8 ranks gather over NVLink: the gathers of 2 nodes take what one node's take, where
    gathering over all 16 ranks crosses the network and takes longer."""
    one_node, grouped, whole = zero1(None, nodes=1), zero1(8), zero1(None)

    def gather_s(p: StepPrediction) -> float:
        return sum(s.end_s - s.start_s for s in p.spans if s.name.startswith("param_ag"))

    assert gather_s(grouped) == pytest.approx(gather_s(one_node), rel=1e-9)
    assert gather_s(whole) > gather_s(grouped)


def test_megatron_instances_reduce_scatter_within_and_all_reduce_each_slice_across():
    """Without an all-reduce of whole gradients, each bucket is reduce-scattered within the 8-rank group and each
    rank's eighth all-reduced across the 2 groups: the bytes of the across step are the bucket's / 8."""
    p = zero1(8)
    buckets = [s.size_bytes for s in p.spans if ".reduce_scatter" in s.name and not s.name.endswith(".across")]
    across = [s.size_bytes for s in p.spans if s.name.endswith(".across")]
    assert buckets and len(across) == len(buckets)
    assert sorted(across) == sorted(b // 8 for b in buckets)


def test_an_all_reduce_of_whole_gradients_spans_every_rank():
    """InternEvo all-reduces the whole gradient over every data-parallel rank whatever its zero1 group: the same
    reduction with and without groups, and nothing across."""
    grouped, whole = zero1(8, all_reduce=True), zero1(None, all_reduce=True)
    assert collective_bytes(grouped, "m1.all_reduce") == collective_bytes(whole, "m1.all_reduce") != []
    assert not [s for s in grouped.spans if s.name.endswith(".across")]
    assert grouped.comm_by_collective_s.get("all_reduce", 0.0) == pytest.approx(
        whole.comm_by_collective_s.get("all_reduce", 0.0), rel=1e-9)


@given(nodes=st.sampled_from([2, 4]), shard=st.sampled_from([2, 4, 8, 16]), all_reduce=st.booleans())
@settings(max_examples=10, deadline=None)
def test_group_properties(nodes: int, shard: int, all_reduce: bool):
    """Any group that can be laid out: idle time within [0, step time], memory no smaller than without groups,
    and the optimizer states in proportion to the ranks they shard over."""
    grouped, whole = zero1(shard, nodes=nodes, all_reduce=all_reduce), zero1(None, nodes=nodes, all_reduce=all_reduce)
    assert 0.0 <= grouped.gpu_idle_s <= grouped.step_time_s
    assert grouped.memory_per_gpu_bytes >= whole.memory_per_gpu_bytes * (1 - 1e-12)
    assert grouped.memory.optimizer_bytes == pytest.approx(whole.memory.optimizer_bytes * 8 * nodes / shard, rel=1e-9)


@pytest.mark.parametrize("kind", ["ddp", "zero2", "zero3", "fsdp"])
def test_a_group_is_refused_for_strategies_without_one(kind: str):
    with pytest.raises(ValidationError, match=f"shard_group_gpus is HSDP's shard group .* kind is {kind}"):
        StrategySpec(kind=kind, shard_group_gpus=8)
