"""Layout search: enumeration rules, memory filter, the estimate's pipeline bubble, ranking."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from simulator.collectives.comm import comm_view
from simulator.core.errors import ConfigError
from simulator.training.compute import ComputeModel
from simulator.training.predict import predict_step
from simulator.training.search import (
    CandidateLayout,
    SearchSpace,
    describe,
    enumerate_layouts,
    estimate_step_s,
    search_layouts,
)
from simulator.validation.training_cases import map_case, parse_cases
from topologies.build import build
from topologies.presets import load_preset
from workloads.model import transformer
from workloads.presets import load_model
from workloads.spec import ModelSpec, TrainingSpec

SHARED_CASES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "training" / "cases.yaml"
TINY = ModelSpec(name="tiny", layers=4, hidden=256, heads=4, vocab=1024, max_seq_len=256)
SPACE = SearchSpace(micro_batches=(1, 2), recompute=("none",))


def test_enumeration_lists_exactly_the_valid_layouts():
    """4 layers, 4 heads, 8 GPUs of 4 per node, global batch 8, micro-batch 1 or 2: TP in {1, 2, 4}
    (divides the node and the heads), PP in {1, 2, 4} (divides the layers), TP x PP divides 8; fsdp
    only with PP 1; one strategy (ddp) with DP 1; SP with TP > 1. Listed by hand."""
    got = {(lay.tp, lay.pp, lay.dp, lay.micro_batch, lay.micro_steps, lay.strategy, lay.sequence_parallel)
           for lay in enumerate_layouts(TINY, 4, 8, 8, SPACE)}
    expected = set()
    for tp, pp, dp, batches, kinds in [
        (1, 1, 8, [1], ["ddp", "zero1", "fsdp"]),  # micro-batch 2 x 8 ranks = 16 > 8
        (1, 2, 4, [1, 2], ["ddp", "zero1"]),
        (1, 4, 2, [1, 2], ["ddp", "zero1"]),
        (2, 1, 4, [1, 2], ["ddp", "zero1", "fsdp"]),
        (2, 2, 2, [1, 2], ["ddp", "zero1"]),
        (2, 4, 1, [1, 2], ["ddp"]),
        (4, 1, 2, [1, 2], ["ddp", "zero1", "fsdp"]),
        (4, 2, 1, [1, 2], ["ddp"]),  # (4, 4) needs 16 GPUs
    ]:
        expected |= {(tp, pp, dp, b, 8 // (b * dp), kind, tp > 1) for b in batches for kind in kinds}
    assert got == expected
    assert len(expected) == 31


def test_every_layout_uses_every_gpu_and_divides_the_batch():
    """tp x pp x dp = GPUs and micro-batch x micro-steps x dp = global batch, for a 175B model on 1,024 GPUs."""
    model = load_model("gpt3-175b")
    layouts = enumerate_layouts(model, 8, 1024, 1536, SearchSpace(interleaved=True))
    assert layouts
    for lay in layouts:
        assert lay.tp * lay.pp * lay.dp == 1024
        assert lay.micro_batch * lay.micro_steps * lay.dp == 1536
        assert model.heads % lay.tp == 0 and model.layers % lay.pp == 0 and lay.pipeline_split == "layers"


def test_pipelines_that_divide_only_the_layers_plus_two_count_the_embedding_and_loss():
    """Llama 3 405B (126 layers) on 2,048 GPUs: PP 16 divides 126 + 2, so it is enumerated with the embedding
    and the loss counted as layers (as Llama 3 trained), interleaved x2 too (128 % 32 == 0); PP 7 (divides
    126) keeps the plain split; the layouts run (a one-layout search predicts them)."""
    model = load_model("llama3-405b")
    space = SearchSpace(tp=(8,), micro_batches=(1,), strategies=("zero1",), recompute=("selective",),
                        interleaved=True)
    layouts = enumerate_layouts(model, 8, 2048, 2048, space)
    splits = {(lay.pp, lay.virtual_stages): lay.pipeline_split for lay in layouts}
    assert splits[16, 1] == splits[16, 2] == "embedding_and_loss"
    assert splits[2, 1] == "layers" and (7, 1) not in splits  # 8 x 7 does not divide 2,048
    assert all((126 if lay.pipeline_split == "layers" else 128) % (lay.pp * lay.virtual_stages) == 0
               for lay in layouts)
    # 14 layers on PP 2: 14 does not divide over 2 x 2 chunks, 14 + 2 does
    small = ModelSpec(name="m14", layers=14, hidden=256, heads=4, vocab=1024, max_seq_len=256)
    got = {(lay.virtual_stages, lay.pipeline_split)
           for lay in enumerate_layouts(small, 4, 8, 16, replace(space, tp=(1,), pp=(2,)))}
    assert got == {(1, "layers"), (2, "embedding_and_loss")}
    pp16 = next(lay for lay in layouts if (lay.pp, lay.virtual_stages) == (16, 2))
    assert "embedding and loss counted as layers" in describe(pp16)
    assert pp16.training(TrainingSpec(model=model, seq_len=8192, global_batch=2048)).parallel.pipeline_split == (
        "embedding_and_loss")


def test_interleaving_needs_layers_and_micro_batches_to_divide():
    """--interleaved adds 2 virtual stages only where layers % (2 pp) == 0 and micro-steps % pp == 0
    (Megatron's conditions): 4 layers allow it at PP 2, not at PP 4."""
    layouts = enumerate_layouts(TINY, 4, 8, 8, SearchSpace(micro_batches=(1,), recompute=("none",),
                                                           strategies=("ddp",), interleaved=True))
    interleaved = {(lay.tp, lay.pp) for lay in layouts if lay.virtual_stages == 2}
    assert interleaved == {(1, 2), (2, 2), (4, 2)}
    assert all(lay.schedule == "interleaved" for lay in layouts if lay.virtual_stages == 2)


@pytest.mark.parametrize(
    ("space", "batch", "needle"),
    [
        (SearchSpace(tp=(3,)), 8, "--tp 3"),
        (SearchSpace(pp=(5,)), 8, "--pp 5"),  # 5 divides neither the 4 layers nor 4 + 2
        (SearchSpace(tp=(1,), pp=(1,), micro_batches=(1, 2)), 12, "--global-batch 12"),
    ],
)
def test_impossible_requests_name_the_option(space, batch, needle):
    """An invalid degree, or a global batch no layout divides: ConfigError naming the option."""
    with pytest.raises(ConfigError, match=needle):
        enumerate_layouts(TINY, 4, 8, batch, space)


def test_a_layout_keeps_the_jobs_recompute_layers_only_with_full_recomputation():
    """A job recomputing 2 of its 4 layers: a full-recomputation layout keeps the 2, the others drop the count
    (it belongs to full recomputation) instead of failing validation."""
    base = TrainingSpec(model=TINY, seq_len=256, global_batch=8, activation_checkpointing="full", recompute_layers=2)
    layouts = {recompute: CandidateLayout(tp=1, pp=1, dp=8, micro_batch=1, micro_steps=1, strategy="fsdp",
                                          recompute=recompute) for recompute in ("none", "selective", "full")}
    assert {name: lay.training(base).recompute_layers for name, lay in layouts.items()} == {
        "none": None, "selective": None, "full": 2}


def test_estimate_pays_the_pipeline_bubble():
    """With one data-parallel rank (no gradient reduction), a 4-stage pipeline takes (m + 3) stage
    times for m micro-batches: 8 micro-batches cost 11/4 of one, apart from the optimizer step."""
    topology = load_preset("dgx-a100")
    cluster = build(topology)
    model = transformer(TINY)
    compute = ComputeModel(cluster.gpu, "bf16")
    base = TrainingSpec(model=TINY, seq_len=256, global_batch=8)
    one, eight = (CandidateLayout(tp=2, pp=4, dp=1, micro_batch=1, micro_steps=m, strategy="ddp", recompute="none",
                         sequence_parallel=True) for m in (1, 8))
    optimizer_s = compute.optimizer(model.total_params / 8, "adamw")
    step = [estimate_step_s(lay, lay.training(base), model, compute, comm_view(cluster), 256) - optimizer_s
            for lay in (one, eight)]
    assert step[1] / step[0] == pytest.approx(11 / 4)


def test_nothing_fits_is_an_error_naming_the_need():
    """GPT-3 175B on one DGX A100 (8 x 80 GiB): 16 bytes of model state per parameter alone is 350 GB
    per GPU, so no layout fits."""
    base = TrainingSpec(model="gpt3-175b", global_batch=8)
    with pytest.raises(ConfigError, match="no layout fits in 80 GiB"):
        search_layouts(load_preset("dgx-a100"), base, load_model("gpt3-175b"), SearchSpace())


@pytest.fixture(scope="module")
def tiny_result():
    base = TrainingSpec(model=TINY, seq_len=256, global_batch=64)
    return search_layouts(load_preset("dgx-a100"), base, TINY, SearchSpace(micro_batches=(1, 2)), keep=12, slack=100.0)


def test_search_returns_fitting_layouts_over_every_gpu(tiny_result):
    """Every ranked layout was simulated, fits in memory and uses tp x pp x dp = 8 GPUs."""
    assert tiny_result.ranked
    assert tiny_result.predicted == 12 and len(tiny_result.ranked) + len(tiny_result.failed) <= 12
    for r in tiny_result.ranked:
        assert r.prediction.fits_in_memory
        assert r.layout.tp * r.layout.pp * r.layout.dp == 8


def test_search_ranks_by_predicted_throughput(tiny_result):
    """Best first: predicted tokens/s never increases down the list."""
    rates = [r.prediction.tokens_per_s for r in tiny_result.ranked]
    assert rates == sorted(rates, reverse=True)


def test_kept_layouts_cover_the_shapes_first(tiny_result):
    """The simulated layouts are the best of each TP x PP shape before any second variant: 12 kept
    of the tiny model's 8 shapes on one node cover all 8."""
    shapes = {(r.layout.tp, r.layout.pp) for r in tiny_result.ranked} | {
        (lay.tp, lay.pp) for lay, _ in tiny_result.failed}
    assert len(shapes) == 8


def test_selective_recompute_is_dropped_with_flash_attention(tiny_result):
    """Flash attention keeps no s x s scores, so selective recomputation only adds work: not tried."""
    assert all(r.layout.recompute != "selective" for r in tiny_result.ranked)


def test_slack_limits_simulation_to_the_promising():
    """With slack 1 only the layouts estimated as fast as the best one are simulated."""
    base = TrainingSpec(model=TINY, seq_len=256, global_batch=64)
    result = search_layouts(load_preset("dgx-a100"), base, TINY, SearchSpace(micro_batches=(1, 2)), slack=1.0)
    assert result.predicted == result.promising >= 1
    assert len({r.estimated_step_s for r in result.ranked}) == 1
    assert result.fit_in_memory > result.promising


def test_context_parallel_sizes_are_searched_where_the_sequence_splits():
    """--cp 1,2,4 on 8 GPUs with a 256-token sequence: CP joins TP x PP in dividing the GPUs; data
    parallelism takes the rest (dp = 8 / (tp pp cp)); a CP size the sequence cannot split into 2 cp
    chunks, or without a fused attention kernel, is refused naming --cp."""
    layouts = enumerate_layouts(TINY, 4, 8, 8, SearchSpace(micro_batches=(1,), recompute=("none",), cp=(1, 2, 4)),
                                seq_len=256)
    assert {lay.cp for lay in layouts} == {1, 2, 4}
    assert all(lay.tp * lay.pp * lay.cp * lay.dp == 8 for lay in layouts)
    assert all(lay.training(TrainingSpec(model=TINY, global_batch=8)).parallel.cp == lay.cp for lay in layouts)
    with pytest.raises(ConfigError, match="--cp 3"):
        enumerate_layouts(TINY, 4, 8, 8, SearchSpace(cp=(3,)), seq_len=256)
    with pytest.raises(ConfigError, match="--cp 2"):
        enumerate_layouts(TINY, 4, 8, 8, SearchSpace(cp=(2,)), seq_len=256, flash_attention=False)


def test_context_parallelism_is_searched_across_pipeline_stages():
    """TP 2 x PP 2 x CP 2 on 8 GPUs: the search simulates the layout (each stage's ring over its CP pair) and
    reports exactly what predict_step says for it."""
    base = TrainingSpec(model=TINY, global_batch=8)
    space = SearchSpace(tp=(2,), pp=(2,), cp=(2,), micro_batches=(1,), strategies=("zero1",), recompute=("full",))
    cluster = load_preset("dgx-a100", nodes=1)
    result = search_layouts(cluster, base, TINY, space)
    best = result.ranked[0]
    assert (best.layout.tp, best.layout.pp, best.layout.cp, best.layout.dp) == (2, 2, 2, 1)
    direct = predict_step(cluster, best.layout.training(base), TINY)
    assert best.prediction.step_time_s == pytest.approx(direct.step_time_s, rel=1e-12)
    assert {span.stage for span in direct.spans if span.stream == "cp"} == {0, 1}  # a ring on every stage
    assert direct.idle_breakdown_s["pipeline_bubble"] > 0.0


@pytest.mark.skipif(not SHARED_CASES.exists(), reason="../shared/data not beside the checkout")
def test_plan_finds_torchtitan_context_parallel_layout():
    """torchtitan's Table 2 ran Llama 3.1 8B at 128k tokens on 8 H100 as FSDP 2 x CP 4 (full recompute,
    one sequence per rank). Searching CP 1-8, TP, FSDP or ZeRO-1 on its hardware ranks that layout in
    the top 5, and a context-parallel layout first (TP alone fits, but its collectives of the 128k-token
    activations are exposed where the key/value ring hides behind attention). Where nothing fits
    without CP (1M tokens), the error says to try it."""
    case = next(c for c in parse_cases(SHARED_CASES.read_text(), "cases.yaml")
                if c.id == "torchtitan-t2-8b-8gpu-fsdp2-cp4")
    mapped = map_case(case)
    base = mapped.training.model_copy(update={"global_batch": 2, "grad_accum": None})
    space = SearchSpace(micro_batches=(1, 2), strategies=("zero1", "fsdp"), recompute=("full",), cp=(1, 2, 4, 8))
    result = search_layouts(mapped.topology, base, mapped.model, space)
    top = [(r.layout.tp, r.layout.cp, r.layout.dp, r.layout.strategy) for r in result.ranked[:5]]
    assert (1, 4, 2, "fsdp") in top and result.ranked[0].layout.cp > 1
    long = base.model_copy(update={"seq_len": 1048576, "global_batch": 1})
    with pytest.raises(ConfigError, match="or --cp to split the sequence"):
        search_layouts(mapped.topology, long, mapped.model, replace(space, cp=(1,)))


def test_expert_parallel_sizes_are_searched_where_they_divide():
    """--ep 1,2,4 for a 4-expert model on 8 GPUs: EP divides the experts and the data- x context-parallel
    ranks (so TP 4 x DP 2 takes EP 1 and 2 only), and with TP > 1 comes with sequence parallelism; unasked,
    every divisor of the experts is tried (1 for a dense model); a size not dividing the experts, or EP for a
    dense model, is refused naming --ep."""
    moe = TINY.model_copy(update={"experts": 4, "experts_per_token": 2})
    space = SearchSpace(micro_batches=(1,), recompute=("none",), sequence_parallel=(False, True), ep=(1, 2, 4))
    layouts = enumerate_layouts(moe, 4, 8, 8, space)
    assert {lay.ep for lay in layouts} == {1, 2, 4}
    assert all((lay.dp * lay.cp) % lay.ep == 0 for lay in layouts)
    assert {lay.ep for lay in layouts if lay.tp == 4} == {1, 2}
    assert all(lay.sequence_parallel for lay in layouts if lay.ep > 1 and lay.tp > 1)
    assert all(lay.training(TrainingSpec(model=moe, global_batch=8)).parallel.ep == lay.ep for lay in layouts)
    by_default = enumerate_layouts(moe, 4, 8, 8, SearchSpace(micro_batches=(1,), recompute=("none",)))
    assert {lay.ep for lay in by_default} == {1, 2, 4}  # every divisor of the experts, unasked
    assert {lay.ep for lay in enumerate_layouts(TINY, 4, 8, 8, SPACE)} == {1}
    with pytest.raises(ConfigError, match="--ep 3"):
        enumerate_layouts(moe, 4, 8, 8, SearchSpace(ep=(3,)))
    with pytest.raises(ConfigError, match="--ep 2"):
        enumerate_layouts(TINY, 4, 8, 8, SearchSpace(ep=(2,)))


def test_plan_searches_expert_parallelism_for_a_mixture_of_experts():
    """Mixtral 8x7B on 8 DGX H100 nodes with --ep 1,8: layouts with EP 8 are simulated and ranked beside EP 1,
    each with its EP in the result; the simulation books their all-to-alls."""
    space = SearchSpace(micro_batches=(1,), strategies=("fsdp",), recompute=("full",), tp=(1,), pp=(1,), ep=(1, 8))
    base = TrainingSpec(model="mixtral-8x7b", global_batch=64, seq_len=4096)
    result = search_layouts(load_preset("dgx-h100", nodes=8), base, load_model("mixtral-8x7b"), space)
    assert {r.layout.ep for r in result.ranked} == {1, 8}
    expert = next(r for r in result.ranked if r.layout.ep == 8)
    assert expert.prediction.comm_by_collective_s.get("ep_comm", 0.0) > 0.0


def test_hsdp_is_enumerated_with_the_expert_parallelism_its_shard_group_holds():
    """HSDP's shard group in the search is a node's data-parallel ranks, and expert parallelism runs inside it: on
    4-GPU nodes a 4-expert mixture gets HSDP with EP 1, 2 and 4 at TP 1 (4 ranks a node), EP 1 and 2 at TP 2
    (2 ranks a node), where FSDP takes every EP dividing the 8 / TP data-parallel ranks; each HSDP layout predicts
    (the first refused layout would end the search)."""
    moe = TINY.model_copy(update={"experts": 4, "experts_per_token": 2})
    space = SearchSpace(micro_batches=(1,), recompute=("none",), strategies=("hsdp", "fsdp"), tp=(1, 2), pp=(1,))
    layouts = enumerate_layouts(moe, 4, 8, 8, space)
    assert {(lay.tp, lay.ep) for lay in layouts if lay.strategy == "hsdp"} == {(1, 1), (1, 2), (1, 4), (2, 1), (2, 2)}
    assert {(lay.tp, lay.ep) for lay in layouts if lay.strategy == "fsdp"} == {(1, 1), (1, 2), (1, 4), (2, 1), (2, 2),
                                                                             (2, 4)}
    topology = load_preset("dgx-a100", nodes=2, gpus_per_node=4)
    base = TrainingSpec(model=moe, global_batch=8)
    for lay in layouts:
        if lay.strategy == "hsdp":
            assert predict_step(topology, lay.training(base), moe).step_time_s > 0


def test_layouts_the_scenarios_settings_rule_out_are_skipped_and_counted():
    """A scenario's own settings may not run with every layout: FSDP HYBRID_SHARD over shard groups of 8 ranks is
    refused by predict where tensor parallelism leaves fewer data-parallel ranks, so the search skips those
    layouts, counts them as ruled out and ranks the rest; TP overlap is dropped for layouts without TP (not a
    pydantic traceback). A base whose settings rule out every layout is one ConfigError naming the first
    refused."""
    topology = load_preset("dgx-h100", nodes=1)
    space = SearchSpace(micro_batches=(1,), recompute=("none",), strategies=("fsdp",))
    hybrid = TrainingSpec(model=TINY, global_batch=8, strategy={"kind": "fsdp", "fsdp_sharding": "HYBRID_SHARD",
                                                               "shard_group_gpus": 8})
    result = search_layouts(topology, hybrid, TINY, space)
    assert result.ruled_out > 0
    assert result.ranked and all(r.layout.tp == r.layout.pp == 1 for r in result.ranked)
    overlapped = TrainingSpec(model=TINY, global_batch=8, strategy={"kind": "zero1"},
                              parallel={"tp": 2, "sequence_parallel": True, "tp_comm_overlap": True})
    result = search_layouts(topology, overlapped, TINY, replace(space, strategies=("zero1",)))
    assert result.ruled_out == 0 and {r.layout.tp for r in result.ranked} >= {1}
    assert all(r.prediction.step_time_s > 0 for r in result.ranked)
    with pytest.raises(ConfigError, match="no layout can run with the scenario's settings.*shard_group_gpus 8"):
        search_layouts(topology, hybrid, TINY, replace(space, tp=(2,)))
    # a base in ZeRO-1 optimizer groups: its group goes with zero1 layouts only; the others run without one
    grouped = TrainingSpec(model=TINY, global_batch=8, strategy={"kind": "zero1", "shard_group_gpus": 4})
    result = search_layouts(topology, grouped, TINY, replace(space, strategies=("zero1", "zero2", "ddp"), tp=(1,),
                                                             pp=(1,)))
    assert result.ruled_out == 0 and {r.layout.strategy for r in result.ranked} == {"zero1", "zero2", "ddp"}
    optimizer = {r.layout.strategy: r.prediction.memory.optimizer_bytes for r in result.ranked}
    assert optimizer["zero1"] == pytest.approx(2 * optimizer["zero2"], rel=1e-9)  # over 4 ranks, not 8
    moe = TINY.model_copy(update={"experts": 4, "experts_per_token": 2})
    a2a = TrainingSpec(model=moe, global_batch=8, strategy={"kind": "zero1"},
                       parallel={"ep": 2, "ep_comm_overlap": True})
    result = search_layouts(topology, a2a, moe, replace(space, strategies=("zero1",), tp=(1,), pp=(1,)))
    assert result.ruled_out == 0 and {r.layout.ep for r in result.ranked} >= {1, 2}
