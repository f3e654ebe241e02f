"""Metamorphic tests of faults and stragglers in a training step: where they are changes nothing among
equivalent places, a fault never speeds a step up, a slowdown of 1 is the healthy job, and the job's idle
time counts the GPUs that wait on a straggler."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.scenario import ScenarioSpec, StragglerSpec, pace_of
from simulator.training.pace import NOMINAL, Pace
from simulator.training.predict import predict_step
from simulator.training.prediction import StepPrediction
from topologies.presets import load_preset
from workloads.presets import load_model
from workloads.spec import ModelSpec, ParallelSpec, StrategySpec, TrainingSpec

LLAMA_13B = load_model("llama2-13b")
FSDP_13B = TrainingSpec(model="llama2-13b", seq_len=4096, micro_batch=1, global_batch=512,
                        activation_checkpointing="selective", strategy=StrategySpec(kind="fsdp"))
# a small pipeline job: 4 stages of 8-GPU tensor-parallel groups, one per node
SMALL = ModelSpec(name="small", layers=8, hidden=2048, heads=16, vocab=32000, max_seq_len=2048)
PIPELINE = TrainingSpec(model=SMALL, seq_len=2048, micro_batch=1, grad_accum=8, strategy=StrategySpec(kind="zero1"),
                        parallel=ParallelSpec(tp=8, pp=4))


def fsdp_13b(faults: list[tuple[str, float]] = ()) -> StepPrediction:  # type: ignore[assignment]
    topology = load_preset("dgx-h100", nodes=8, link_faults=[{"device": d, "factor": f} for d, f in faults])
    return predict_step(topology, FSDP_13B, LLAMA_13B)


def pipeline(pace: Pace = NOMINAL, faults: list[tuple[str, float]] = ()) -> StepPrediction:  # type: ignore[assignment]
    topology = load_preset("dgx-h100", nodes=4, link_faults=[{"device": d, "factor": f} for d, f in faults])
    return predict_step(topology, PIPELINE, SMALL, pace=pace)


def test_a_degraded_nic_slows_the_step_wherever_it_is():
    """Llama-2-13B FSDP on 8 x DGX H100 with one NIC at 0.25: the same step on s0 or on s5 (+-0.5%), slower than
    the healthy step (the gradient reduce-scatters and parameter gathers cross every node's NICs)."""
    healthy, on_s0, on_s5 = fsdp_13b(), fsdp_13b([("s0/nic3", 0.25)]), fsdp_13b([("s5/nic3", 0.25)])
    assert on_s5.step_time_s == pytest.approx(on_s0.step_time_s, rel=0.005)
    assert on_s0.step_time_s > healthy.step_time_s * 1.05
    assert on_s0.gpu_idle_by_class.keys() == {"s0 (nic3 x0.25)", "others"}


def test_a_degraded_nic_slows_hsdp_with_pipelining_wherever_it_is():
    """HSDP beside pipeline parallelism (the small model, PP 2 over 4 DGX H100, shard groups of one node's 8
    data-parallel ranks of a stage): a NIC at 0.25 on s0 or on s3 gives the same step, slower than the healthy
    one."""
    def step(faults: list[tuple[str, float]]) -> StepPrediction:
        topology = load_preset("dgx-h100", nodes=4, link_faults=[{"device": d, "factor": f} for d, f in faults])
        training = TrainingSpec(model=SMALL, seq_len=2048, micro_batch=1, global_batch=64,
                                strategy=StrategySpec(kind="hsdp", shard_group_gpus=8), parallel=ParallelSpec(pp=2))
        return predict_step(topology, training, SMALL)
    healthy, on_s0, on_s3 = step([]), step([("s0/nic3", 0.25)]), step([("s3/nic3", 0.25)])
    assert on_s3.step_time_s == pytest.approx(on_s0.step_time_s, rel=1e-9)
    assert on_s0.step_time_s > healthy.step_time_s


@pytest.mark.parametrize("shard", [4, 16])
def test_a_degraded_nic_slows_hsdp_wherever_it_is(shard: int):
    """HSDP with shard groups of half a node or of two nodes (Llama-2-13B on 8 x DGX H100): a NIC at 0.25 gives
    the same step on s0 or s5 (every node holds an equal part of the shard and replica groups), slower than the
    healthy step, and counts the degraded node's GPUs apart."""
    def step(faults: list[tuple[str, float]]) -> StepPrediction:
        topology = load_preset("dgx-h100", nodes=8, link_faults=[{"device": d, "factor": f} for d, f in faults])
        training = FSDP_13B.model_copy(update={"strategy": StrategySpec(kind="hsdp", shard_group_gpus=shard)})
        return predict_step(topology, training, LLAMA_13B)
    healthy, on_s0, on_s5 = step([]), step([("s0/nic3", 0.25)]), step([("s5/nic3", 0.25)])
    assert on_s5.step_time_s == pytest.approx(on_s0.step_time_s, rel=1e-9)
    assert on_s0.step_time_s > healthy.step_time_s
    assert on_s0.gpu_idle_by_class.keys() == {"s0 (nic3 x0.25)", "others"}


HEALTHY_PIPELINE = pipeline()


@settings(max_examples=6, deadline=None)
@given(server=st.integers(0, 3), gpu=st.integers(0, 7), factor=st.sampled_from([0.1, 0.5, 0.9]))
def test_a_degraded_gpu_link_slows_its_tensor_parallel_group_wherever_it_is(server: int, gpu: int, factor: float):
    """A GPU's links at `factor` slow the tensor-parallel group of its node (its NVLinks) and nothing speeds up;
    which GPU of which node is the same (every node holds one stage's TP group)."""
    here = pipeline(faults=[(f"s{server}/gpu{gpu}", factor)])
    there = pipeline(faults=[("s0/gpu0", factor)])
    assert here.step_time_s == pytest.approx(there.step_time_s, rel=1e-9)
    assert here.step_time_s >= HEALTHY_PIPELINE.step_time_s


def test_a_fault_on_a_spine_no_group_crosses_changes_nothing():
    """4 DGX H100 under the same rail leaves: nothing crosses the spines, so a degraded spine changes nothing."""
    assert pipeline(faults=[("spine0", 0.1)]).step_time_s == HEALTHY_PIPELINE.step_time_s


@settings(max_examples=6, deadline=None)
@given(gpu=st.integers(0, 7), slowdown=st.sampled_from([1.05, 1.3]))
def test_moving_a_straggler_within_its_stage_changes_nothing(gpu: int, slowdown: float):
    """A slow GPU paces its stage's tensor-parallel group, whichever GPU of the group it is (stage 1 = node s1)."""
    moved = pipeline(Pace(slow_ranks=((8 + gpu, slowdown),)))
    first = pipeline(Pace(slow_ranks=((8, slowdown),)))
    assert moved.step_time_s == pytest.approx(first.step_time_s, rel=1e-9)
    assert HEALTHY_PIPELINE.step_time_s < moved.step_time_s
    assert moved.step_time_s <= pipeline(Pace(slowdown, 1)).step_time_s * (1 + 1e-9)  # one stage, not every stage


def test_a_slowdown_of_one_is_the_healthy_job():
    """A straggler at 1.0, placed or not, is no straggler: the same step and idle time."""
    for pace in (Pace(slow_ranks=((17, 1.0),)), Pace(1.0, 1)):
        p = pipeline(pace)
        assert p.step_time_s == HEALTHY_PIPELINE.step_time_s and p.gpu_idle_s == HEALTHY_PIPELINE.gpu_idle_s


def test_straggler_placement_resolves_to_ranks():
    """s3/gpu2, s3 and 17 name rank 26, the eight ranks of server 3, and rank 17; the slowest factor wins."""
    scenario = ScenarioSpec(topology="dgx-h100", nodes=4, training=PIPELINE, stragglers=(
        StragglerSpec(device="s3/gpu2", slowdown=1.5), StragglerSpec(device="s3", slowdown=1.2),
        StragglerSpec(device="17", slowdown=1.1)))
    pace = pace_of(scenario, 4, 8)
    assert dict(pace.slow_ranks) == {17: 1.1, **{r: 1.2 for r in range(24, 32)}, 26: 1.5}


def test_the_jobs_idle_time_counts_the_gpus_waiting_on_a_straggler():
    """One GPU of 64 at 1.15 (examples/straggler.yaml): the other 63 wait what it computes beyond them, so the
    job's idle time is its own idle plus 63/64 of that wait; per class, the others idle longer than it."""
    slow = predict_step(load_preset("dgx-h100", nodes=8), FSDP_13B, LLAMA_13B, pace=Pace(1.15, 1))
    wait = slow.idle_breakdown_s["straggler_wait"]
    assert slow.gpu_idle_s == pytest.approx(slow.critical_idle_s + 63 / 64 * wait, rel=1e-9)
    assert slow.gpu_idle_fraction >= 0.9 * 63 / 64 * wait / slow.step_time_s
    by_class = slow.gpu_idle_by_class
    assert by_class["slow (x1.15)"]["gpus"] == 1 and by_class["others"]["gpus"] == 63
    assert by_class["others"]["idle_s"] == pytest.approx(by_class["slow (x1.15)"]["idle_s"] + wait, rel=1e-9)
