"""HSDP beside expert parallelism (torchtitan's dp_replicate x dp_shard with ep carved out of dp_shard): the
experts' states shard over the ranks of a shard group that hold the same experts (shard / ep of them) and
all-reduce across the shard groups, as the dense part does over the whole shard group."""

from __future__ import annotations

import pytest

from simulator.core.errors import ConfigError
from simulator.training.predict import predict_step
from simulator.training.prediction import StepPrediction
from topologies.presets import load_preset
from workloads.model import transformer
from workloads.spec import ModelSpec, ParallelSpec, StrategySpec, TrainingSpec

# a small mixture of experts: 16 experts of which 2 routed per token, one dense first block
MOE = ModelSpec(name="small-moe", layers=4, hidden=1024, heads=8, kv_heads=8, vocab=8000, experts=16,
                experts_per_token=2, expert_ffn_hidden=1024, dense_layers=1)


def step(shard: int | None, ep: int, kind: str = "hsdp", pp: int = 1, tp: int = 1, nodes: int = 4,
         faults: tuple[tuple[str, float], ...] = ()) -> StepPrediction:
    training = TrainingSpec(model=MOE, seq_len=1024, micro_batch=1, global_batch=4 * 8 * nodes // (tp * pp),
                            strategy=StrategySpec(kind=kind, shard_group_gpus=shard),
                            parallel=ParallelSpec(ep=ep, pp=pp, tp=tp, sequence_parallel=tp > 1))
    topology = load_preset("dgx-h100", nodes=nodes, link_faults=[{"device": d, "factor": f} for d, f in faults])
    return predict_step(topology, training, MOE)


@pytest.mark.parametrize(("ep", "pp", "tp"), [(8, 1, 1), (4, 1, 2), (16, 1, 1), (4, 2, 1)])
def test_hsdp_with_experts_over_every_data_parallel_rank_is_fsdp(ep: int, pp: int, tp: int):
    """A shard group of the whole data-parallel group leaves one replica: FSDP FULL_SHARD's step and memory
    exactly, with expert parallelism inside and beside pipeline and tensor parallelism (4 DGX H100)."""
    ranks = 32 // (pp * tp)
    shared, full = step(ranks, ep, pp=pp, tp=tp), step(None, ep, kind="fsdp", pp=pp, tp=tp)
    assert shared.step_time_s == pytest.approx(full.step_time_s, rel=1e-12)
    assert shared.memory_per_gpu_bytes == pytest.approx(full.memory_per_gpu_bytes, rel=1e-12)


def test_expert_states_shard_over_the_shard_group_ranks_that_hold_them():
    """Optimizer states by hand (Adam's fp32 master weights and two moments: 12 bytes a parameter, mixed
    precision): with ep 4, a shard group of 16 ranks shards the dense part 16 ways and each GPU's experts over
    the 16 / 4 = 4 ranks holding them; a group of 8, 8 and 2 ways."""
    model = transformer(MOE)
    experts = model.expert_params_per_layer * (MOE.layers - MOE.dense_layers) / 4  # a GPU's 4 of 16 experts
    dense = model.total_params - model.expert_params_per_layer * (MOE.layers - MOE.dense_layers)
    for shard, expert_shard in ((16, 4), (8, 2)):
        expected = 12 * (dense / shard + experts / expert_shard)
        assert step(shard, 4).memory.optimizer_bytes == pytest.approx(expected, rel=1e-9)


def test_a_shard_group_of_one_expert_parallel_group_keeps_its_experts_whole():
    """ep 8 and shard groups of one node's 8 ranks: each GPU's experts are held by it alone in its group, so their
    states are not sharded (more memory than FSDP's), and their gradients reduce across the nodes only."""
    node, full = step(8, 8), step(None, 8, kind="fsdp")
    assert node.memory.optimizer_bytes > full.memory.optimizer_bytes
    assert 0.0 <= node.gpu_idle_s <= node.step_time_s


@pytest.mark.parametrize("pp", [1, 2])
def test_a_degraded_nic_slows_hsdp_with_experts_wherever_it_is(pp: int):
    """A NIC at 0.25 on the first or the last server gives the same step (every node holds an equal part of the
    shard, expert and replica groups), slower than the healthy one."""
    healthy, first, last = (step(8, 4, pp=pp, faults=faults) for faults in ((), (("s0/nic3", 0.25),),
                                                                            (("s3/nic3", 0.25),)))
    assert last.step_time_s == pytest.approx(first.step_time_s, rel=1e-9)
    assert first.step_time_s > healthy.step_time_s


def test_expert_parallelism_wider_than_the_shard_group_is_refused():
    with pytest.raises(ConfigError, match=r"training.parallel.ep 16 must divide the HSDP shard group's 8 ranks"):
        step(8, 16)
