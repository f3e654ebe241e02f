"""Recomputing some layers only (TrainingSpec.recompute_layers, simulator.training.recompute): which layers,
the step and memory against the all-or-nothing jobs it lies between, and bad settings."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from simulator.scenario import complete_training
from simulator.training.job_warnings import job_warnings
from simulator.training.predict import predict_step
from simulator.training.recompute import recomputing
from topologies.presets import load_preset
from workloads.presets import load_model
from workloads.spec import ParallelSpec, RoutingSpec, StrategySpec, TrainingSpec

LLAMA = load_model("llama2-7b")  # 32 layers
MIXTRAL = load_model("mixtral-8x7b")  # 32 mixture layers


def predict(layers: int | None, checkpointing: str = "full", nodes: int = 2, model=LLAMA, **kw):
    topology = load_preset("dgx-a100", nodes=nodes)
    training = TrainingSpec(model=model.name, seq_len=4096, micro_batch=2, activation_checkpointing=checkpointing,
                            recompute_layers=layers, strategy=StrategySpec(kind=kw.pop("kind", "fsdp")), **kw)
    return predict_step(topology, complete_training(training, model, topology), model)


def test_which_layers_recompute():
    """Evenly spread, the last of each run (every k-th, as torchtitan and fms-fsdp wrap them); None is all of
    them, 0 none, more than the layers all."""
    assert recomputing(8, 4) == (False, True) * 4
    assert recomputing(9, 3) == (False, False, True) * 3
    assert recomputing(4, None) == recomputing(4, 4) == recomputing(4, 9) == (True,) * 4
    assert recomputing(4, 0) == (False,) * 4
    assert sum(recomputing(80, 27)) == 27


@given(layers=st.integers(1, 200), count=st.integers(0, 300))
@settings(max_examples=200)
def test_the_count_recomputes_that_many(layers: int, count: int):
    assert sum(recomputing(layers, count)) == min(count, layers)


PIPELINED = {"kind": "zero1", "global_batch": 64, "nodes": 4}


@pytest.mark.parametrize("extra", [
    {}, {"kind": "ddp"}, {"parallel": ParallelSpec(tp=2, sequence_parallel=True)},
    {**PIPELINED, "parallel": ParallelSpec(pp=4)},
    {**PIPELINED, "parallel": ParallelSpec(tp=2, pp=2, cp=2, sequence_parallel=True, tp_comm_overlap=True)},
    {**PIPELINED, "parallel": ParallelSpec(pp=2, pipeline_schedule="interleaved", virtual_stages=4)},
], ids=["fsdp", "ddp", "tp-sp", "pp", "tp-pp-cp-overlap", "interleaved"])
def test_all_layers_is_full_and_none_is_no_recomputation(extra):
    """recompute_layers = the model's layers prices exactly what full recomputation does; 0 exactly what none
    does: the same step time and memory (FSDP, DDP, TP with sequence parallelism; pipelines, with TP overlap
    and context parallelism, and interleaved)."""
    full, every = predict(None, **extra), predict(32, **extra)
    none, zero = predict(None, "none", **extra), predict(0, **extra)
    assert every.step_time_s == full.step_time_s and every.memory_per_gpu_bytes == full.memory_per_gpu_bytes
    assert zero.step_time_s == none.step_time_s and zero.memory_per_gpu_bytes == none.memory_per_gpu_bytes


@pytest.mark.parametrize("parallel", [ParallelSpec(ep=8), ParallelSpec(ep=8, pp=2)], ids=["ep", "ep-pp"])
def test_a_mixture_under_imbalance_too(parallel):
    """The same for a mixture of experts with expert parallelism and a routing imbalance (the busiest rank's
    wait counts the recomputation of the layers that recompute), with and without a pipeline."""
    kw = {"model": MIXTRAL, "nodes": 4, "kind": "zero1", "parallel": parallel,
          "routing": RoutingSpec(load_imbalance=1.3), "global_batch": 64}
    assert predict(32, **kw).step_time_s == predict(None, **kw).step_time_s
    assert predict(0, **kw).step_time_s == predict(None, "none", **kw).step_time_s
    assert predict(None, "none", **kw).step_time_s < predict(16, **kw).step_time_s < predict(None, **kw).step_time_s


def test_on_one_gpu_the_recomputation_adds_up_layer_by_layer():
    """One GPU (no communication): each recomputing layer adds one layer's forward, so half the layers add half
    of what full recomputation adds (hand-computed: t(16) - t(0) = (t(32) - t(0)) / 2)."""
    topology = load_preset("dgx-a100", nodes=1).model_copy(update={"gpus_per_node": 1})

    def step(layers: int) -> float:
        training = TrainingSpec(model=LLAMA.name, seq_len=4096, micro_batch=1, activation_checkpointing="full",
                                recompute_layers=layers, strategy=StrategySpec(kind="ddp"))
        return predict_step(topology, complete_training(training, LLAMA, topology), LLAMA).step_time_s

    base, half, full = step(0), step(16), step(32)
    assert half - base == pytest.approx((full - base) / 2, rel=1e-9)


@given(low=st.integers(0, 32), high=st.integers(0, 32))
@settings(max_examples=12, deadline=None)
def test_more_recomputing_layers_are_never_faster_and_never_hold_more(low: int, high: int):
    low, high = min(low, high), max(low, high)
    fewer, more = predict(low), predict(high)
    assert more.step_time_s >= fewer.step_time_s
    assert more.memory_per_gpu_bytes <= fewer.memory_per_gpu_bytes


def test_in_a_pipeline_each_stage_recomputes_its_share():
    """With 4 stages of 8 layers and 16 recomputing layers (every 2nd), every stage recomputes 4 of its 8: the
    step lies strictly between none and full, and its memory too."""
    kw = {**PIPELINED, "parallel": ParallelSpec(pp=4)}
    none, half, full = predict(None, "none", **kw), predict(16, **kw), predict(None, **kw)
    assert none.step_time_s < half.step_time_s < full.step_time_s
    assert full.memory_per_gpu_bytes < half.memory_per_gpu_bytes < none.memory_per_gpu_bytes


def test_more_layers_than_the_model_has_is_warned():
    """recompute_layers 40 of Llama 2 7B's 32: all recompute (as full), with a warning naming the field."""
    training = TrainingSpec(model=LLAMA.name, activation_checkpointing="full", recompute_layers=40)
    assert any("recompute_layers 40 is more than model llama2-7b's 32 layers" in w
               for w in job_warnings(training, LLAMA))
    assert not job_warnings(training.model_copy(update={"recompute_layers": 32}), LLAMA)


def test_bad_settings_name_the_field():
    """recompute_layers needs full recomputation and is >= 0."""
    with pytest.raises(ValidationError, match="needs activation_checkpointing full, not selective"):
        TrainingSpec(model="llama2-7b", activation_checkpointing="selective", recompute_layers=4)
    with pytest.raises(ValidationError, match="recompute_layers"):
        TrainingSpec(model="llama2-7b", activation_checkpointing="full", recompute_layers=-1)
