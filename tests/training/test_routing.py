"""A mixture of experts' routing load (simulator.training.routing): the busiest expert-parallel rank's share
under imbalance, capacity and padding; what it does to the expert GEMMs, the all-to-all bytes, activation
memory and the step; the wait of the other ranks; bad settings. Expected values are hand-computed from the
formulas in simulator.training.routing, compute, tasks.ep_calls and workloads.model."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from simulator.core.errors import ConfigError
from simulator.training.compute import ComputeModel
from simulator.training.predict import predict_step
from simulator.training.routing import dropped_fraction, routed_loads
from simulator.training.tasks import ep_calls
from topologies.hardware import gpu_spec
from topologies.presets import load_preset
from workloads.model import transformer
from workloads.presets import load_model
from workloads.spec import ParallelSpec, RoutingSpec, StrategySpec, TrainingSpec

MIXTRAL = load_model("mixtral-8x7b")  # 32 layers, hidden 4096, 8 experts of 3 x 4096 x 14336, top-2
H100 = ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16")
CLUSTER = load_preset("dgx-h100", nodes=8)


def job(routing: RoutingSpec, ep: int = 8, checkpointing: str = "full") -> TrainingSpec:
    return TrainingSpec(model=MIXTRAL, seq_len=4096, micro_batch=1, global_batch=128,
                        activation_checkpointing=checkpointing,  # type: ignore[arg-type]
                        strategy=StrategySpec(kind="zero1"), parallel=ParallelSpec(ep=ep), routing=routing)


@pytest.mark.parametrize(("routing", "ep", "busiest", "mean", "dropped"), [
    (RoutingSpec(), 8, 1.0, 1.0, 0.0),
    (RoutingSpec(load_imbalance=1.3), 8, 1.3, 1.0, 0.0),  # dropless: the busiest takes all it is sent
    (RoutingSpec(load_imbalance=1.3), 1, 1.0, 1.0, 0.0),  # one GPU holds every expert: nothing to wait for
    (RoutingSpec(load_imbalance=6.0), 4, 4.0, 1.0, 0.0),  # one rank takes at most every token of its group
    (RoutingSpec(load_imbalance=1.5, capacity_factor=1.25), 8, 1.25, 1.0, 1 - 1.25 / 1.5),
    (RoutingSpec(load_imbalance=1.1, capacity_factor=1.25), 8, 1.1, 1.0, 0.0),  # under capacity: no drop
    (RoutingSpec(capacity_factor=0.8), 8, 0.8, 0.8, 0.2),  # a capacity below 1 drops even balanced tokens
    (RoutingSpec(load_imbalance=1.5, capacity_factor=1.25, pad_to_capacity=True), 8, 1.25, 1.25, 1 - 1.25 / 1.5),
    (RoutingSpec(capacity_factor=1.5, pad_to_capacity=True), 1, 1.5, 1.5, 0.0),  # padding costs even at ep 1
])
def test_routed_loads(routing: RoutingSpec, ep: int, busiest: float, mean: float, dropped: float) -> None:
    assert routed_loads(routing, ep) == pytest.approx((busiest, mean))
    assert dropped_fraction(routing, ep) == pytest.approx(dropped)


def test_bad_routing_is_refused() -> None:
    """Imbalance below 1 or infinite, a capacity of 0, padding without a capacity: pydantic names the field; a
    capacity over E / k (an expert cannot take more than every token) or routing on a dense model: ConfigError
    naming training.routing."""
    with pytest.raises(ValidationError, match="load_imbalance"):
        RoutingSpec(load_imbalance=0.9)
    with pytest.raises(ValidationError, match="capacity_factor"):
        RoutingSpec(capacity_factor=0.0)
    with pytest.raises(ValidationError, match="pad_to_capacity needs a capacity_factor"):
        RoutingSpec(pad_to_capacity=True)
    with pytest.raises(ValidationError, match="finite"):
        RoutingSpec(load_imbalance=float("inf"))
    with pytest.raises(ConfigError, match="capacity_factor 5: at most experts / experts_per_token"):
        predict_step(CLUSTER, job(RoutingSpec(capacity_factor=5.0)), MIXTRAL)  # 8 experts, top 2: 4 at most
    dense = TrainingSpec(model="llama3-8b", global_batch=64, routing=RoutingSpec(load_imbalance=1.2))
    with pytest.raises(ConfigError, match="training.routing: model llama3-8b has a dense MLP"):
        predict_step(CLUSTER, dense, load_model("llama3-8b"))


def test_busiest_rank_computes_its_load() -> None:
    """Over EP 8 one expert gets 2 x 4096 rows when balanced; at load 1.5 the busiest rank's expert gets 12288:
    1.5x the FLOPs at that size's efficiency. The attention GEMMs do not change."""
    model = transformer(MIXTRAL)
    busiest = H100.with_routed_load(1.5)
    balanced, loaded = H100.gemms_s(model, 1, 4096, ep=8), busiest.gemms_s(model, 1, 4096, ep=8)
    flops = 2 * 12288 * 28672 * 4096  # the routed gate+up GEMM at 1.5 x 8192 rows
    assert loaded["mlp_up"] == pytest.approx(flops / (H100.peak_flops * H100.gemm_efficiency(12288, 28672, 4096)))
    assert loaded["qkv"] == balanced["qkv"] and loaded["router"] == balanced["router"]
    assert busiest.layer(model, 1, 4096, "none", ep=8).forward_s > H100.layer(model, 1, 4096, "none", ep=8).forward_s
    assert ComputeModel.for_job(H100.gpu, job(RoutingSpec(load_imbalance=1.5))).routed_load == 1.5


def test_all_to_all_carries_the_busiest_ranks_load() -> None:
    """Balanced, dispatch and combine move k b s h 2 B = 64 MiB per rank; the busiest at 1.25 receives and
    returns 80 MiB, and every rank's all-to-all lasts as long as its."""
    model = transformer(MIXTRAL)
    assert ep_calls(model, 1, 4096, 1, 8, passes=1, routed_load=1.25)[0].size_bytes == 80 * 2**20


def test_busiest_rank_keeps_more_activations() -> None:
    """Without recomputation a block keeps 16 s b h ((k + S) f_e - f) / (4 h) + 2 k s b h bytes for its experts
    beyond a dense block; at load 1.5, k = 2 becomes 3: 16 x 14336 / (4 x 4096) + 2 = 16 B per token-hidden more."""
    model = transformer(MIXTRAL)
    sbh = 4096 * 4096
    extra = model.activation_bytes_per_layer(1, 4096, "selective", routed_load=1.5) \
        - model.activation_bytes_per_layer(1, 4096, "selective")
    assert extra == pytest.approx(sbh * (16 * 14336 / (4 * 4096) + 2))
    assert model.activation_bytes_per_layer(1, 4096, "full", routed_load=1.5) == \
        model.activation_bytes_per_layer(1, 4096, "full")  # full recomputation keeps only the block input


def test_the_step_runs_at_the_busiest_ranks_pace() -> None:
    """Imbalance 1.3 over EP 8: a slower step whose model FLOPs are unchanged; the other ranks wait the busiest
    rank's extra block compute, 32 layers x 2 micro-steps of it (hand-computed from the compute model);
    imbalance at EP 1 changes nothing; padding to capacity slows every rank alike (no wait)."""
    base = predict_step(CLUSTER, job(RoutingSpec()), MIXTRAL)
    skewed = predict_step(CLUSTER, job(RoutingSpec(load_imbalance=1.3)), MIXTRAL)
    assert skewed.step_time_s > base.step_time_s
    assert skewed.model_flops_per_step == base.model_flops_per_step
    model = transformer(MIXTRAL)
    per_layer = H100.with_routed_load(1.3).layer(model, 1, 4096, "full", ep=8)
    balanced = H100.layer(model, 1, 4096, "full", ep=8)
    micro_steps = 128 // 64  # 128 sequences a step over 64 data-parallel GPUs, one a micro-step
    expected = (per_layer.total_s - balanced.total_s) * 32 * micro_steps
    assert skewed.idle_breakdown_s["routing_wait"] == pytest.approx(expected, rel=1e-9)
    assert base.idle_breakdown_s["routing_wait"] == 0.0
    at_ep1 = predict_step(CLUSTER, job(RoutingSpec(load_imbalance=1.3), ep=1), MIXTRAL)
    assert at_ep1.step_time_s == predict_step(CLUSTER, job(RoutingSpec(), ep=1), MIXTRAL).step_time_s
    padded = predict_step(CLUSTER, job(RoutingSpec(capacity_factor=1.3, pad_to_capacity=True)), MIXTRAL)
    assert padded.step_time_s > base.step_time_s and padded.idle_breakdown_s["routing_wait"] == 0.0


def test_model_flops_count_the_routed_work_kept() -> None:
    """A capacity below 1 drops 1 - C of the routed token-expert pairs even when balanced: the model FLOPs
    (and MFU) count C of the routed experts' GEMMs, so MFU stays a share of what the GPUs can do (at
    C = 0.1 not 1.27). Mixtral 8x7B, per token and layer, forward: routed experts 2 x
    2 x 3 x 4096 x 14336 FLOPs; 6 x 32 layers x 0.9 of them go at C = 0.1. Padding adds rows, not useful
    work: C = 1.5 padded counts what dropless counts."""
    base = predict_step(CLUSTER, job(RoutingSpec()), MIXTRAL)
    tokens = base.tokens_per_step
    low = predict_step(CLUSTER, job(RoutingSpec(capacity_factor=0.1)), MIXTRAL)
    routed_per_token = 2 * 2 * 3 * 4096 * 14336
    assert low.model_flops_per_step == pytest.approx(
        base.model_flops_per_step - 3 * 32 * 0.9 * routed_per_token * tokens, rel=1e-12)
    assert 0.0 < low.mfu < 1.0
    padded = predict_step(CLUSTER, job(RoutingSpec(capacity_factor=1.5, pad_to_capacity=True)), MIXTRAL)
    assert padded.model_flops_per_step == base.model_flops_per_step


@settings(max_examples=8, deadline=None)
@given(low=st.floats(1.0, 2.0), extra=st.floats(0.0, 1.0))
def test_more_imbalance_is_never_faster(low: float, extra: float) -> None:
    """Property: a busier busiest rank never makes the step faster, and the others' wait stays within the step."""
    a = predict_step(CLUSTER, job(RoutingSpec(load_imbalance=low)), MIXTRAL)
    b = predict_step(CLUSTER, job(RoutingSpec(load_imbalance=low + extra)), MIXTRAL)
    assert b.step_time_s >= a.step_time_s * (1 - 1e-9)
    assert 0.0 <= b.idle_breakdown_s["routing_wait"] <= b.step_time_s


def test_routing_wait_counts_the_mixture_blocks_of_the_fullest_stage() -> None:
    """8 blocks over 2 stages with the first 2 dense: stage 0 holds 2 mixtures, stage 1 four; the wait is over
    those 4 (not ceil(6 / 2) = 3), per micro-step, per the busiest-minus-mean block time."""
    spec = MIXTRAL.model_copy(update={"layers": 8, "dense_layers": 2})
    training = TrainingSpec(model=spec, seq_len=4096, micro_batch=1, global_batch=64, activation_checkpointing="full",
                            strategy=StrategySpec(kind="zero1"), routing=RoutingSpec(load_imbalance=1.3),
                            parallel=ParallelSpec(pp=2, ep=8))
    prediction = predict_step(CLUSTER, training, spec)
    model = transformer(spec)
    per_layer = (H100.with_routed_load(1.3).layer(model, 1, 4096, "full", ep=8).total_s
                 - H100.layer(model, 1, 4096, "full", ep=8).total_s)
    micro_steps = 64 // 32  # 64 sequences over 32 data-parallel ranks, one a micro-step
    assert prediction.idle_breakdown_s["routing_wait"] == pytest.approx(per_layer * 4 * micro_steps, rel=1e-9)
