"""Context parallelism: rank layout, the key/value ring's volume and overlap, compute and memory per rank,
bad layouts. Expected values are hand-computed from the formulas cited in simulator.training.tasks.cp_call."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.collectives.comm import comm_view
from simulator.collectives.predict import predict_collective
from simulator.core.errors import ConfigError
from simulator.training.compute import ATTENTION_SHAPE, ComputeModel
from simulator.training.groups import communicators, layout_of
from simulator.training.memory import memory_per_gpu
from simulator.training.predict import predict_step
from simulator.training.tasks import cp_call, ulysses_calls
from topologies.build import build
from topologies.hardware import gpu_spec
from topologies.presets import load_preset
from workloads.model import transformer
from workloads.presets import load_model
from workloads.spec import ParallelSpec, StrategySpec, TrainingSpec

LLAMA = load_model("llama3-8b")  # 32 layers, hidden 4096, 32 heads, 8 key/value heads: kv_dim 1024
H100 = ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16")


def job(cp: int, seq_len: int, tp: int = 1, **kw: object) -> TrainingSpec:
    return TrainingSpec(model=LLAMA, seq_len=seq_len, micro_batch=1, activation_checkpointing="full",
                        strategy=StrategySpec(kind="fsdp"), parallel=ParallelSpec(tp=tp, cp=cp), **kw)


def test_context_ranks_sit_next_to_tp_and_reduce_with_dp() -> None:
    """TP 2 x CP 4 on 4 nodes of 8: cp ranks at stride 2 right after tp, whatever the placement; dp = 32 / 8 =
    4; gradients go over the 16 data- x context-parallel ranks, 4 of them per node; the ring stays in a node."""
    layout = layout_of(ParallelSpec(tp=2, cp=4, placement="tp-pp-dp"), 32, 8)
    assert layout.order == ("tp", "cp", "pp", "dp") and (layout.dp, layout.replicas) == (4, 16)
    assert layout.stride("cp") == 2 and layout.members_per_node("cp") == 4
    assert layout.members_per_node("grad") == 4 and layout.members_per_node("dp") == 1
    views = communicators(comm_view(build(load_preset("dgx-h100", nodes=4))), layout)
    assert (views["dp"].n_ranks, views["dp"].n_nodes) == (16, 4)
    assert views["cp"] == views["pp:intra"]
    spread = layout_of(ParallelSpec(tp=4, cp=4), 32, 8)  # 16 ranks: the ring crosses nodes
    assert communicators(comm_view(build(load_preset("dgx-h100", nodes=4))), spread)["cp"].n_nodes == 2


def test_ring_volume_per_layer() -> None:
    """Forward: cp - 1 exchanges of the local K and V, 2 x 2 B x (65536 / 4) tokens x 1024 / tp; backward
    passes the block and its gradient, twice that; no ring without context parallelism."""
    model = transformer(LLAMA)
    forward = cp_call(model, 1, 65536, 1, 4, "forward")
    assert forward is not None and (forward.op, forward.group, forward.count) == ("sendrecv", "cp", 3)
    assert forward.size_bytes == 2 * 2 * 16384 * 1024
    backward = cp_call(model, 1, 65536, 2, 4, "backward", layers=5)
    assert backward is not None and (backward.size_bytes, backward.count) == (2 * 2 * 2 * 16384 * 1024 // 2, 15)
    assert cp_call(model, 1, 65536, 1, 1, "forward") is None


def test_compute_per_rank_is_its_tokens_against_all_keys() -> None:
    """A CP rank runs the GEMMs of seq / cp tokens and 1 / cp of the attention (its queries against all keys);
    of the ring's 4 steps 3 run the non-causal kernel, 1.13x faster a unit of work (FlashAttention-3 paper's
    non-causal vs causal rates): 1 / 4 of the whole, at (1 + 3 / 1.13) / 4 of its causal time, each step's
    kernel at the rate for its 8,192 keys where the whole sequence's runs at that of 32,768 (Hopper's measured
    shape curve). All-to-all CP runs causal kernels only."""
    model = transformer(LLAMA)
    split = H100.layer(model, 1, 32768, "none", cp=4)
    local = H100.layer(model, 1, 8192, "none")
    shape = ATTENTION_SHAPE["flash2"]
    assert H100.attention_forward_s(model, 1, 32768, cp=4) == pytest.approx(
        H100.attention_forward_s(model, 1, 32768) / 4 * (1 + 3 / 1.13) / 4
        * shape.factor(32768, 128) / shape.factor(8192, 128), rel=1e-12)
    a2a = ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16", ring_attention=False)
    assert a2a.attention_forward_s(model, 1, 32768, cp=4) == pytest.approx(
        a2a.attention_forward_s(model, 1, 32768) / 4, rel=1e-12)
    attention_extra = H100.attention_forward_s(model, 1, 32768, cp=4) - H100.attention_forward_s(model, 1, 8192)
    assert split.forward_s - local.forward_s == pytest.approx(attention_extra, rel=1e-9)


def test_pytorch_eager_ring_merges_by_hand() -> None:
    """PyTorch's ring (cp_merge eager) adds, per layer and step after the first, 32 B per output element and
    4 B per key and value element forward, 11.5 B and 23.5 B backward, at HBM speed: Llama 3 8B, 32k
    tokens over CP 4 -> 8192 local tokens, q 4096 and kv 1024 wide."""
    model = transformer(LLAMA)
    eager = ComputeModel(gpu_spec("H100-SXM5-80GB"), "bf16", eager_cp_merge=True)
    fused, merged = H100.layer(model, 1, 32768, "none", cp=4), eager.layer(model, 1, 32768, "none", cp=4)
    q, kv = 8192 * 4096, 8192 * 1024
    assert merged.forward_s - fused.forward_s == pytest.approx(3 * (32 * q + 4 * 2 * kv) / H100.hbm_Bps, rel=1e-9)
    assert merged.backward_s - fused.backward_s == pytest.approx(3 * (11.5 * q + 23.5 * 2 * kv) / H100.hbm_Bps,
                                                                 rel=1e-9)
    assert eager.layer(model, 1, 8192, "none").forward_s == H100.layer(model, 1, 8192, "none").forward_s


def test_activations_are_those_of_the_local_tokens() -> None:
    """With a fused attention kernel a CP rank stores the activations of seq / cp tokens; model states are
    sharded over the data- x context-parallel ranks."""
    model = transformer(LLAMA)
    split = memory_per_gpu(model, job(4, 32768), 32768, dp=4, shard_group=4, units_in_flight=2)
    local = memory_per_gpu(model, job(1, 8192), 8192, dp=4, shard_group=4, units_in_flight=2)
    assert split.activations_bytes == pytest.approx(local.activations_bytes, rel=1e-12)
    assert split.parameters_bytes == pytest.approx(local.parameters_bytes, rel=1e-12)


def test_ring_hides_behind_attention_unless_the_blocks_are_small() -> None:
    """Llama 3 8B, CP 16 over two H100 nodes: at 8k tokens a step's attention (512 queries) is far shorter
    than the key/value exchange over the network, and the compute stream stalls, per layer and pass, by the
    difference (hand-computed from the collective model); at 128k the attention hides the ring."""
    topology = load_preset("dgx-h100", nodes=2)
    model = transformer(LLAMA)
    short = predict_step(topology, job(16, 8192), LLAMA)
    view = communicators(comm_view(build(topology)), layout_of(ParallelSpec(cp=16), 16, 8))["cp"]
    attention = H100.attention_forward_s(model, 1, 8192, cp=16)
    stall = 0.0
    for kind, factor, passes in (("forward", 1.0, 2), ("backward", 2.0, 1)):  # forward, recompute, backward
        call = cp_call(model, 1, 8192, 1, 16, kind)
        assert call is not None
        exchange = predict_collective(view, "sendrecv", call.size_bytes).time_s
        stall += passes * call.count * max(0.0, exchange - factor * attention / 16)
    assert short.comm_by_collective_s["cp_comm"] == pytest.approx(LLAMA.layers * stall, rel=1e-6)
    long = predict_step(topology, job(16, 131072), LLAMA)
    assert long.comm_by_collective_s.get("cp_comm", 0.0) == 0.0


def test_context_parallelism_trades_tokens_per_gpu_for_sequence_length() -> None:
    """Same 16 GPUs and sequence: CP 2 holds twice the tokens per GPU of CP 4 and needs more memory; the
    step processes the same sequences per data-parallel rank."""
    topology = load_preset("dgx-h100", nodes=2)
    two, four = (predict_step(topology, job(cp, 65536), LLAMA) for cp in (2, 4))
    assert two.tokens_per_step == 2 * four.tokens_per_step  # dp 8 against dp 4, one sequence each
    assert two.memory.activations_bytes == pytest.approx(2 * four.memory.activations_bytes, rel=1e-9)


@pytest.mark.parametrize(("parallel", "seq_len", "message"), [
    (ParallelSpec(tp=4, cp=3), 6144, "tp 4 x pp 1 x cp 3 = 12 does not divide the 16 GPUs"),
    (ParallelSpec(cp=4), 8196, "must split into 2 x cp = 8 equal chunks"),
])
def test_bad_context_parallel_layouts_are_errors(parallel: ParallelSpec, seq_len: int, message: str) -> None:
    training = TrainingSpec(model=LLAMA, seq_len=seq_len, parallel=parallel)
    with pytest.raises(ConfigError, match=message):
        predict_step(load_preset("dgx-h100", nodes=2), training, LLAMA)


def test_ring_attention_needs_a_fused_kernel() -> None:
    with pytest.raises(ConfigError, match="fused attention kernel"):
        predict_step(load_preset("dgx-h100", nodes=2), job(2, 8192, flash_attention=False), LLAMA)


@settings(max_examples=10, deadline=None)
@given(cp=st.sampled_from([2, 4, 8]), seq_len=st.sampled_from([8192, 32768]), tp=st.sampled_from([1, 2]))
def test_halving_network_bandwidth_never_speeds_a_context_parallel_step(cp: int, seq_len: int, tp: int) -> None:
    """Two H100 nodes, CP rings within or across nodes: with half the NIC bandwidth no step gets faster, and
    the idle time stays within the step."""
    base = load_preset("dgx-h100", nodes=2)
    assert base.inter_node is not None
    slow = base.model_copy(update={"inter_node": base.inter_node.model_copy(
        update={"nic_gbps": base.inter_node.nic_gbps / 2})})
    training = job(cp, seq_len, tp)
    fast_p, slow_p = (predict_step(topology, training, LLAMA) for topology in (base, slow))
    assert slow_p.step_time_s >= fast_p.step_time_s * (1 - 1e-9)
    assert 0.0 <= fast_p.gpu_idle_s <= fast_p.step_time_s


def test_all_to_all_volumes_per_layer() -> None:
    """DeepSpeed-Ulysses: per pass of a layer one all-to-all of q, k and v (2 B x 16384 local tokens x
    (4096 + 2 x 1024) / tp) and one of the output (2 B x 16384 x 4096 / tp) over the whole CP group."""
    calls = ulysses_calls(transformer(LLAMA), 1, 65536, 2, 4, passes=3)
    assert [(c.op, c.group, c.count) for c in calls] == [("alltoall", "cp:all", 3)] * 2
    assert [c.size_bytes for c in calls] == [2 * 16384 * 6144 // 2, 2 * 16384 * 4096 // 2]
    assert ulysses_calls(transformer(LLAMA), 1, 65536, 2, 1, passes=3) == []


def test_all_to_all_context_parallelism_waits_for_its_all_to_alls() -> None:
    """CP 8 on one H100 node, a2a, gradients all-reduced after the backward: each pass of each layer
    (forward, recompute, backward) waits for its two
    all-to-alls (nothing hides them): booked as cp_comm, hand-computed from the collective model; the p2p
    ring of the same job hides behind attention at 64k tokens. Heads that tp x cp does not divide: error."""
    topology = load_preset("dgx-h100", nodes=1)
    serial = StrategySpec(kind="ddp", overlap_grad_reduce=False)  # no other traffic during the passes
    a2a = job(8, 65536).model_copy(update={"parallel": ParallelSpec(cp=8, cp_comm="a2a"), "strategy": serial})
    p = predict_step(topology, a2a, LLAMA)
    view = communicators(comm_view(build(topology)), layout_of(a2a.parallel, 8, 8))["cp:all"]
    per_pass = sum(predict_collective(view, c.op, c.size_bytes).time_s
                   for c in ulysses_calls(transformer(LLAMA), 1, 65536, 1, 8, 1))
    # the last backward pass's all-to-alls run beside the gradient all-reduce, which books that wait
    assert p.comm_by_collective_s["cp_comm"] == pytest.approx((3 * LLAMA.layers - 1) * per_pass, rel=1e-6)
    assert predict_step(topology, job(8, 65536), LLAMA).comm_by_collective_s.get("cp_comm", 0.0) == 0.0
    sixteen = job(16, 65536).model_copy(update={"parallel": ParallelSpec(cp=16, cp_comm="a2a")})
    with pytest.raises(ConfigError, match="must divide the attention heads"):
        predict_step(load_preset("dgx-h100", nodes=2), sixteen, LLAMA)
