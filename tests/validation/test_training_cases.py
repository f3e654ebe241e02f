"""Training cases: parsing, lowering onto specs, metric choice and conversion, baselines, pairs.

Every prediction here comes from a fake predictor whose throughput is a known function of the case,
so the figures are checked by hand, independently of the real simulator.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.core.errors import ConfigError, TopologyError
from simulator.training.predict import predict_step
from simulator.training.prediction import MemoryBreakdown, StepPrediction
from simulator.validation.training_cases import map_case, parse_cases
from simulator.validation.training_cluster import topology_of
from simulator.validation.training_report import (
    choose_metric,
    counted_share,
    counts_causal_half,
    evaluate,
    find_change_pairs,
    lookup_table_predictions,
    memory_summary,
    predicted_metric,
    published_memory_bytes,
    report_to_json,
)
from workloads.model import transformer

SHARED_CASES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "training" / "cases.yaml"

# The published llmfoundry MPT-70b entry (FSDP FULL_SHARD, 512 H100), as in cases.yaml.
FOUNDRY_70B: dict[str, Any] = {
    "id": "llmfoundry-70b-h100_80gb-amp_bf16-seq2048-g512-mb8-ga1",
    "source": {"title": "LLM Foundry benchmarks", "url": "https://github.com/mosaicml/llm-foundry", "table": "H100"},
    "model": {"name": "MPT-70b", "params": 64862437376, "layers": 80, "hidden": 8192, "heads": 64, "ffn": 32768,
              "seq_len": 2048, "vocab": 50368},
    "training": {"framework": "Composer/LLM Foundry (PyTorch FSDP)", "strategy": ["fsdp"],
                 "fsdp_sharding_strategy": "FULL_SHARD", "micro_batch": 8, "grad_accum": 1, "global_batch": 4096,
                 "global_batch_tokens": 8388608, "precision": "amp_bf16", "fsdp_mixed_precision_mode": "DEFAULT",
                 "activation_checkpointing": True, "activation_cpu_offload": False},
    "cluster": {"gpu": "h100_80gb", "gpus_per_node": None, "nodes": None, "num_gpus": 512, "intra_node": None,
                "inter_node": "not stated", "inter_node_bw_per_node": None},
    "metrics": {"MFU_%": 41.25, "HFU_%": 55.0, "model_TFLOP_per_GPU": 408, "throughput_samples_per_s": 251,
                "throughput_tokens_per_s": 515636, "throughput_tokens_per_s_per_GPU": 1007},
    "note": "MFU/HFU use the README formula incl. attention FLOPs.",
}

# The BLOOM-176B production layout (Megatron-DeepSpeed TP=4 x PP=12 x DP=8 + ZeRO-1), as in cases.yaml.
BLOOM_176B: dict[str, Any] = {
    "id": "bloom-176b-production-384gpu",
    "model": {"name": "BLOOM-176B", "params": "176B", "layers": 70, "hidden": 14336, "heads": 112, "ffn": None,
              "seq_len": 2048, "vocab": 250680},
    "training": {"framework": "Megatron-DeepSpeed", "strategy": ["tp", "pp", "dp", "zero1"], "tp": 4, "pp": 12,
                 "dp": 8, "micro_batch": 2, "global_batch": 2048, "precision": "bf16",
                 "activation_checkpointing": True, "zero_stage": "0 (bf16 optimizer implements its own ZeRO-1)"},
    "cluster": {"gpu": "A100 80GB (Jean Zay)", "gpus_per_node": 8, "nodes": 48, "num_gpus": 384,
                "inter_node": "Omni-Path Architecture (OPA), 4 OmniPath links per node",
                "inter_node_bw_per_node": "not stated"},
    "metrics": {"elapsed_time_per_iteration_s": 104.7, "samples_per_second": 19.561, "TFLOPs_per_GPU": 149.77},
    "note": "TFLOPs reported by Megatron-DeepSpeed are hardware TFLOPs including activation recompute (4*2 "
            "coefficient), per README.",
}


def case(base: dict[str, Any] = FOUNDRY_70B, **sections: dict[str, Any] | str) -> dict[str, Any]:
    """A copy of `base` with keys of its sections replaced (`id=` and `note=` replace the whole value)."""
    out = copy.deepcopy(base)
    for name, value in sections.items():
        if isinstance(value, dict):
            out.setdefault(name, {}).update(value)
        else:
            out[name] = value
    return out


def parse(*entries: dict[str, Any]):
    return parse_cases(yaml.safe_dump(list(entries)), "cases.yaml")


def mapped(entry: dict[str, Any]):
    return map_case(parse(entry)[0])


def fake_prediction(n_gpus: int, tokens_per_step: int, tokens_per_s_per_gpu: float, flops_per_token: float = 6e9,
                    peak_tflops: float = 1000.0) -> StepPrediction:
    """A prediction with the given throughput: step time = tokens / (GPUs x tokens/s/GPU)."""
    step = tokens_per_step / (n_gpus * tokens_per_s_per_gpu)
    return StepPrediction(step_time_s=step, compute_s=step, exposed_comm_s=0.0, idle_breakdown_s={},
                          tokens_per_step=tokens_per_step, n_gpus=n_gpus,
                          model_flops_per_step=flops_per_token * tokens_per_step, peak_tflops=peak_tflops,
                          memory=MemoryBreakdown(1.0, 0.0, 0.0, 0.0, 0.0, 0.0), memory_capacity_bytes=2.0)


def fake_predictor(topology, training, model) -> StepPrediction:
    """tokens/s/GPU = 1000 x layers / 32 on one node, 10% less on more (6 GFLOP per token)."""
    n_gpus = topology.gpus_per_node * topology.nodes
    n_dp = n_gpus // (training.parallel.tp * training.parallel.pp)
    accum = training.global_batch // (training.micro_batch * n_dp) if training.global_batch else \
        training.grad_accum or 1
    tokens = training.micro_batch * accum * n_dp * training.seq_len
    rate = 1000.0 * model.layers / 32 * (0.9 if topology.nodes > 1 else 1.0)
    return fake_prediction(n_gpus, tokens, rate)


# --- parsing --------------------------------------------------------------------------------------

@pytest.mark.skipif(not SHARED_CASES.exists(), reason="shared data not checked out next to the repo")
def test_every_shared_case_parses_and_maps():
    """Every entry of the shared cases.yaml parses and lowers (to specs or a skip reason); the complete
    LLM Foundry FSDP cases are all expressed."""
    text = SHARED_CASES.read_text()
    cases = parse_cases(text, str(SHARED_CASES))
    assert len(cases) == len(yaml.safe_load(text))
    results = [map_case(c) for c in cases]
    for m in results:
        assert (m.skipped is None) == (m.topology is not None and m.training is not None and m.model is not None)
    foundry = [m for m in results if m.case.source == "llmfoundry"]
    assert foundry and all(m.skipped is None and m.family == "fsdp" for m in foundry)


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("- {id: a, model: {}, training: {strategy: [fsdp]}, cluster: {gpu: x}}", ["case a", "metrics"]),
        (yaml.safe_dump([case(training={"micro_batch": "eight"})]), [FOUNDRY_70B["id"], "training.micro_batch"]),
        (yaml.safe_dump([case(model={"seq_len": "long"})]), [FOUNDRY_70B["id"], "model.seq_len"]),
        (yaml.safe_dump([case(id="")]), ["case #0", "id"]),
        (yaml.safe_dump([FOUNDRY_70B, FOUNDRY_70B]), [FOUNDRY_70B["id"], "duplicate"]),
        ("id: a", ["expected a YAML list"]),
        ("- [unclosed", ["not valid YAML"]),
    ],
)
def test_malformed_input_names_the_case_and_field(text, needles):
    """Malformed cases, read strictly: ConfigError naming the file, the case (id, or index) and the field."""
    with pytest.raises(ConfigError) as err:
        parse_cases(text, "cases.yaml", strict=True)
    assert all(needle in str(err.value) for needle in ["cases.yaml", *needles]), str(err.value)


def test_a_malformed_case_is_skipped_with_its_reason_and_the_others_run():
    """Read as `validate-training` reads by default: a malformed case (a field of the wrong type, a repeated id,
    an entry that is no mapping) is kept as a skipped case whose reason names the case and the field, and the
    good case beside it is lowered."""
    bad_type = case(id="bad", training={"micro_batch": "eight"})
    cases = parse_cases(yaml.safe_dump([FOUNDRY_70B, bad_type, FOUNDRY_70B, "just text"]), "cases.yaml")
    assert [(c.id, c.problem is None) for c in cases] == [
        (FOUNDRY_70B["id"], True), ("bad", False), ("case #2", False), ("case #3", False)]
    skipped = [map_case(c).skipped for c in cases]
    assert skipped[0] is None
    assert "case bad: training.micro_batch" in skipped[1] and "duplicate" in skipped[2]
    assert "case #3: expected a mapping" in skipped[3]
    assert not any(map_case(c).in_scope for c in cases[1:])


def test_numbers_written_as_text_and_text_written_as_numbers_are_read():
    """'2,048' or 2048.0 for an integer field is 2048, 400 for a text field '400'; 'eight' stays an error (above)."""
    entry = case(training={"micro_batch": "8", "global_batch": "4,096", "grad_accum": 1.0},
                 cluster={"num_gpus": "512", "inter_node": 400})
    parsed = parse(entry)[0]
    assert (parsed.training["micro_batch"], parsed.training["global_batch"], parsed.training["grad_accum"]) == \
        (8, 4096, 1)
    assert (parsed.cluster["num_gpus"], parsed.cluster["inter_node"]) == (512, "400")
    assert mapped(entry).skipped is None



@pytest.mark.parametrize(("field", "written", "read"), [
    ("global_batch", "GBS 4096", 4096), ("global_batch", "4,096 sequences", 4096), ("micro_batch", "8 (per GPU)", 8),
    ("micro_batch", "MBS=8", 8), ("tp", "TP1", 1),
])
def test_counts_written_with_their_label_or_noun_are_read(field: str, written: str, read: int):
    """'GBS 4096', '4,096 sequences', '8 (per GPU)', 'MBS=8': the count; the case lowers as with the number."""
    numbers = case(training={"micro_batch": 8, "global_batch": 4096, "tp": 1})
    worded = case(training={"micro_batch": 8, "global_batch": 4096, "tp": 1, field: written})
    assert parse(worded)[0].training[field] == read
    assert mapped(worded).training == mapped(numbers).training


@pytest.mark.parametrize("written", ["4M tokens", "4,194,304 tokens", "4096 (tokens)"])
def test_a_batch_in_tokens_is_not_read_as_sequences(written: str):
    """A global batch written in tokens is refused naming the field, not taken for that many sequences."""
    assert "training.global_batch" in mapped(case(training={"global_batch": written})).skipped


def test_strategy_degrees_fill_unstated_fields_only():
    """'TP2/PP2' with no tp and pp fields lowers as tp 2, pp 2; a stated field wins over the item's degree."""
    by_items = mapped(case(training={"strategy": "TP2/PP2/DP", "tp": None, "pp": None}, cluster={"num_gpus": 16}))
    by_fields = mapped(case(training={"strategy": ["tp", "pp", "dp"], "tp": 2, "pp": 2}, cluster={"num_gpus": 16}))
    assert by_items.training == by_fields.training
    stated = mapped(case(training={"strategy": "TP4/PP2/DP", "tp": 2, "pp": 2}, cluster={"num_gpus": 16}))
    assert stated.training == by_fields.training


@pytest.mark.parametrize("name", ["Llama 3.0 70B", "Llama3-70B (dense)", "Meta-Llama-3-70B",
                                  "meta-llama/Meta-Llama-3-70B"])
def test_a_released_models_name_with_a_remark_a_release_dot_zero_or_its_owner_is_the_model(name: str):
    """Named only, these take Llama 3 70B's public config as 'Llama 3 70B' does, and under NeMo its performance
    recipe's TP overlap (which is looked up by the name without its owner)."""
    nemo = {"framework": "NeMo 24.07", "strategy": ["tp", "pp", "dp"], "tp": 4, "pp": 4, "precision": "bf16",
            "micro_batch": 1, "global_batch": 128, "grad_accum": None}
    shape = dict.fromkeys(("params", "layers", "hidden", "heads", "ffn", "vocab"))
    reference = mapped(case(model={**shape, "name": "Llama 3 70B"}, training=nemo, cluster={"num_gpus": 64}))
    named = mapped(case(model={**shape, "name": name}, training=nemo, cluster={"num_gpus": 64}))
    assert named.skipped is None and named.model == reference.model.model_copy(update={"source": named.model.source})
    assert named.training.parallel.tp_comm_overlap is True
    assert named.training.parallel == reference.training.parallel

def test_a_case_without_gpu_is_skipped_and_one_without_strategy_takes_the_frameworks():
    """No GPU (nor an instance type): that case is skipped saying so, the others run. No strategy list: the
    framework's convention (FSDP under LLM Foundry, NeMo's distributed optimizer) or plain data parallelism,
    flagged, as for a list that names no data-parallel one."""
    no_gpu = mapped(case(cluster={"gpu": None}))
    assert no_gpu.skipped == "GPU not stated (cluster.gpu)"
    foundry = mapped(case(training={"strategy": None, "fsdp_sharding_strategy": None}))
    assert foundry.skipped is None and foundry.training.strategy.kind == "fsdp"
    assert any(d.startswith("strategy not stated: fsdp, ") for d in foundry.defaults)
    m = mapped(case(training={"strategy": None, "fsdp_sharding_strategy": None, "framework": "in-house trainer"}))
    assert m.skipped is None and m.training.strategy.kind == "ddp"
    assert "strategy not stated: plain data parallelism (ddp)" in m.defaults
    nemo = mapped(case(training={"strategy": None, "framework": "NeMo 24.07", "fsdp_sharding_strategy": None,
                                 "tp": 2, "pp": 1, "dp": 256, "micro_batch": 2, "grad_accum": None}))
    assert nemo.skipped is None and nemo.training.strategy.kind == "zero1"


@pytest.mark.parametrize(("framework", "training", "known", "fused", "flagged"), [
    ("PyTorch FSDP", {}, "pytorch-fsdp", False, True),
    ("PyTorch FSDP", {"torch_compile": True}, "pytorch-fsdp", True, False),
    ("PyTorch FSDP", {"torch_compile": "false"}, "pytorch-fsdp", False, False),  # the word, not a true string
    ("PyTorch FSDP", {"torch_compile": "off"}, "pytorch-fsdp", False, False),
    ("PyTorch FSDP", {"torch_compile": "enabled"}, "pytorch-fsdp", True, False),
    ("PyTorch DDP", {"strategy": ["ddp"], "fsdp_sharding_strategy": None}, "pytorch-ddp", False, True),
    ("torch DistributedDataParallel", {"strategy": ["ddp"], "fsdp_sharding_strategy": None, "techniques":
                                       "DDP + torch.compile"}, "pytorch-ddp", True, False),
    ("Composer/LLM Foundry (PyTorch FSDP)", {}, "llm-foundry", True, False),  # MPT's fused kernels
])
def test_plain_pytorch_runs_eager_unless_compiled(framework, training, known, fused, flagged):
    """PyTorch DDP and FSDP jobs run their element-wise ops as eager kernels unless the case says torch.compile
    (stated, or among its techniques); an unstated compile is flagged. LLM Foundry's stay fused."""
    m = mapped(case(training={"framework": framework, **training}))
    assert m.skipped is None and m.training.framework == known
    assert m.training.fused_elementwise is fused
    assert any(d.startswith("torch_compile not stated: off") for d in m.defaults) is flagged


def test_a_maxtext_case_takes_maxtexts_conventions():
    """A framework text naming MaxText takes its conventions (fp32 weights and gradient reduction)."""
    m = mapped(case(training={"framework": "MaxText (JAX)", "strategy": ["fsdp"]}))
    assert m.skipped is None and m.training.framework == "maxtext"
    assert (m.training.strategy.grad_reduce_bytes, m.training.strategy.fp32_params) == (4, True)


def test_an_internevo_case_takes_its_hybrid_zero_conventions():
    """InternEvo's hybrid ZeRO-1 all-reduces whole gradients in 512M-element buckets from the last micro-batch's
    backward hooks, in their own dtype (hybrid_zero_optim.py, utils.reduce_tensor, configs/7B_sft.py)."""
    m = mapped(case(training={"framework": "InternEvo (InternLM training framework)", "strategy": ["zero1"]}))
    assert m.skipped is None and m.training.framework == "internevo"
    s = m.training.strategy
    assert (s.kind, s.zero_grad_all_reduce, s.overlap_grad_reduce) == ("zero1", True, True)
    assert (s.zero_bucket_elements, s.grad_reduce_bytes) == (512 * 1024**2, 2)


def test_an_internevo_tensor_parallel_case_takes_its_rank_order():
    """InternEvo's process groups put tensor-parallel ranks next to each other and stride data-parallel groups by
    tp x pp (ranks tp-pp-dp), without sequence parallelism; flagged as InternEvo's, not as an unknown framework."""
    m = mapped(case(training={"framework": "InternEvo (InternLM training framework)", "strategy": ["zero1", "tp"],
                              "tp": 2, "global_batch": None, "global_batch_tokens": None}))
    assert m.skipped is None and m.training is not None
    assert (m.training.parallel.tp, m.training.parallel.placement, m.training.parallel.sequence_parallel) == \
        (2, "tp-pp-dp", False)
    assert any(d.startswith("internevo conventions") and "tp-pp-dp" in d for d in m.defaults)
    assert not any("framework not known" in d for d in m.defaults)


def test_a_case_reads_its_memory_fraction():
    """A stated memory fraction (JAX's XLA_PYTHON_CLIENT_MEM_FRACTION) bounds what the job may hold; a bad one
    leaves the case out, naming the field."""
    maxtext = {"framework": "MaxText (JAX)", "strategy": ["fsdp"]}
    m = mapped(case(training={**maxtext, "memory_fraction": 0.94}))
    assert m.skipped is None and m.training is not None and m.training.memory_fraction == 0.94
    bad = mapped(case(training={**maxtext, "memory_fraction": 1.5}))
    assert bad.training is None and bad.skipped is not None and "memory_fraction" in bad.skipped


def test_a_maxtext_case_reads_its_remat_policy_and_attention():
    """MaxText's remat_policy is that JAX policy; its 'full' is nothing_saveable (flagged), where another framework's
    full stays full; attention=cudnn_flash_te is cuDNN's kernel."""
    maxtext = {"framework": "MaxText (JAX)", "strategy": ["fsdp"]}
    m = mapped(case(training={**maxtext, "activation_checkpointing": "remat_policy save_qkv_proj",
                              "attention": "cudnn_flash_te"}))
    assert m.skipped is None and m.training is not None
    assert (m.training.activation_checkpointing, m.training.attention_kernel) == ("save_qkv_proj", "cudnn")
    full = mapped(case(training={**maxtext, "activation_checkpointing": "full"}))
    assert full.training is not None and full.training.activation_checkpointing == "nothing_saveable"
    assert any("nothing_saveable" in d for d in full.defaults)
    other = mapped(case(training={"activation_checkpointing": "full"}))
    assert other.training is not None and other.training.activation_checkpointing == "full"


@pytest.mark.parametrize(("title", "compiled", "loss", "flagged"), [
    ("torchtitan benchmark: Llama 3.1 on H100 (Dec 2024)", True, "eager", True),
    ("torchtitan docs/performance.md (2024-08)", True, "eager", True),
    ("torchtitan benchmark: Async TP, Llama 3 on H100 (June 2025)", True, "fused", False),
    ("torchtitan benchmark (June 2025)", False, "eager", False),
    ("torchtitan benchmark", True, "fused", False),
])
def test_a_compiled_torchtitan_run_compiles_its_loss_from_april_2025(title, compiled, loss, flagged):
    """torchtitan compiles its loss with the model from 2025-04 (components/loss.py): a compiled run published
    before keeps the eager loss (flagged, the month read from the source's title); one without a month or later
    takes the convention, fused when compiled."""
    entry = case(id="torchtitan-user-8b", training={"framework": "torchtitan", "torch_compile": compiled,
                                                    "activation_checkpointing": "full"})
    entry["source"] = {"title": title, "url": "https://github.com/pytorch/torchtitan"}
    m = mapped(entry)
    assert m.training is not None and m.training.cross_entropy == loss
    assert any("the loss ran eager" in d for d in m.defaults) is flagged


FMS_7B = {  # foundation-model-stack/fms-fsdp README, "Training throughput benchmarks" (commit 5e522b4, eager)
    "id": "fms-fsdp-7b-hsdp-128xa100",
    "source": {"title": "fms-fsdp README", "url": "https://github.com/foundation-model-stack/fms-fsdp"},
    "model": {"name": "Llama 2 7B", "layers": 32, "hidden": 4096, "heads": 32, "ffn": 11008, "vocab": 32000,
              "seq_len": 4096},
    "training": {"framework": "PyTorch FSDP", "strategy": ["hsdp"], "micro_batch": 2, "precision": "bf16",
                 "activation_checkpointing": False},
    "cluster": {"gpu": "A100 80GB", "gpus_per_node": 8, "nodes": 16, "num_gpus": 128,
                "inter_node_bw_per_node": "400 Gb/s"},
    "metrics": {"tokens_per_sec_per_GPU": 3700},
}


def test_fms_fsdp_eager_llama2_7b_and_its_compile_gain():
    """fms-fsdp's Llama 2 7B, HSDP on 128 A100s, no recomputation: 3,700 tokens/s per GPU eager (README at
    5e522b4), 4,550 with torch.compile (ed74fd5, 1.23x). Eager is predicted within 5% of 3,700; compiled is
    faster by the element-wise traffic eager ops add (1.10x: compile's other fusions are not modelled)."""
    def tokens_per_s(entry: dict[str, Any]) -> float:
        m = mapped(entry)
        p = predict_step(m.topology, m.training, m.model)
        return p.tokens_per_step / p.step_time_s / p.n_gpus

    hybrid = mapped(FMS_7B)
    assert hybrid.training.strategy.kind == "hsdp"
    assert not any("FULL_SHARD" in d for d in hybrid.defaults)  # named hsdp: nothing about the sharding is assumed
    eager = tokens_per_s(FMS_7B)
    compiled = tokens_per_s(case(FMS_7B, training={"torch_compile": True}))
    assert eager == pytest.approx(3700, rel=0.05)
    assert 1.05 < compiled / eager < 1.23


def test_source_is_the_first_token_of_the_id():
    """A case's source is the id up to the first dash."""
    assert parse(FOUNDRY_70B)[0].source == "llmfoundry"


# --- lowering onto specs --------------------------------------------------------------------------

def test_llmfoundry_fsdp_case_lowers_to_full_shard_on_64_dgx_h100():
    """MPT-70b on 512 H100: FSDP FULL_SHARD, micro-batch 8, global batch 4096, 64 nodes of 8, 2048 tokens,
    bf16, full recompute; GPUs per node and network are flagged defaults."""
    m = mapped(FOUNDRY_70B)
    assert m.skipped is None and m.family == "fsdp" and m.in_scope
    assert m.training.strategy.kind == "fsdp" and m.training.strategy.fsdp_sharding == "FULL_SHARD"
    assert m.training.strategy.grad_reduce_bytes == 4  # Composer mixed_precision DEFAULT reduces in fp32
    assert (m.training.micro_batch, m.training.global_batch, m.training.seq_len) == (8, 4096, 2048)
    assert (m.training.precision, m.training.activation_checkpointing) == ("bf16", "full")
    assert (m.topology.gpu, m.topology.gpus_per_node, m.topology.nodes) == ("H100-SXM5-80GB", 8, 64)
    assert (m.model.layers, m.model.hidden, m.model.heads, m.model.ffn_hidden, m.model.vocab) == \
        (80, 8192, 64, 32768, 50368)
    assert m.model.tied_embeddings and m.model.learned_positions and m.model.bias  # LLM Foundry MPTConfig
    assert any("gpus_per_node not stated" in d for d in m.defaults)
    assert any("inter-node network not stated" in d for d in m.defaults)


# The Megatron-LM README (Sep 2020) model-parallel weak-scaling row 8B on a DGX-2, as in cases.yaml.
MEGATRON_2020_8B: dict[str, Any] = {
    "id": "megatron-2020-mp-weak-dgx2-8B",
    "model": {"name": "GPT-2 style 8B", "params": "8.67B", "layers": 42, "hidden": 4096, "heads": 32, "ffn": None,
              "seq_len": 1024, "vocab": 51200},
    "training": {"framework": "Megatron-LM", "strategy": ["tp"], "tp": 8, "dp": 1, "global_batch": 8,
                 "precision": "mixed precision (fp16)"},
    "cluster": {"gpu": "V100 32GB (DGX-2)", "gpus_per_node": 16, "nodes": 1, "num_gpus": 8},
    "metrics": {"iteration_time_ms": 1407, "scaling": "74.3%", "teraFLOPs_per_GPU": 52.2},
    "note": "Weak scaling of tensor (intra-layer) model parallelism 1->8 GPUs within one node.",
}


def test_megatron_2020_tflops_count_recomputation():
    """The README's figure is SC21 eq. 3 by hand: 96 B s l h^2 (1 + s/6h + V/16lh) / 1.407 s / 8 GPUs
    = 52.2 TFLOP/s; so it counts the recomputed forward, and the run recomputes (flagged)."""
    b, s, layers, h, v = 8, 1024, 42, 4096, 51200
    flops = 96 * b * s * layers * h**2 * (1 + s / (6 * h) + v / (16 * layers * h))
    assert flops / 1.407 / 8 / 1e12 == pytest.approx(52.2, rel=2e-3)
    m = mapped(MEGATRON_2020_8B)
    assert choose_metric(m.case).hardware_flops and m.training.activation_checkpointing == "full"
    assert any("--checkpoint-activations" in d for d in m.defaults)


UNRELEASED = "MPT-70b in-house variant"  # a name no model preset is: nothing of a released shape is borrowed


def test_a_foundry_run_without_its_ffn_takes_the_presets_and_keeps_its_block():
    """LLM Foundry's MPT-70b without its FFN width: the mpt-70b preset's (32,768), flagged; the block stays the
    one LLM Foundry's benchmark runs (learned positions, biases, tied output)."""
    m = mapped(case(model={"ffn": None}))
    assert m.skipped is None and m.model.ffn_hidden == 32768
    assert (m.model.learned_positions, m.model.bias, m.model.tied_embeddings) == (True, True, True)
    assert any(d.startswith("ffn not stated: the released model's (model preset mpt-70b") for d in m.defaults)


def test_case_without_hidden_size_is_skipped():
    """No hidden size, and no released model of that name: skipped, naming the missing field."""
    m = mapped(case(model={"hidden": None, "name": UNRELEASED}))
    assert m.skipped == "model shape not stated: hidden" and m.in_scope


PREQUEL_URL = "https://github.com/bigscience-workshop/bigscience/blob/master/train/tr11-176B-ml/chronicles-prequel.md"


def test_heads_the_source_states_for_all_its_tables_fill_its_rows():
    """BigScience's chronicles-prequel states "all NHEADS=64 (above too)" once: its rows without heads take 64,
    flagged with the quote; a row of another source without heads is still skipped, naming the field."""
    prequel = case(BLOOM_176B, id="bloom-prequel-181B-n48-dp8tp8pp6-mbs2-gbs2048-h14336-l72-02-21",
                   model={"heads": None, "layers": 72}, source={"url": PREQUEL_URL, "table": "NHIDDEN=14336"})
    m = mapped(prequel)
    assert m.skipped is None and m.model is not None and m.model.heads == 64
    assert any("all NHEADS=64 (above too)" in d for d in m.defaults)
    assert mapped(case(model={"heads": None, "name": UNRELEASED})).skipped == "model shape not stated: heads"


def test_hidden_the_source_fixes_for_a_table_and_layers_from_the_stated_size():
    """The prequel's "Choosing the fastest 3D Topology" rows give only a size: NHIDDEN was fixed at 14,400 (the
    source says so) and the layers are the multiple of PP nearest the size by the source's own formula,
    l (12 h^2 + 13 h) + V h + s h + 2 h: 183B at PP 12 is 72 layers (182.8B), 194B at PP 6 is 78 (197.7B, the
    nearest multiple of 6; 72 gives 182.8B). Another table of the same source without hidden stays skipped."""
    def row(params: str, pp: int, table: str = 'section "Choosing the fastest 3D Topology"') -> dict[str, Any]:
        return case(BLOOM_176B, id=f"bloom-prequel-{params}-pp{pp}", source={"url": PREQUEL_URL, "table": table},
                    model={"name": f"BLOOM-prototype {params}", "params": params, "layers": None, "hidden": None,
                           "heads": None, "vocab": "250k"},
                    training={"tp": 8, "pp": pp, "dp": 48 // pp, "micro_batch": 1})
    h, v, s = 14400, 250_000, 2048
    assert 72 * (12 * h**2 + 13 * h) + v * h + s * h + 2 * h == pytest.approx(182.8e9, rel=1e-3)
    m = mapped(row("183B", 12))
    assert m.skipped is None and m.model is not None
    assert (m.model.layers, m.model.hidden, m.model.heads) == (72, 14400, 64)
    assert any("NHIDDEN was fixed" in d for d in m.defaults)
    assert any(d.startswith("layers not stated: 72, the multiple of PP 12 nearest the stated 183B") for d in m.defaults)
    assert mapped(row("194B", 6)).model.layers == 78  # type: ignore[union-attr]
    assert mapped(row("183B", 12, table='section "tile and wave quantization"')).skipped == \
        "model shape not stated: layers, hidden"


def test_a_size_no_layer_count_reaches_is_skipped_saying_why():
    """A stated size that no multiple of PP reaches within 3% (50B at hidden 14,400 and PP 12: 12 layers give
    33.5B, 24 give 63.4B) is skipped naming the nearest; no size at all names what is missing."""
    def row(params: str | None) -> dict[str, Any]:
        return case(BLOOM_176B, model={"params": params, "layers": None, "hidden": 14400, "heads": 64},
                    training={"tp": 8, "pp": 12, "dp": 4})
    assert mapped(row("50B")).skipped == ("model shape not stated: layers (no multiple of PP 12 gives 50B with "
                                          "hidden 14400; nearest 24 layers, 63B)")
    assert mapped(row(None)).skipped == ("model shape not stated: layers (nor a size in B and a vocabulary to "
                                         "derive it)")


# A run named by its size only, as DeepSpeed's ZeRO++ blog gives them: no shape, vocabulary or sequence length,
# its micro-batch in tokens a GPU.
SIZE_ONLY: dict[str, Any] = case(
    id="zeropp-blog-18B", model={"name": "GPT-style 18B", "params": "18B", "layers": None, "hidden": None,
                                 "heads": None, "ffn": None, "seq_len": None, "vocab": None},
    training={"framework": "DeepSpeed", "strategy": ["zero3"], "zero_stage": 3, "micro_batch": None,
              "grad_accum": None, "global_batch": None, "global_batch_tokens": None,
              "micro_batch_tokens_per_GPU": "1K", "fsdp_sharding_strategy": None, "precision": None,
              "fsdp_mixed_precision_mode": None},
    cluster={"gpu": "V100", "num_gpus": 384, "inter_node": "InfiniBand", "inter_node_bw_per_node": "400 Gbps",
             "ib_links": "4 x 100 Gbps IB"})


def test_a_model_stated_by_its_size_only_takes_megatrons_gpt_shape_at_that_size():
    """18B with nothing else stated: Megatron-LM's GPT family (Narayanan et al. 2021, table 1) has hidden 6,144
    from 7.5B (4,096) to 18.4B, so 18B interpolates on log scales to 6,100 -> 6,144; with its vocabulary 51,200
    and the case's 1,024 positions a layer of 12 h^2 + 13 h = 453.1M makes (18e9 - 0.321e9) / 453.1M = 39.02
    layers (18.0B),
    48 heads of 128. A size between the family's widths takes a width between them: 91B -> 10,752 (76.1B has
    10,240, 145.6B 12,288), 65 layers (90.8B). Every filled field is flagged."""
    h = 6144
    assert (18e9 - (51200 * h + 1024 * h + 2 * h)) / (12 * h**2 + 13 * h) == pytest.approx(39.02, abs=0.01)
    m = mapped(SIZE_ONLY)
    assert m.skipped is None and m.model is not None
    assert (m.model.layers, m.model.hidden, m.model.heads, m.model.vocab) == (39, 6144, 48, 51200)
    assert any(d.startswith("model shape not stated: 39 layers of hidden 6144 and 48 heads, Megatron-LM's GPT family")
               for d in m.defaults)
    big = mapped(case(SIZE_ONLY, model={"params": "91B"})).model
    assert big is not None and (big.layers, big.hidden) == (65, 10752)


@settings(max_examples=60, deadline=None)
@given(st.floats(min_value=0.3, max_value=2000.0), st.floats(min_value=1.1, max_value=3.0))
def test_a_size_derived_shape_is_the_stated_size_and_grows_with_it(billions: float, ratio: float):
    """Whatever the size (in the table's range or beyond it), the derived shape has 128-wide heads and the stated
    parameter count within 3% (half a layer at the smallest sizes), and a size 10% larger or more never gets a
    narrower model or fewer parameters."""
    def shape(size: float) -> tuple[int, int, float]:
        model = mapped(case(SIZE_ONLY, model={"params": f"{size:.3f}B"})).model
        assert model is not None and model.heads * 128 == model.hidden
        h = model.hidden
        count = model.layers * (12 * h**2 + 13 * h) + 51200 * h + 1024 * h + 2 * h  # 1,024 positions (1K tokens)
        assert count == pytest.approx(round(size, 3) * 1e9, rel=0.03)
        return h, model.layers, count
    (h_small, _, small), (h_large, _, large) = shape(billions), shape(billions * ratio)
    assert h_large >= h_small and large > small


def test_a_micro_batch_stated_in_tokens_sets_the_sequence_and_the_micro_batch():
    """1K tokens a GPU and no sequence length: one sequence of 1,024 tokens (fewer than the 2,048 default); 2K:
    one of 2,048; 4K with a stated 1,024-token sequence: four sequences. Tokens that are not whole sequences of
    the stated length are refused, saying so."""
    one = mapped(SIZE_ONLY)
    assert (one.training.seq_len, one.training.micro_batch) == (1024, 1)
    assert "seq_len not stated: 1024, the stated micro-batch's tokens as one sequence" in one.defaults
    two = mapped(case(SIZE_ONLY, training={"micro_batch_tokens_per_GPU": "2K"}))
    assert (two.training.seq_len, two.training.micro_batch) == (2048, 1)
    four = mapped(case(SIZE_ONLY, model={"seq_len": 1024}, training={"micro_batch_tokens_per_GPU": "4K"}))
    assert (four.training.seq_len, four.training.micro_batch) == (1024, 4)
    odd = mapped(case(SIZE_ONLY, model={"seq_len": 1536}, training={"micro_batch_tokens_per_GPU": "2K"}))
    assert odd.skipped == "micro_batch_tokens_per_GPU 2048 is not a whole number of 1536-token sequences"


@pytest.mark.parametrize(("params", "billions"), [("18B", 18.0), ("1.3b", 1.3), ("6.7 billion", 6.7), (13e9, 13.0),
                                                  ("350M", 0.35), ("175000000000", 175.0), ("1T", 1000.0)])
def test_a_size_is_read_in_the_ways_sources_write_it(params: str | float, billions: float):
    """'18B', '1.3b', '6.7 billion', a number, '350M', a count in digits, '1T': the same size-derived shape as the
    size written in billions."""
    m = mapped(case(SIZE_ONLY, model={"params": params}))
    again = mapped(case(SIZE_ONLY, model={"params": f"{billions}B"}))
    assert m.skipped is None and m.model is not None and again.model is not None
    assert (m.model.layers, m.model.hidden) == (again.model.layers, again.model.hidden)


def test_a_model_with_no_shape_and_no_size_is_skipped_saying_why():
    m = mapped(case(SIZE_ONLY, model={"params": None}))
    assert mapped(case(SIZE_ONLY, model={"params": "large"})).skipped == m.skipped
    assert mapped(case(SIZE_ONLY, model={"params": "70"})).skipped == m.skipped  # a bare small number: no count
    assert m.skipped == ("model shape not stated: layers, hidden, heads (nor a size in params, e.g. '18B', to derive "
                         "them)")


@pytest.mark.parametrize(
    ("cluster", "gpu", "gpus_per_node", "intra_node", "network"),
    [
        ({"gpu": "a100_40gb", "num_gpus": 16, "inter_node": "RoCE",
          "inter_node_bw_per_node": "1600 Gbps node-node interconnect"},
         "A100-SXM4-40GB", 8, "nvswitch-nvlink3", ("roce", 8, 200.0)),
        ({"gpu": "V100 32GB (DGX-2)", "gpus_per_node": 16, "nodes": 2, "num_gpus": 32},
         "V100-SXM2-32GB", 16, "nvswitch-nvlink2", ("ib", 8, 100.0)),
        ({"gpu": "V100", "num_gpus": 16, "inter_node": "InfiniBand", "inter_node_bw_per_node": "400 Gbps",
          "ib_links": "4 x 100 Gbps IB"}, "V100-SXM2-32GB", 8, "nvlink2-hybrid-cube-mesh", ("ib", 4, 100.0)),
        ({"gpu": "H100 SXM 96GB HBM2e (Grand Teton)", "gpus_per_node": 8, "num_gpus": 16,
          "inter_node": "backend RDMA network", "inter_node_bw_per_node": "400 Gb/s per GPU (3.2 Tb/s per host)"},
         "H100-SXM-96GB-HBM2e", 8, "nvswitch-nvlink4", ("ib", 8, 400.0)),
        ({"gpu": "A100 80GB (Selene, DGX A100)", "gpus_per_node": 8, "num_gpus": 16,
          "inter_node": "HDR InfiniBand (Selene)", "inter_node_bw_per_node": "8 x 200 Gb/s (per paper)"},
         "A100-SXM4-80GB", 8, "nvswitch-nvlink3", ("ib", 8, 200.0)),
        ({"gpu": "B200 (DGX-B200)", "gpus_per_node": 8, "num_gpus": 16}, "B200-180GB", 8, "nvswitch-nvlink5",
         ("ib", 8, 400.0)),
        # an unqualified DGX A100 is the original 8 x 40 GB system; another unqualified A100 the 80 GB part
        ({"gpu": "A100 (DGX-A100)", "gpus_per_node": 8, "num_gpus": 16}, "A100-SXM4-40GB", 8, "nvswitch-nvlink3",
         ("ib", 8, 200.0)),
        ({"gpu": "A100", "gpus_per_node": 8, "num_gpus": 16}, "A100-SXM4-80GB", 8, "nvswitch-nvlink3",
         ("ib", 8, 200.0)),
    ],
)
def test_cluster_text_lowers_to_gpu_preset_and_network(cluster, gpu, gpus_per_node, intra_node, network):
    """Free-text GPU and network fields: GPU table name, preset server, NICs x Gb/s of the stated network."""
    m = mapped(case(training={"precision": None, "grad_accum": None},
                    cluster={"nodes": None, "gpus_per_node": None, **cluster}))
    assert m.skipped is None, m.skipped
    net = m.topology.inter_node
    assert (m.topology.gpu, m.topology.gpus_per_node, m.topology.intra_node) == (gpu, gpus_per_node, intra_node)
    assert (net.transport, net.nics_per_node, net.nic_gbps) == network


@pytest.mark.parametrize(
    ("cluster", "preset", "gpu", "network"),
    [
        ({"gpu": "AWS p4d.24xlarge"}, "aws-p4d", "A100-SXM4-40GB", ("efa", 4, 100.0)),
        ({"gpu": "A100 80GB", "inter_node": "EFA (p4de.24xlarge)"}, "aws-p4de", "A100-SXM4-80GB", ("efa", 4, 100.0)),
        ({"gpu": "H100", "inter_node": "AWS p5.48xlarge, EFA"}, "aws-p5", "H100-SXM5-80GB", ("efa", 32, 100.0)),
        ({"gpu": "H200 (p5e.48xlarge)"}, "aws-p5e", "H200-SXM-141GB", ("efa", 32, 100.0)),
        ({"gpu": "H100 80GB", "intra_node": "GCP a3-megagpu-8g"}, "gcp-a3-mega", "H100-SXM5-80GB", ("tcpxo", 8, 200.0)),
        ({"gpu": "H200", "inter_node": "p5en EFA"}, "aws-p5en", "H200-SXM-141GB", ("efa", 16, 200.0)),
        ({"gpu": "H200 (Google Cloud A3 Ultra)"}, "gcp-a3-ultra", "H200-SXM-141GB", ("roce", 8, 400.0)),
        ({"gpu": "B200", "inter_node": "a4-highgpu-8g, RoCE"}, "gcp-a4", "B200-180GB", ("roce", 8, 400.0)),
        ({"gpu": "B200 (GCP A4)"}, "gcp-a4", "B200-180GB", ("roce", 8, 400.0)),
        ({"gpu": "GCP A3 High"}, "gcp-a3-high", "H100-SXM5-80GB", ("tcpx", 4, 200.0)),
        ({"gpu": "Azure ND96isr H100 v5"}, "azure-nd-h100-v5", "H100-SXM5-80GB", ("ib", 8, 400.0)),
        ({"gpu": "H200", "inter_node": "Azure ND H200 v5"}, "azure-nd-h200-v5", "H200-SXM-141GB", ("ib", 8, 400.0)),
        ({"gpu": "B200", "inter_node": "AWS p6-b200.48xlarge, EFA"}, "aws-p6-b200", "B200-180GB", ("efa", 8, 400.0)),
        ({"gpu": "8x B200 (p6-b200)"}, "aws-p6-b200", "B200-180GB", ("efa", 8, 400.0)),
        ({"gpu": "A100 80GB (Azure NDm A100 v4)"}, "azure-nd-a100-v4", "A100-SXM4-80GB", ("ib", 8, 200.0)),
        ({"gpu": "H100", "inter_node": "AWS p5.48xlarge", "inter_node_bw_per_node": "1600 Gbps"}, "aws-p5",
         "H100-SXM5-80GB", ("efa", 32, 50.0)),
    ],
)
def test_a_cloud_instance_named_in_the_cluster_text_is_its_server_and_network(cluster, preset, gpu, network):
    """An instance type named anywhere in the cluster's text (gpu, intra_node or inter_node) states the server, GPUs
    and network of that instance (its preset, with sources), not flagged as unstated; an 80 GB A100 stated on a 40 GB
    instance type is its 80 GB sibling; a bandwidth the case states still overrides the instance's."""
    m = mapped(case(training={"precision": None, "grad_accum": None},
                    cluster={"nodes": None, "gpus_per_node": None, "num_gpus": 64, "intra_node": None,
                             "inter_node": None, "inter_node_bw_per_node": None, **cluster}))
    assert m.skipped is None, m.skipped
    net = m.topology.inter_node
    assert (m.topology.name, m.topology.gpu, m.topology.gpus_per_node) == (preset, gpu, 8)
    assert (net.transport, net.nics_per_node, net.nic_gbps) == network
    assert any(d.startswith(f"instance or system named: {preset}") for d in m.defaults)
    assert not any("not stated" in d for d in m.defaults if "network" in d or "gpus_per_node" in d)


@pytest.mark.parametrize(
    ("cluster", "preset", "gpu", "nics"),
    [
        ({"gpu": "GH200", "intra_node": "CSCS Alps (Clariden)"}, "cscs-alps-gh200", "GH200-96GB", 4),
        ({"gpu": "GH200", "inter_node": "Isambard-AI, Slingshot 11"}, "cscs-alps-gh200", "GH200-96GB", 4),
        ({"gpu": "A100 40GB", "inter_node": "NERSC Perlmutter"}, "nersc-perlmutter", "A100-SXM4-40GB", 4),
        ({"gpu": "A100 80GB (Perlmutter)"}, "nersc-perlmutter", "A100-SXM4-80GB", 4),
        ({"gpu": "A100", "inter_node": "ALCF Polaris"}, "alcf-polaris", "A100-SXM4-40GB", 2),
        ({"gpu": "A100", "inter_node": "JUWELS Booster"}, "jsc-juwels-booster", "A100-SXM4-40GB", 4),
        ({"gpu": "GH200 (JUPITER)"}, "jsc-jupiter-booster", "GH200-96GB", 4),
    ],
)
def test_an_hpc_system_named_in_the_cluster_text_is_its_node_and_network(cluster, preset, gpu, nics):
    """Alps (and the other GH200 systems of its blade), Perlmutter, Polaris, JUWELS Booster and JUPITER named in a
    case's cluster text state their 4-GPU node and their NICs (Slingshot-11, or 200G InfiniBand at JSC)."""
    m = mapped(case(training={"precision": None, "grad_accum": None},
                    cluster={"nodes": None, "gpus_per_node": None, "num_gpus": 64, "intra_node": None,
                             "inter_node": None, "inter_node_bw_per_node": None, **cluster}))
    assert m.skipped is None, m.skipped
    net = m.topology.inter_node
    assert (m.topology.name, m.topology.gpu, m.topology.gpus_per_node, m.topology.nodes) == (preset, gpu, 4, 16)
    assert (net.transport, net.nics_per_node, net.nic_gbps) == ("ib" if "jsc" in preset else "slingshot", nics, 200.0)


def test_instance_names_that_are_not_in_the_table_fall_back_to_the_gpu_text():
    """An instance type the table does not name (p6-b300) leaves the GPU text to decide, as without an instance
    name; a bare "A4" (a paper size, an Azure VM size) is not read as Google Cloud's A4."""
    m = mapped(case(training={"precision": None, "grad_accum": None},
                    cluster={"nodes": None, "gpus_per_node": None, "num_gpus": 16, "gpu": "B300",
                             "inter_node": "p6-b300 EFA", "inter_node_bw_per_node": None, "intra_node": None}))
    assert m.skipped is None and m.topology.gpu == "B300-288GB" and m.topology.inter_node.transport == "efa"
    m = mapped(case(training={"precision": None, "grad_accum": None},
                    cluster={"nodes": None, "gpus_per_node": None, "num_gpus": 16, "gpu": "B200",
                             "inter_node": "A4 InfiniBand", "inter_node_bw_per_node": None, "intra_node": None}))
    assert m.skipped is None and m.topology.name == "dgx-b200" and m.topology.inter_node.transport == "ib"


@pytest.mark.parametrize(("text", "nics"), [("400 Gbps", (8, 50.0)), ("50 GB/s", (8, 50.0)), ("25 GBps", (8, 25.0)),
                                          ("100 GB/s per GPU", (8, 800.0)), ("400 GBPS", (8, 50.0)),
                                          ("3.2 Tb/s", (8, 400.0)), ("8 x 50 GB/s", (8, 400.0))])
def test_a_network_rate_in_bytes_is_eight_times_the_bits(text: str, nics: tuple[int, float]):
    """'GB/s' and 'GBps' are bytes (x 8 in Gb/s); 'Gbps', 'Gb/s' and an all-capitals 'GBPS' are bits."""
    m = mapped(case(training={"precision": None, "grad_accum": None},
                    cluster={"gpu": "H100 80GB", "num_gpus": 16, "gpus_per_node": 8, "nodes": None,
                             "inter_node": "InfiniBand", "inter_node_bw_per_node": text}))
    net = m.topology.inter_node
    assert (net.nics_per_node, net.nic_gbps) == nics



@pytest.mark.parametrize(("text", "nics"), [("800G", (8, 100.0)), ("8x100G", (8, 100.0)), ("4 x 200G", (4, 200.0)),
                                          ("8x NDR", (8, 400.0)), ("400GbE x 8", (8, 400.0))])
def test_a_network_bandwidth_in_short_forms_is_read(text: str, nics: tuple[int, float]):
    """`inter_node_bw_per_node` in the short forms a description uses: a rate alone ('800G') is the node's, over the
    preset's NICs; with a count before or after it ('8x100G', '400GbE x 8'), each NIC's. Before, such text was
    passed over for the preset's network."""
    m = mapped(case(training={"precision": None, "grad_accum": None},
                    cluster={"gpu": "H100 80GB", "num_gpus": 16, "gpus_per_node": 8, "nodes": None,
                             "inter_node": "InfiniBand", "inter_node_bw_per_node": text}))
    net = m.topology.inter_node
    assert (net.nics_per_node, net.nic_gbps) == nics
    assert not any("bandwidth not stated" in flag for flag in m.defaults)


def test_unstated_transport_and_unknown_gpu_are_flagged_or_skipped():
    """'backend RDMA network' names no transport (flagged); an H100 of a memory size the table lacks
    stands in as the 80 GB SXM5 (flagged); a Pascal GPU is not in the table (skipped)."""
    m = mapped(case(training={"grad_accum": None},
                    cluster={"gpu": "H100 SXM 94GB", "num_gpus": 16, "inter_node": "backend RDMA network",
                             "inter_node_bw_per_node": "400 Gb/s per GPU"}))
    assert "inter-node transport not stated: ib" in m.defaults
    assert m.topology.gpu == "H100-SXM5-80GB" and any("94GB part not in the GPU table" in d for d in m.defaults)
    assert "not in the GPU table" in mapped(case(cluster={"gpu": "Pascal (model not stated)"})).skipped


@pytest.mark.parametrize(("num_gpus", "domain", "flagged"), [(64, 72, False), (144, 72, False), (128, 64, True),
                                                              (256, 64, True)])
def test_gb200_jobs_fill_whole_racks_or_split_evenly_over_the_fewest(num_gpus, domain, flagged):
    """DGX-GB200 jobs: within one 72-GPU NVL72 rack (64 GPUs) or over whole racks (144) the racks are 72-GPU
    NVLink domains; 128 GPUs (32 trays) split evenly over the fewest racks that hold them, 2 x 64 (256: 4 x 64),
    flagged, since the case does not say how its job was placed."""
    m = mapped(case(training={"grad_accum": None, "global_batch": None, "global_batch_tokens": None},
                    cluster={"gpu": "GB200 (DGX-GB200)", "gpus_per_node": None, "nodes": None, "num_gpus": num_gpus}))
    assert m.skipped is None and m.topology is not None
    assert m.topology.gpus_per_nvlink_domain == domain
    assert any(d.startswith("placement in NVLink domains not stated") for d in m.defaults) == flagged


@pytest.mark.parametrize(("per_node", "trays"), [(8, 2), (72, 18), (4, 1)])
def test_gb200_node_of_more_gpus_than_a_tray_is_that_many_trays(per_node, trays):
    """A GB200 NVL72 case whose "node" holds 8 or 72 GPUs (the rack counted as the node) runs on compute trays of
    4: the GPU count kept, servers = GPUs / 4, NICs stated for its node shared over its trays, flagged; 4 is a tray
    as stated. Before, such a case was skipped: the preset's trays hold 4."""
    m = mapped(case(training={"grad_accum": None, "global_batch": None, "global_batch_tokens": None},
                    cluster={"gpu": "GB200 NVL72", "gpus_per_node": per_node, "nodes": 144 // per_node,
                             "num_gpus": None, "inter_node": f"{4 * trays}x 400G InfiniBand"}))
    assert m.skipped is None and m.topology is not None
    assert (m.topology.gpus_per_node, m.topology.nodes, m.topology.gpus_per_nvlink_domain) == (4, 36, 72)
    assert m.topology.inter_node is not None and m.topology.inter_node.nics_per_node == 4
    assert any(d.startswith(f"gpus_per_node {per_node} read as {trays} compute trays") for d in m.defaults) \
        == (trays > 1)


@pytest.mark.parametrize(("gpu", "per_node", "nics"), [("H100 (DGX-H100)", 4, 4), ("H100 (DGX-H100)", 8, 8),
                                                      ("GH200", 4, 4)])
def test_a_node_of_fewer_gpus_than_the_preset_server_has_their_nics(gpu, per_node, nics):
    """A case that runs 4 GPUs a node on a server of one NIC per GPU (DGX H100), or on a platform of 4 (GH200
    superchips, whose server preset is the DGX H100's), and states no network gets the NICs of those GPUs, as NCCL
    sends each GPU's traffic through its own; flagged."""
    m = mapped(case(training={"grad_accum": None, "global_batch": None, "global_batch_tokens": None},
                    cluster={"gpu": gpu, "gpus_per_node": per_node, "nodes": 2, "num_gpus": None,
                             "inter_node": None, "inter_node_bw_per_node": None}))
    assert m.skipped is None and m.topology is not None and m.topology.inter_node is not None
    assert m.topology.inter_node.nics_per_node == nics
    assert any(d.startswith("inter-node network not stated") and f"{nics} x 400 Gb/s" in d for d in m.defaults)


def test_more_gpus_per_node_than_a_server_holds_is_still_refused():
    """The tray reading is for rack-scale NVLink only: 16 H100s in one DGX H100 server is refused."""
    m = mapped(case(training={"grad_accum": None, "global_batch": None, "global_batch_tokens": None},
                    cluster={"gpu": "H100 (DGX-H100)", "gpus_per_node": 16, "nodes": 2, "num_gpus": None}))
    assert m.skipped is not None and "gpus_per_node" in m.skipped


@pytest.mark.parametrize(
    ("text", "gpu", "intra_node"),
    [("NVIDIA L40S 48GB", "L40S", "pcie4"), ("H100 80GB PCIe", "H100-PCIe-80GB", "pcie5"),
     ("GeForce RTX 2080 Ti", "RTX-2080-Ti", "pcie3-no-p2p"), ("RTX 6000D", "RTX-6000D", "pcie5"),
     ("A100 80GB PCIe", "A100-PCIe-80GB", "pcie4"), ("Tesla T4", "T4", "pcie3"), ("NVIDIA A10", "A10", "pcie4"),
     ("GeForce RTX 4090 24GB", "RTX-4090", "pcie4-no-p2p"), ("RTX 6000 Ada", "RTX-6000-Ada", "pcie4"),
     ("A6000", "RTX-A6000", "pcie4"), ("6000 Ada", "RTX-6000-Ada", "pcie4"), ("3090", "RTX-3090", "pcie4-no-p2p")],
)
def test_pcie_cards_of_the_gpu_table_sit_in_the_pcie_server(text, gpu, intra_node):
    """Every PCIe card of the GPU table is recognised by its name's words in any order (the memory size may be
    left out), on the PCIe preset's server at the card's PCIe generation, GeForce cards without peer-to-peer;
    flagged. A card the table lacks is skipped naming the table."""
    m = mapped(case(training={"global_batch": None, "global_batch_tokens": None, "grad_accum": None, "precision": None},
                    cluster={"gpu": text, "num_gpus": 8, "nodes": 1, "gpus_per_node": None}))
    assert m.skipped is None, m.skipped
    assert (m.topology.gpu, m.topology.intra_node, m.topology.gpus_per_node) == (gpu, intra_node, 8)
    assert any("server not stated: 8 cards over PCIe" in d and intra_node in d for d in m.defaults)
    skipped = mapped(case(cluster={"gpu": "Quadro GP100 PCIe", "num_gpus": 8})).skipped
    assert skipped == "GPU 'Quadro GP100 PCIe': no PCIe part of it in the GPU table (topologies/data/gpus.yaml)"


def test_a_pcie_card_without_its_memory_size_is_the_largest_flagged():
    """'A100 PCIe' names two cards of the table (40 and 80 GB): the larger, flagged."""
    m = mapped(case(training={"global_batch": None, "global_batch_tokens": None, "grad_accum": None},
                    cluster={"gpu": "A100 PCIe", "num_gpus": 8, "nodes": 1, "gpus_per_node": None}))
    assert m.topology is not None and m.topology.gpu == "A100-PCIe-80GB"
    assert "GPU 'A100 PCIe': memory not stated: A100-PCIe-80GB" in m.defaults


def test_one_gpu_of_a_dgx2_is_a_one_gpu_server():
    """1 GPU on a 16-GPU DGX-2 ('tp' at degree 1): one node of one GPU, plain DDP (flagged)."""
    m = mapped(case(training={"strategy": ["tp"], "tp": 1, "fsdp_sharding_strategy": None, "global_batch": 8,
                              "micro_batch": None, "grad_accum": None, "precision": "mixed precision (fp16)"},
                    cluster={"gpu": "V100 32GB (DGX-2)", "gpus_per_node": 16, "nodes": 1, "num_gpus": 1}))
    assert (m.topology.gpus_per_node, m.topology.nodes, m.training.strategy.kind) == (1, 1, "ddp")
    assert (m.training.micro_batch, m.training.global_batch, m.training.precision) == (8, 8, "fp16")
    assert "strategy ['tp'] at degree 1: plain data parallelism (ddp)" in m.defaults


@pytest.mark.parametrize(
    ("training", "expected"),
    [
        ({"precision": "bf16 + float8 linear"}, ("fp8", "full")),
        ({"precision": "amp_fp8", "activation_checkpointing": "selective"}, ("fp8", "selective")),
        ({"precision": "FP8", "activation_checkpointing": "per-op selective"}, ("fp8", "selective")),
        ({"precision": "mixed (fp16, per paper)", "activation_checkpointing": False}, ("fp16", "none")),
        ({"precision": None, "activation_checkpointing": None}, ("bf16", "none")),
        ({"precision": None, "quantization": "None (bfloat16)", "activation_checkpointing": "full"},
         ("bf16", "full")),
        ({"precision": "float16", "activation_checkpointing": True}, ("fp16", "full")),
        ({"precision": "16-mixed", "activation_checkpointing": True}, ("fp16", "full")),
        ({"precision": "32-true", "activation_checkpointing": True}, ("fp32", "full")),
        ({"precision": "bf16-mixed", "activation_checkpointing": True}, ("bf16", "full")),
        ({"precision": "bf16", "activation_checkpointing": "no"}, ("bf16", "none")),
        ({"precision": "bf16", "activation_checkpointing": "No AC"}, ("bf16", "none")),
        ({"precision": "bf16", "activation_checkpointing": "gradient checkpointing"}, ("bf16", "full")),
        ({"precision": "bf16", "activation_checkpointing": "AC"}, ("bf16", "full")),
    ],
)
def test_precision_and_checkpointing_text(training, expected):
    """Precision and activation checkpointing read from the sources' wording (unstated: bf16, none)."""
    m = mapped(case(training=training))
    assert (m.training.precision, m.training.activation_checkpointing) == expected
    assert not any(d.startswith("precision not stated") for d in m.defaults) or training["precision"] is None \
        and "quantization" not in training


@pytest.mark.parametrize(("training", "expected", "flagged"), [
    ({"activation_checkpointing": "every 2nd block"}, ("full", 40), False),
    ({"activation_checkpointing": "selective layer", "framework": "torchtitan"}, ("full", 40), True),
    ({"activation_checkpointing": "full", "recompute_num_layers": 10}, ("full", 10), False),
    ({"activation_checkpointing": True, "recompute_layers": 0}, ("full", 0), False),
])
def test_checkpointing_of_some_layers(training, expected, flagged):
    """Of the 80 layers, every k-th recomputes in full (the k the text gives; torchtitan's 'selective layer'
    without one: its option's default 2, flagged), or the count the case states (Megatron's
    recompute_num_layers), where the source does not publish its HFU."""
    m = mapped(case(training=training, metrics={"HFU_%": None}))
    assert m.skipped is None, m.skipped
    assert (m.training.activation_checkpointing, m.training.recompute_layers) == expected
    assert any("every 2nd block recomputed whole" in d for d in m.defaults) is flagged


@pytest.mark.parametrize(("metrics", "expected"), [
    # fms-fsdp's README (5e522b4): Llama 2 13B on A100, MFU 0.51, HFU 0.59: 1 + share / 3 = 1.157, share 0.47
    ({"mfu": 0.51, "hfu": 0.59}, ("full", 38)),
    ({"MFU_pct": "51%", "HFU %": "59%"}, ("full", 38)),
    ({"MFU_%": 41.25, "HFU_%": 55.0}, ("full", 80)),  # llm-foundry's 70B row: 4 / 3, every layer
    ({"mfu": 0.55, "hfu": 0.74}, ("full", 80)),  # 3 x (0.74 / 0.55 - 1) = 1.04: every layer, clamped
    ({"mfu": 0.5, "hfu": 0.5}, ("none", None)),  # equal utilisations: nothing recomputed
])
def test_checkpointing_of_unsaid_layers_from_published_utilisations(metrics, expected):
    """A policy of some layers that does not say which, where the source publishes both its hardware and its model
    FLOPs utilisation: a layer recomputed whole re-runs its forward (a third of its FLOPs), so the share of the 80
    layers is 3 x (hfu / mfu - 1), rounded to layers and flagged; the metric the case is judged on is unchanged."""
    m = mapped(case(training={"activation_checkpointing": "Selective AC (every k-th block)"},
                    metrics={"MFU_%": None, "HFU_%": None, **metrics}))
    assert m.skipped is None, m.skipped
    assert (m.training.activation_checkpointing, m.training.recompute_layers) == expected
    assert any("the published HFU" in d for d in m.defaults)
    assert choose_metric(m.case).key == choose_metric(parse(FOUNDRY_70B)[0]).key


@pytest.mark.parametrize(("training", "reason"), [
    ({"activation_checkpointing": "Selective AC (every k-th block)"}, "some layers are checkpointed, but not which"),
    ({"activation_checkpointing": "selective layer"}, "some layers are checkpointed, but not which"),
    ({"activation_checkpointing": "selective", "recompute_layers": 10}, "needs activation_checkpointing full"),
])
def test_checkpointing_of_unsaid_layers_is_skipped_with_the_reason(training, reason):
    """A policy of some layers that does not say which (outside torchtitan, from a source that does not publish
    both its HFU and MFU), or a count beside selective recomputation: skipped with the reason, not read as
    Megatron's selective recomputation."""
    m = mapped(case(training=training, metrics={"HFU_%": None}))
    assert m.skipped is not None and reason in m.skipped


def test_float8_rowwise_is_skipped_with_the_reason():
    """torchao's rowwise float8 recipe adds per-row scaling kernels the fp8 model does not have: skipped."""
    m = mapped(case(training={"precision": None, "quantization": "float8 rowwise"}))
    assert m.skipped is not None and "row-wise scales" in m.skipped


@pytest.mark.parametrize(("seq_len", "tokens"), [("8K", 8192), ("8192", 8192), ("4,096 tokens", 4096), ("2k", 2048),
                                                (1024, 1024)])
def test_sequence_lengths_as_sources_write_them(seq_len: str | int, tokens: int):
    m = mapped(case(model={"seq_len": seq_len}))
    assert m.skipped is None and m.training.seq_len == tokens


def test_seq_len_in_k_and_missing_fields_use_flagged_defaults():
    """'8K' tokens = 8192; no micro-batch: global batch / GPUs; no ffn: 4 x hidden, all flagged."""
    m = mapped(case(model={"seq_len": "8K", "ffn": None, "name": UNRELEASED},
                    training={"micro_batch": None, "grad_accum": None, "global_batch": 1024}))
    assert (m.training.seq_len, m.training.micro_batch, m.model.ffn_hidden) == (8192, 2, None)
    assert "micro_batch not stated: global_batch / (GPUs x grad_accum 1) = 2" in m.defaults
    assert "ffn not stated: 4 x hidden = 32768" in m.defaults


@pytest.mark.parametrize(
    ("training", "kind", "reason"),
    [
        ({"strategy": ["zero3"], "zero_stage": 3}, "zero3", None),
        ({"strategy": ["dp"], "zero_stage": 2}, "zero2", None),
        ({"strategy": ["ddp"]}, "ddp", None),
        ({"strategy": ["fsdp"], "fsdp_sharding_strategy": "SHARD_GRAD_OP"}, "fsdp", None),
        ({"strategy": ["fsdp"], "fsdp_sharding_strategy": None, "fsdp": 8}, "hsdp", None),
        ({"strategy": ["fsdp"], "fsdp_mixed_precision_mode": "HALF"}, None, "fsdp_mixed_precision_mode 'HALF'"),
        ({"strategy": ["zeropp"], "zero_stage": 3, "zeropp": True}, "zero3", None),
        ({"strategy": ["zeropp"], "zero_stage": 2, "zeropp": True}, None, "ZeRO++ is a ZeRO-3 extension"),
        ({"strategy": ["zero3"], "zero_stage": 3, "offload": "CPU"}, None, "ZeRO-Offload"),
        ({"strategy": ["fsdp", "cp"], "cp": 4}, "fsdp", None),
        ({"strategy": ["tp", "pp", "dp"], "model_parallel_size_tp_x_pp": 2}, None,
         "tp x pp = 2 stated without the split into tp and pp"),
        ({"strategy": ["moe"]}, None, "strategy ['moe'] not known"),
        ({"strategy": ["ZeRO-3"]}, "zero3", None),
        ({"strategy": "DeepSpeed ZeRO stage 2"}, "zero2", None),
        ({"strategy": ["3D parallelism"]}, None, "tp degree not stated"),
        ({"strategy": ["3D parallelism"], "tp": 2, "pp": 2}, "ddp", None),
        ({"strategy": ["TP+PP+DP"], "tp": 2, "pp": 2}, "ddp", None),
        ({"strategy": "FSDP + TP", "tp": 2}, "fsdp", None),
        ({"strategy": ["FSDP (FULL_SHARD)"]}, "fsdp", None),
        ({"strategy": ["HSDP (HYBRID_SHARD)"]}, "hsdp", None),
        ({"strategy": ["ZeRO"], "zero_stage": 2}, "zero2", None),
        ({"strategy": ["ZeRO"]}, None, "strategy ['zero'] not known"),
        ({"strategy": ["FSDP2"]}, "fsdp", None),
        ({"strategy": ["Hybrid_Shard"]}, "hsdp", None),
        ({"strategy": ["ZeRO++"], "zero_stage": 3}, "zero3", None),
        ({"strategy": ["DistributedDataParallel"]}, "ddp", None),
        ({"strategy": ["tp", "dp", "distributed optimizer"], "tp": 2}, "zero1", None),
        ({"strategy": ["--use-distributed-optimizer"]}, "zero1", None),
        ({"strategy": ["ShardedDDP"]}, "zero2", None),
        ({"strategy": ["OSS"]}, "zero1", None),
        ({"strategy": ["sp"]}, "ddp", None),  # with tp 1 Megatron turns it off (arguments.py), and so is it here
        ({"strategy": "TP2/PP2/DP4"}, "ddp", None),  # the degrees with the names: tp 2, pp 2
        ({"strategy": ["Fully Sharded Data Parallel (FSDP)"]}, "fsdp", None),  # a name glossed in brackets
        ({"strategy": ["fsdp2 (full_shard)"]}, "fsdp", None),
        ({"strategy": ["ZeRO-3 (FSDP)"]}, "zero3", None),
        ({"strategy": ["TP=2", "PP=2", "DP"]}, "ddp", None),
    ],
)
def test_strategies(training, kind, reason):
    """fsdp / hsdp / zero1-3 / ddp (dp), ZeRO++ (ZeRO-3), with context parallelism too, are expressed, whatever the
    case, spaces, dashes, underscores or parentheses of their names ('ZeRO-3', 'FSDP2', 'Hybrid_Shard', 'FSDP
    (FULL_SHARD)'); an item naming several ('TP+PP+DP', 'FSDP + TP', '3D parallelism': tensor, pipeline and data) is
    its names; offload, a tp x pp product without its split, degrees not stated and unknown settings are skipped with
    the reason."""
    m = mapped(case(training={"fsdp_sharding_strategy": None, "grad_accum": None, **training},
                    cluster={"num_gpus": 16}))
    if reason is None:
        assert m.skipped is None and m.training.strategy.kind == kind
    else:
        assert reason in m.skipped


def test_sequence_parallelism_named_in_the_strategy_is_taken():
    """'sp' (or 'sequence parallel') beside tp turns Megatron's sequence parallelism on, whatever the framework's
    default; the same case without it keeps the default (off for an unknown framework)."""
    base = {"framework": "Megatron-LM", "tp": 8, "pp": 1, "dp": 2, "micro_batch": 1, "global_batch": 16,
            "grad_accum": None, "fsdp_sharding_strategy": None}
    named = mapped(case(training={**base, "strategy": ["tp", "Sequence Parallel", "dp"]}, cluster={"num_gpus": 16}))
    plain = mapped(case(training={**base, "strategy": ["tp", "dp"]}, cluster={"num_gpus": 16}))
    assert named.skipped is None and named.training.parallel.sequence_parallel
    assert plain.skipped is None and not plain.training.parallel.sequence_parallel
    # Megatron-Core's default (off without TP overlap) is reported only where the case leaves it unsaid
    core = {**base, "framework": "Megatron-Core"}
    said = mapped(case(training={**core, "strategy": ["tp", "dp"], "sequence_parallel": True},
                       cluster={"num_gpus": 16}))
    unsaid = mapped(case(training={**core, "strategy": ["tp", "dp"]}, cluster={"num_gpus": 16}))
    off = "sequence parallelism off"
    assert said.training.parallel.sequence_parallel and not unsaid.training.parallel.sequence_parallel
    assert not any(off in d for d in said.defaults) and any(off in d for d in unsaid.defaults)
    # with tp 1, Megatron-LM and NeMo turn it off with a warning (training/arguments.py): so does the reader, saying so
    alone = mapped(case(training={**base, "tp": 1, "dp": 16, "strategy": ["pp", "sp", "dp"]}, cluster={"num_gpus": 16}))
    assert alone.skipped is None and not alone.training.parallel.sequence_parallel
    assert any("sequence parallelism named with tp 1: off" in d for d in alone.defaults)


# --- metrics --------------------------------------------------------------------------------------

def test_metric_preference_tokens_then_tflops_then_mfu():
    """tokens/s/GPU wins over TFLOP/s and MFU; then TFLOP/s; MFU '49%' reads 49."""
    assert choose_metric(parse(FOUNDRY_70B)[0]).key == "model_TFLOP_per_GPU"
    tflops = parse(case(metrics={"throughput_tokens_per_s_per_GPU": None}))[0]
    assert (choose_metric(tflops).key, choose_metric(tflops).published) == ("model_TFLOP_per_GPU", 408.0)
    mfu = choose_metric(parse(case(metrics={"throughput_tokens_per_s_per_GPU": None, "model_TFLOP_per_GPU": None,
                                            "MFU_%": None, "MFU": "49%"}))[0])
    assert (mfu.key, mfu.kind, mfu.published) == ("MFU", "mfu_pct", 49.0)
    only_scaling = case()
    only_scaling["metrics"] = {"scaling_efficiency": "90%"}
    assert choose_metric(parse(only_scaling)[0]) is None
    only_scaling["metrics"]["sec_per_iteration"] = 104.8  # the step time, read by its words
    step = choose_metric(parse(only_scaling)[0])
    assert (step.key, step.kind, step.published) == ("sec_per_iteration", "step_time_s", 104.8)
    async_tp = case()  # torchtitan's async-TP table: its tokens/sec are per GPU (the case's note)
    async_tp["metrics"] = {"vanilla_TP_tokens_per_sec": 597.3, "async_TP_tokens_per_sec": 652.4,
                           "async_TP_speedup": 1.09}
    metric = choose_metric(parse(async_tp)[0])
    assert (metric.key, metric.kind, metric.published) == ("async_TP_tokens_per_sec", "tokens_per_s_per_gpu", 652.4)


@pytest.mark.parametrize(("metrics", "kind", "published"), [
    ({"tokens_per_second_per_gpu": 1200}, "tokens_per_s_per_gpu", 1200.0),
    ({"TFLOPS/GPU": 400}, "tflops_per_gpu", 400.0),
    ({"model_flops_utilization": "41%"}, "mfu_pct", 41.0),
    ({"step_time_ms": 1500}, "step_time_s", 1.5),
    ({"iteration_time_s": 2.0}, "step_time_s", 2.0),
    ({"samples_per_second": 10}, "samples_per_s", 10.0),
    ({"throughput_tokens_per_s": 9000}, "tokens_per_s", 9000.0),
    ({"tok/s/gpu": 3000}, "tokens_per_s_per_gpu", 3000.0),
    ({"throughput (tokens/s)": 9000}, "tokens_per_s", 9000.0),
    ({"samples/sec": 12}, "samples_per_s", 12.0),
    ({"seq/s": 12}, "samples_per_s", 12.0),
    ({"time per iteration (ms)": 2500}, "step_time_s", 2.5),
    ({"elapsed_time_per_step_s": 2.5}, "step_time_s", 2.5),
    ({"model_flops_utilization": 0.41}, "mfu_pct", 41.0),
    ({"MFU": 0.38}, "mfu_pct", 38.0),
    ({"TPS/GPU": 5762}, "tokens_per_s_per_gpu", 5762.0),
    ({"wps per gpu": 2904}, "tokens_per_s_per_gpu", 2904.0),
    ({"TGS": 3600}, "tokens_per_s_per_gpu", 3600.0),
    ({"seconds_per_step": 2.5}, "step_time_s", 2.5),
    ({"seconds per iteration": 2.5}, "step_time_s", 2.5),
    ({"throughput_per_gpu": "1,914 tokens/s"}, "tokens_per_s_per_gpu", 1914.0),  # the unit after the figure
    ({"throughput": "1914 tok/s per GPU"}, "tokens_per_s_per_gpu", 1914.0),
    ({"step_time": "2500 ms"}, "step_time_s", 2.5),
    ({"step_time": "2.5 s"}, "step_time_s", 2.5),
    ({"tokens_per_sec_per_GPU": "1914 tokens/s"}, "tokens_per_s_per_gpu", 1914.0),
])
def test_metric_names_outside_the_table_are_read_by_their_words(metrics, kind, published):
    """A source's own name for a throughput (per GPU, the cluster's, or the step time, in ms or s) is read by its
    words when no name of the table is there ('tok/s/gpu', 'samples/sec', 'time per iteration (ms)'), with the words
    of a unit written after the figure ('throughput_per_gpu: 1914 tokens/s'); an MFU written as a fraction (0.41)
    is 41%; the prediction comes in the same unit."""
    entry = case()
    entry["metrics"] = metrics
    metric = choose_metric(parse(entry)[0])
    assert (metric.kind, metric.published) == (kind, pytest.approx(published))
    prediction = fake_prediction(n_gpus=8, tokens_per_step=8 * 4096, tokens_per_s_per_gpu=1000.0)
    step_s = 8 * 4096 / 8000.0
    seq_len = mapped(entry).training.seq_len
    expected = {"tokens_per_s_per_gpu": 1000.0, "tflops_per_gpu": 6.0, "mfu_pct": 0.6, "step_time_s": step_s,
                "samples_per_s": 8 * 4096 / seq_len / step_s, "tokens_per_s": 8000.0}[kind]
    assert predicted_metric(mapped(entry), prediction) == pytest.approx(expected)


@pytest.mark.parametrize(("framework", "read"), [("torchtitan (PyTorch FSDP2)", True), ("Megatron-LM", False)])
def test_a_bare_tps_is_per_gpu_under_torchtitan_only(framework, read):
    """torchtitan logs tps (wps before 2025) per device: under torchtitan a bare 'TPS' / 'WPS' is tokens/s per
    GPU; under another framework a bare TPS may be the cluster's, and is not read."""
    for key in ("TPS", "wps"):
        entry = case(training={"framework": framework})
        entry["metrics"] = {key: 5762}
        metric = choose_metric(parse(entry)[0])
        assert (metric is not None and metric.kind == "tokens_per_s_per_gpu") is read


@pytest.mark.parametrize("metrics", [{"aggregate_TFLOPs": 900.0}, {"HFU_%": 55.0}, {"speedup_over_baseline": 1.3},
                                     {"scaling_efficiency_tokens_per_s_per_gpu": 0.9}, {"peak_memory_GiB": 60}])
def test_totals_utilisations_of_other_flops_and_ratios_are_not_throughputs(metrics):
    """Cluster totals of FLOPs, hardware-FLOP utilisation, speedups, scaling ratios and memory: no metric."""
    entry = case()
    entry["metrics"] = metrics
    assert choose_metric(parse(entry)[0]) is None


@pytest.mark.parametrize(("text", "value"), [("49%", 49.0), ("1,234", 1234.0), ("12.5k", 12500.0), ("~2M", 2e6),
                                           ("1,234.5", 1234.5), ("1,5", None), ("n/a", None)])
def test_published_figures_written_as_text(text, value):
    """A figure as the source printed it: thousands separators, k / M suffixes, an approximate sign; a decimal
    comma or a word is no number (the case then has no such metric)."""
    entry = case()
    entry["metrics"] = {"tokens_per_sec_per_GPU": text}
    metric = choose_metric(parse(entry)[0])
    assert (metric.published if metric else None) == value


def test_the_tables_names_come_first_and_a_worded_tokens_per_gpu_converts_them():
    """TFLOP/s by the table's name wins over a worded tokens/s per GPU, which then gives the source's FLOPs per
    token: 400 TFLOP/s at 1,250 tokens/s, predicted at 1,000 tokens/s, reads 320."""
    entry = case()
    entry["metrics"] = {"tokens_per_second_per_gpu": 1250, "model_TFLOP_per_GPU": 400}
    assert choose_metric(parse(entry)[0]).key == "model_TFLOP_per_GPU"
    prediction = fake_prediction(n_gpus=8, tokens_per_step=8 * 4096, tokens_per_s_per_gpu=1000.0)
    assert predicted_metric(mapped(entry), prediction) == pytest.approx(320.0)


def test_predicted_metric_conversions_by_hand():
    """1000 tokens/s/GPU at 6 GFLOP/token = 6 TFLOP/s/GPU = 0.6% MFU of 1000; hardware FLOPs with full
    recompute: x 4/3 = 8 TFLOP/s. Where the source publishes its tokens/s beside them, its own FLOPs per token
    convert instead: 408 TFLOP/s at 1007 tokens/s predicted at 1000 tokens/s reads 408 x 1000 / 1007, whatever
    the model's own FLOP count, and 41.25% MFU likewise."""
    prediction = fake_prediction(n_gpus=8, tokens_per_step=8 * 4096, tokens_per_s_per_gpu=1000.0)
    no_tokens = {"throughput_tokens_per_s_per_GPU": None}
    tokens = mapped(case(metrics={"model_TFLOP_per_GPU": None, "MFU_%": None}))
    model_tflops = mapped(case(metrics=no_tokens))
    mfu = mapped(case(metrics={**no_tokens, "model_TFLOP_per_GPU": None}))
    hardware = mapped(case(metrics=no_tokens, note="hardware TFLOPs incl. activation recompute"))
    assert predicted_metric(tokens, prediction) == pytest.approx(1000.0)
    assert predicted_metric(model_tflops, prediction) == pytest.approx(6.0)
    assert predicted_metric(mfu, prediction) == pytest.approx(0.6)
    assert choose_metric(hardware.case).hardware_flops
    assert predicted_metric(hardware, prediction) == pytest.approx(8.0)
    quarter = mapped(case(metrics=no_tokens, note="hardware TFLOPs incl. activation recompute",
                          training={"activation_checkpointing": "full", "recompute_layers": 20}))
    assert predicted_metric(quarter, prediction) == pytest.approx(6.0 * (1 + 1 / 3 * 20 / 80))  # 20 of 80 layers
    assert predicted_metric(mapped(FOUNDRY_70B), prediction) == pytest.approx(408.0 * 1000.0 / 1007.0)
    source_mfu = mapped(case(metrics={"model_TFLOP_per_GPU": None}))
    assert predicted_metric(source_mfu, prediction) == pytest.approx(41.25 * 1000.0 / 1007.0)
    other_count = fake_prediction(n_gpus=8, tokens_per_step=8 * 4096, tokens_per_s_per_gpu=1000.0,
                                  flops_per_token=9e9)
    assert predicted_metric(mapped(FOUNDRY_70B), other_count) == predicted_metric(mapped(FOUNDRY_70B), prediction)


def test_a_step_time_beside_the_tflops_gives_the_sources_own_flops():
    """A published step time converts like tokens/s: 245 TFLOP/s at 19.7 s a step, predicted at 17.83 s, reads
    245 x 19.7 / 17.83, whatever the model's own FLOP count."""
    entry = case(metrics={"throughput_tokens_per_s_per_GPU": None, "MFU_%": None, "step_time_s": 19.7})
    prediction = fake_prediction(n_gpus=8, tokens_per_step=8 * 4096, tokens_per_s_per_gpu=4096 / 17.83)
    assert predicted_metric(mapped(entry), prediction) == pytest.approx(408.0 * 19.7 / 17.83)


def test_a_source_counting_half_of_causal_attention():
    """Megatron-LM's FLOP counter halves causal attention's score FLOPs from Megatron-Core 0.12 (commit 8873b55):
    a case naming such a version, or stating flops_counting: causal, is compared in that count, the model's
    FLOPs less half of 3 x 2 x 2 s (q + out) a token and layer; older versions and flops_counting: full are not."""
    prediction = fake_prediction(n_gpus=8, tokens_per_step=8 * 4096, tokens_per_s_per_gpu=1000.0)
    no_tokens = {"throughput_tokens_per_s_per_GPU": None, "MFU_%": None}
    model = transformer(mapped(case(metrics=no_tokens)).model)
    full = model.model_flops_per_token(2048)
    scores = 80 * 3 * 2 * 2048 * (8192 + 8192)  # MPT-70B: 80 layers, 64 heads of 128
    share = (full - scores / 2) / full
    for training, halved in [({"framework": "Megatron-Core 0.13 (Megatron-LM)"}, True),
                             ({"framework": "Megatron-LM (megatron-core core_v0.6.0)"}, False),
                             ({"flops_counting": "causal"}, True), ({"framework": "MCore v0.12", "flops_counting":
                                                                      "full"}, False)]:
        entry = mapped(case(metrics=no_tokens, training=training))
        assert counts_causal_half(entry.case) is halved
        assert predicted_metric(entry, prediction) == pytest.approx(6.0 * (share if halved else 1.0))
    with_tokens = mapped(case(training={"flops_counting": "causal"}, metrics={"MFU_%": None}))
    assert predicted_metric(with_tokens, prediction) == pytest.approx(408.0 * 1000.0 / 1007.0)  # its own count
    bad = parse(case(training={"flops_counting": "half"}))[0]
    assert "training.flops_counting: expected full or causal" in str(bad.problem)


def test_a_causal_count_share_holds_the_jobs_mtp_modules():
    """With a multi-token prediction module the share is of the job's FLOPs (its block's scores halved too), as the
    prediction's TFLOP/s count them: (full - half of 81 layers' scores) / full, the MTP block being a layer."""
    entry = mapped(case(metrics={"throughput_tokens_per_s_per_GPU": None, "MFU_%": None},
                        training={"flops_counting": "causal", "mtp_num_layers": 1}))
    full = transformer(entry.model, 1).model_flops_per_token(2048)
    scores = 81 * 3 * 2 * 2048 * (8192 + 8192)
    assert counted_share(entry) == pytest.approx((full - scores / 2) / full, rel=1e-12)


def test_hardware_flops_with_selective_recompute_is_skipped():
    """A source counting recomputation, run with selective recompute: the share is unknown, so skipped."""
    entry = case(metrics={"throughput_tokens_per_s_per_GPU": None}, note="hardware TFLOPs (4*2 coefficient)",
                 training={"activation_checkpointing": "selective"})
    result = evaluate(parse(entry), fake_predictor).cases[0]
    assert result.predicted is None and "counts recomputation" in result.skipped


# --- evaluation, baselines, pairs -----------------------------------------------------------------

def test_lookup_table_by_hand():
    """Each entry: the median of the OTHER entries with its key."""
    entries = [("a", 10.0), ("a", 20.0), ("a", 60.0), ("b", 5.0), None]
    assert lookup_table_predictions(entries) == [40.0, 35.0, 15.0, None, None]


def _scaling_set() -> list[dict[str, Any]]:
    """MPT-7b-like FSDP on H100: 8 and 16 GPUs (a pair), 16 GPUs at another micro-batch (no pair), and 16
    GPUs over a 100 Gb/s network (a bandwidth pair with the 16-GPU case), plus a zero3 case."""
    base = case(model={"name": "MPT-7b", "layers": 32, "hidden": 4096, "heads": 32, "ffn": 16384},
                training={"micro_batch": 6, "grad_accum": 1, "global_batch": 48, "activation_checkpointing": False},
                cluster={"num_gpus": 8, "inter_node_bw_per_node": "3200 Gbps"},
                metrics={"model_TFLOP_per_GPU": None, "MFU_%": None})
    return [
        case(base, id="src-8gpu", metrics={"throughput_tokens_per_s_per_GPU": 1000}),
        case(base, id="src-16gpu", training={"global_batch": 96}, cluster={"num_gpus": 16},
             metrics={"throughput_tokens_per_s_per_GPU": 800}),
        case(base, id="src-16gpu-mb3", training={"micro_batch": 3, "global_batch": 48}, cluster={"num_gpus": 16},
             metrics={"throughput_tokens_per_s_per_GPU": 900}),
        case(base, id="src-16gpu-slow", training={"global_batch": 96},
             cluster={"num_gpus": 16, "inter_node_bw_per_node": "100 Gbps"},
             metrics={"throughput_tokens_per_s_per_GPU": 500}),
        case(base, id="other-zero3", training={"strategy": ["zero3"], "fsdp_sharding_strategy": None},
             metrics={"throughput_tokens_per_s_per_GPU": 2000}),
    ]


def test_change_pairs_differ_only_in_gpu_count_or_bandwidth():
    """Pairs: 8 -> 16 GPUs (twice: both 16-GPU networks), and 100 -> 3200 Gb/s at 16 GPUs; not the other
    micro-batch, not the other strategy."""
    cases = [map_case(c) for c in parse(*_scaling_set())]
    pairs = {(cases[i].case.id, cases[j].case.id): change for i, j, change in find_change_pairs(cases)}
    assert pairs == {
        ("src-8gpu", "src-16gpu"): "GPUs 8 -> 16",
        ("src-8gpu", "src-16gpu-slow"): "GPUs 8 -> 16",
        ("src-16gpu-slow", "src-16gpu"): "inter-node 100 -> 3200 Gb/s per node",
    }


def test_evaluate_errors_baseline_change_and_coverage_by_hand():
    """Fake: 1000 tokens/s/GPU on one node, 900 on two. Errors |900-800|/800 = 12.5% etc.; lookup table
    (same GPU, family, metric); change ratio 0.9 vs published 0.8: 12.5% (lookup, ratio 1: 25%)."""
    report = evaluate(parse(*_scaling_set()), fake_predictor)
    errors = {r.id: r.abs_pct_error for r in report.cases}
    assert errors == pytest.approx({"src-8gpu": 0.0, "src-16gpu": 12.5, "src-16gpu-mb3": 0.0,
                                    "src-16gpu-slow": 80.0, "other-zero3": 50.0})
    lookup = {r.id: r.lookup_predicted for r in report.cases}
    assert lookup == {"src-8gpu": 800.0, "src-16gpu": 900.0, "src-16gpu-mb3": 800.0, "src-16gpu-slow": 900.0,
                      "other-zero3": None}
    pair = next(p for p in report.pairs if (p.first, p.second) == ("src-8gpu", "src-16gpu"))
    assert (pair.published_ratio, pair.predicted_ratio) == pytest.approx((0.8, 0.9))
    assert (pair.abs_pct_error, pair.lookup_abs_pct_error) == pytest.approx((12.5, 25.0))
    overall = report.summary()
    assert (overall.cases, overall.in_scope, overall.expressed, overall.coverage) == (5, 5, 5, 1.0)
    assert overall.median_abs_pct_error == pytest.approx(12.5)
    assert (report.summary("other").expressed, report.summary("src").pairs) == (1, 3)


def test_predictor_errors_skip_the_case_and_never_stop_the_run():
    """A ClusterSimError from the predictor skips that case with its message; the others are predicted."""
    def picky(topology, training, model):
        if topology.nodes > 1:
            raise TopologyError("no such layout")
        return fake_predictor(topology, training, model)

    report = evaluate(parse(*_scaling_set()), picky)
    skipped = {r.id: r.skipped for r in report.cases if r.skipped}
    assert skipped == {i: "predictor: no such layout" for i in ("src-16gpu", "src-16gpu-mb3", "src-16gpu-slow")}
    assert report.summary().expressed == 2 and report.summary().coverage == pytest.approx(0.4)


def test_report_json_keys():
    """--json: cases with id, metric, published (the source's number), predicted, abs_pct_error, skipped,
    defaults, model_parallel; overall median, baselines and coverage; per-source summaries, the summaries
    with and without tensor/pipeline parallelism, and the pairs."""
    data = report_to_json(evaluate(parse(*_scaling_set(), BLOOM_176B), fake_predictor))
    row = data["cases"][-1]
    assert {"id", "metric", "published", "predicted", "abs_pct_error", "skipped", "defaults",
            "model_parallel"} <= set(row)
    assert (row["id"], row["metric"], row["published"], row["skipped"], row["model_parallel"]) == \
        ("bloom-176b-production-384gpu", "TFLOPs_per_GPU", 149.77, None, True)
    assert row["predicted"] is not None and data["cases"][0]["skipped"] is None
    assert {"median_abs_pct_error", "lookup_median_abs_pct_error", "change_median_abs_pct_error",
            "change_lookup_median_abs_pct_error", "coverage", "sources", "pairs", "model_parallel",
            "data_parallel_only"} <= set(data)
    assert data["coverage"] == 1.0 and set(data["sources"]) == {"bloom", "other", "src"}
    assert (data["model_parallel"]["n_cases"], data["model_parallel"]["expressed"]) == (1, 1)
    assert (data["data_parallel_only"]["n_cases"], data["data_parallel_only"]["expressed"]) == (5, 5)


def test_power_limit_in_the_gpu_text_caps_the_topology():
    """'(Grand Teton, 500W power limit)' in a case's GPU text becomes gpu_power_limit_w 500."""
    defaults: list[str] = []
    topology, _ = topology_of({"gpu": "H100 SXM 96GB HBM2e (Grand Teton, 500W power limit)", "num_gpus": 8},
                              defaults)
    assert topology.gpu_power_limit_w == 500.0
    plain, _ = topology_of({"gpu": "H100 80GB", "num_gpus": 8}, [])
    assert plain.gpu_power_limit_w is None


@pytest.mark.parametrize(("metrics", "gib"), [({"memory_GiB": 82.4}, 82.4), ({"max_memory": "47GB"}, 47.0),
                                              ({"max_memory": "GB"}, None), ({}, None)])
def test_published_memory_is_read_in_gib(metrics, gib):
    """torchtitan's memory_GiB and BigScience's '47GB' (PyTorch's units of 2^30) as bytes; a bare unit states none."""
    entry = case(FOUNDRY_70B, metrics={"TFLOP_per_GPU": 408, **metrics})
    got = published_memory_bytes(parse(entry)[0])
    assert got == (None if gib is None else pytest.approx(gib * 2**30))


@pytest.mark.skipif(not SHARED_CASES.exists(), reason="the shared cases are not beside the checkout")
def test_memory_of_torchtitans_llama3_8b_runs_is_within_ten_percent():
    """torchtitan's Llama 3.1 8B runs (FSDP, per-op selective checkpointing, eager fp32 cross entropy) publish
    their peak reserved memory: the predicted memory per GPU is within 10% of each."""
    cases = [c for c in parse_cases(SHARED_CASES.read_text(), str(SHARED_CASES))
             if c.id.startswith(("torchtitan-t1-8b", "torchtitan-t3-8b", "torchtitan-t2-8b"))]
    report = evaluate(cases, predict_step)
    errors = {r.id: r.memory_pct_error for r in report.cases}
    assert len(errors) == 7 and all(e is not None and abs(e) < 10.0 for e in errors.values()), errors
    assert memory_summary(report)["cases"] == 7


LONGSEQ_B200 = {
    "id": "nemo-longseq-b200-llama3-8b-32k-32gpu",
    "source": {"title": "NVIDIA NeMo Long Sequence Performance", "table": "LLAMA3-8B (FP8) - B200",
               "url": "https://github.com/NVIDIA/NeMo/blob/8cfedd7203462cb251a914e700e5605444277561/docs/source/"
                      "performance/performance_long_sequence.md"},
    "model": {"name": "LLAMA3-8B", "params": None, "layers": None, "hidden": None, "heads": None, "ffn": None,
              "seq_len": "32K", "vocab": None},
    "training": {"framework": "NeMo 25.04.rc2 (Megatron-Core)", "strategy": ["tp", "pp", "dp", "cp"], "tp": 1,
                 "pp": 1, "dp": 4, "cp": 2, "global_batch": 128, "precision": "FP8"},
    "cluster": {"gpu": "B200 (DGX-B200)", "gpus_per_node": 8, "nodes": 4, "num_gpus": 32, "intra_node": "NVLink"},
    "metrics": {"TFLOPS_per_GPU_with_CP": 1624},
}


def test_a_gpu_count_the_tables_own_layout_contradicts_follows_the_revision_that_agrees():
    """NeMo's B200 long-sequence table lists 32 GPUs beside TP 1 x CP 2 x DP 4 = 8; its previous revision lists
    8 GPUs for the same TFLOPS: the row runs on 8 GPUs (one server), flagged with the revision. The same
    contradiction in another source's table is still skipped, naming both counts."""
    m = mapped(LONGSEQ_B200)
    assert m.skipped is None and m.topology is not None
    assert (m.topology.nodes, m.topology.gpus_per_node) == (1, 8)
    assert any(d.startswith("num_gpus 32 contradicts the stated layout: 8 (NeMo 14d427f575") for d in m.defaults)
    other = case(LONGSEQ_B200, source={"url": "https://example.org/report.md", "table": "B200 runs"})
    assert mapped(other).skipped == "layout tp x pp x cp x dp = 1 x 1 x 2 x 4 = 8 GPUs, but the case has 32 GPUs"


@pytest.mark.parametrize(("framework", "flash"), [
    ("Megatron-LM", False), ("Megatron-LM (commit 8aa4619, NGC PyTorch 20.12)", False), ("megatron-lm v2.0", False),
    ("Megatron-DeepSpeed", False), ("BigScience Megatron-DeepSpeed fork", False),
    ("Megatron-Core", True), ("NeMo 24.07 (Megatron-Core)", True), ("Composer/LLM Foundry (PyTorch FSDP)", True)])
def test_unfused_attention_follows_the_framework_however_it_is_written(framework: str, flash: bool):
    """Megatron-LM before its flash-attention option and BLOOM's Megatron-DeepSpeed ran attention unfused; the
    framework is read as its other conventions are, so a release or commit written beside the name keeps it."""
    m = mapped(case(BLOOM_176B, training={"framework": framework}))
    assert m.skipped is None and m.training is not None, m.skipped
    assert m.training.flash_attention is flash


@pytest.mark.parametrize("framework", ["DeepSpeed 0.14.2", "Microsoft DeepSpeed (ZeRO)", "HF Trainer + DeepSpeed"])
def test_deepspeed_conventions_whatever_is_written_beside_the_name(framework: str):
    """DeepSpeed named with a release or other words beside it takes DeepSpeed's conventions (ZeRO-1/2: each
    bucket all-reduced, the reduce bucket held), as the bare name does; Megatron-DeepSpeed keeps its own."""
    zero2 = {"framework": framework, "strategy": ["zero2"], "zero_stage": 2}
    m = mapped(case(training=zero2))
    assert m.skipped is None and m.training is not None, m.skipped
    s = m.training.strategy
    assert s.bucket_all_reduce and not s.reduce_per_rank and s.contiguous_gradients
    bare = mapped(case(training={**zero2, "framework": "DeepSpeed"})).training
    assert bare is not None and m.training.strategy == bare.strategy


@pytest.mark.parametrize(("group", "shard"), [(8, 8), (-1, None), (None, None)])
def test_a_zero1_group_smaller_than_data_parallelism_shards_the_optimizer_within_it(group, shard):
    """InternEvo's zero1=8 shards optimizer states within groups of 8 data-parallel ranks (shard_group_gpus 8);
    zero1=-1 (all ranks), or none stated, is ZeRO-1 over every data-parallel rank."""
    m = mapped(case(training={"framework": "InternEvo", "strategy": ["zero1"], "zero1_group_size": group}))
    assert m.skipped is None and m.training is not None, m.skipped
    assert (m.training.strategy.kind, m.training.strategy.shard_group_gpus) == ("zero1", shard)
    assert m.training.strategy.zero_grad_all_reduce


@pytest.mark.parametrize(("framework", "per_rank"), [("DeepSpeed 0.9.2", True), ("deepspeed v0.12.3", True),
                                                     ("DeepSpeed 0.12.4", False), ("DeepSpeed 0.16", False)])
def test_a_deepspeed_release_before_0_12_4_reduces_per_rank(framework: str, per_rank: bool):
    """DeepSpeed 0.12.4 (PR #4695) made ZeRO-1/2 all-reduce each bucket; a case naming an earlier release
    reduces with one reduce per rank, flagged."""
    m = mapped(case(training={"framework": framework, "strategy": ["zero1"], "zero_stage": 1}))
    assert m.skipped is None and m.training is not None, m.skipped
    assert m.training.strategy.reduce_per_rank is per_rank
    assert any("one reduce per rank" in d for d in m.defaults) is per_rank


@pytest.mark.parametrize(("strategy", "sharding", "kind", "expected"), [
    (["FSDP FULL_SHARD"], None, "fsdp", "FULL_SHARD"), (["FSDP SHARD_GRAD_OP"], None, "fsdp", "SHARD_GRAD_OP"),
    (["fsdp", "shard_grad_op"], None, "fsdp", "SHARD_GRAD_OP"), (["FSDP HYBRID_SHARD"], None, "hsdp", "HYBRID_SHARD"),
    (["fsdp"], "full_shard", "fsdp", "FULL_SHARD"), (["fsdp"], "SHARD_GRAD_OP (ZeRO-2 like)", "fsdp", "SHARD_GRAD_OP"),
    (["fsdp"], "hybrid shard", "hsdp", "HYBRID_SHARD")])
def test_fsdp_sharding_as_sources_write_it(strategy: list[str], sharding: str | None, kind: str, expected: str):
    """FSDP's sharding strategy named in the strategy list or written in any case and separators is that sharding
    (before: 'FSDP SHARD_GRAD_OP' was an unknown strategy, 'full_shard' an unknown sharding)."""
    m = mapped(case(training={"strategy": strategy, "fsdp_sharding_strategy": sharding}))
    assert m.skipped is None and m.training is not None, m.skipped
    assert (m.training.strategy.kind, m.training.strategy.fsdp_sharding) == (kind, expected)


@pytest.mark.parametrize("value", ["yes", "Yes", "on", "enabled"])
def test_checkpointing_yes_is_full_recomputation(value: str):
    """'yes', 'on' and 'enabled' read as true does: full recomputation (as 'no', 'off' and 'disabled' read as none)."""
    m = mapped(case(training={"activation_checkpointing": value}))
    assert m.skipped is None and m.training is not None and m.training.activation_checkpointing == "full"


@pytest.mark.parametrize("value", ["not stated", "Not stated (tuned per run)", "unknown", "n/a"])
def test_checkpointing_not_stated_in_words_is_the_unstated_default(value: str):
    """A source's "not stated" (or "unknown", "n/a") reads as a field left empty: no recomputation, flagged with the
    text, where it was refused as not understood."""
    m = mapped(case(training={"activation_checkpointing": value}))
    assert m.skipped is None and m.training is not None and m.training.activation_checkpointing == "none"
    assert any(d.startswith("activation_checkpointing not stated") and value in d for d in m.defaults)
    refused = mapped(case(training={"activation_checkpointing": "sometimes"}))
    assert refused.skipped is not None and "not understood" in refused.skipped


@pytest.mark.parametrize("name", ["grad_accum", "gradient_accumulation_steps", "micro_num", "num_microbatches"])
def test_micro_steps_under_the_frameworks_names(name: str):
    """Gradient accumulation stated under Hugging Face's / DeepSpeed's, InternEvo's or Megatron-LM's name is read
    as grad_accum is: 4 micro-steps of micro-batch 2, where an unread name left one micro-step."""
    m = mapped(case(training={"micro_batch": 2, "global_batch": None, "global_batch_tokens": None, "grad_accum": None,
                              name: 4},
                    cluster={"num_gpus": 8, "gpus_per_node": 8, "nodes": 1}))
    assert m.skipped is None and m.training is not None, m.skipped
    assert (m.training.micro_batch, m.training.grad_accum) == (2, 4)
    assert not any(d.startswith("global_batch not stated") for d in m.defaults)


@pytest.mark.parametrize(("training", "refused"), [
    ({"strategy": ["fsdp"], "offload": "parameters offloaded to CPU (FSDP CPUOffload)"}, "CPU offload (offload"),
    ({"strategy": ["fsdp"], "activation_cpu_offload": True}, "CPU offload (activation_cpu_offload"),
    ({"strategy": ["zero3"], "offload": "CPU"}, "ZeRO-Offload (CPU)"),
    ({"strategy": ["fsdp"], "offload": "not stated for this run"}, None),
    ({"strategy": ["fsdp"], "activation_cpu_offload": False}, None),
    ({"strategy": ["zero3"], "offload": "none"}, None),
])
def test_offload_is_refused_whatever_the_strategy(training: dict, refused: str | None):
    """Host-memory offload (ZeRO-Offload, FSDP's CPUOffload, activations saved on the CPU) is not modelled: a case
    stating it is skipped naming it, under FSDP as under ZeRO (FSDP's was priced as plain FSDP); "not stated",
    none or false is no offload."""
    m = mapped(case(training=training))
    if refused is None:
        assert m.skipped is None, m.skipped
    else:
        assert m.skipped is not None and refused in m.skipped and "not expressible" in m.skipped


@pytest.mark.parametrize(("name", "gated", "tied"), [("InternLM 7B", True, False), ("Baichuan2-7B", True, False),
                                                   ("Yi-6B", True, False), ("OLMo 7B", True, False),
                                                   ("Gemma 7B", True, True), ("MPT-7b", False, True)])
def test_llama_block_families_have_a_gated_mlp(name: str, gated: bool, tied: bool):
    """Families built on LLaMA's block (InternLM, Baichuan, Yi, OLMo, ...) and Gemma (GeGLU) have a gated MLP: three
    GEMMs of hidden x ffn, where an unknown family was priced with two (a third of the MLP's work missing)."""
    shape = {"name": name, "params": None, "layers": 32, "hidden": 4096, "heads": 32, "ffn": 11008, "vocab": 100000}
    m = mapped(case(model=shape))
    assert m.skipped is None and m.model is not None, m.skipped
    assert (m.model.gated_mlp, m.model.tied_embeddings) == (gated, tied)
    assert not any(d.startswith("MLP not gated") for d in m.defaults)


def test_an_unknown_family_with_an_unusual_ffn_is_flagged_ungated():
    """A family the reader does not know, with an ffn other than 4 x hidden (a SwiGLU model's sizing, say), is priced
    with an ungated MLP, and says so."""
    shape = {"name": "Acme-LM 7B", "params": None, "layers": 32, "hidden": 4096, "heads": 32, "ffn": 11008,
             "vocab": 100000}
    m = mapped(case(model=shape))
    assert m.skipped is None and m.model is not None and not m.model.gated_mlp
    assert any(d.startswith("MLP not gated") and "Acme-LM 7B" in d for d in m.defaults)
    m = mapped(case(model={**shape, "ffn": 16384}))
    assert m.skipped is None and not any(d.startswith("MLP not gated") for d in m.defaults)


@pytest.mark.parametrize(("framework", "stated", "fused"), [
    ("Megatron-DeepSpeed", "FlashAttention-2", True), ("Megatron-DeepSpeed", "FlashAttention 1.x (1.0.4)", True),
    ("Megatron-DeepSpeed", True, True), ("Megatron-DeepSpeed", None, False),
    ("Megatron-DeepSpeed", "not stated", False),
    ("PyTorch FSDP", "off", False), ("PyTorch FSDP", False, False), ("PyTorch FSDP", "eager attention", False),
    ("PyTorch FSDP", None, True),
])
def test_stated_attention_kernel_wins_over_the_framework_rule(framework: str, stated, fused: bool):
    """A case's own `flash_attention` (true / false, or text naming the kernel or 'off') decides; only an unstated
    one falls back to the framework's era (Megatron-DeepSpeed's published runs: unfused)."""
    m = mapped(case(training={"framework": framework, "flash_attention": stated}))
    assert m.skipped is None and m.training is not None, m.skipped
    assert m.training.flash_attention is fused


@pytest.mark.parametrize(("stated", "kernel"), [
    ({"flash_attention": "FlashAttention 1.x (1.0.4)"}, "flash1"), ({"flash_attention": "flash-attention v1.0.5"},
                                                                    "flash1"),
    ({"attention": "flash_attn 1.0"}, "flash1"), ({"flash_attention": "FlashAttention-2"}, "flash2"),
    ({"flash_attention": True}, "flash2"), ({"flash_attention": "flash attention 2.1"}, "flash2"),
])
def test_flash_attention_1_is_its_own_kernel(stated, kernel):
    """FlashAttention 1.x, named in `flash_attention` or `attention`, runs at its own (half FlashAttention-2's)
    rate; FlashAttention-2 or an unversioned kernel is flash2."""
    m = mapped(case(training={"framework": "PyTorch FSDP", **stated}, id="fsdp-a100-run"))  # not LLM Foundry's
    assert m.skipped is None and m.training is not None, m.skipped
    assert (m.training.flash_attention, m.training.attention_kernel) == (True, kernel)


def test_internevo_packing_into_one_is_full_sequences_and_per_sample_packing_is_bounded_by_seq_len():
    """InternEvo's pack_sample_into_one: true cuts each pack into micro_bsz segments of seq_len tokens, attention over
    each whole segment (PackedDatasetWithoutCuSeqlen's cu_seqlens): the stated micro-batch of full sequences.
    false keeps each sample's boundaries, but PackedDataset cuts every sample at seq_len: without stated lengths
    the micro-batch of full seq_len pieces bounds the attention from above, flagged. A run of another framework
    that packs samples of unstated lengths is skipped: nothing bounds its samples below the packed length."""
    training = {"micro_batch": 8, "global_batch": None, "global_batch_tokens": None, "grad_accum": None,
                "framework": "InternEvo"}
    note = "samples packed into micro_bsz x 2048-token packed sequences"
    one = mapped(case(model={"seq_len": 2048}, training={**training, "pack_sample_into_one": True}, note=note))
    assert one.skipped is None and one.training is not None, one.skipped
    assert (one.training.seq_len, one.training.micro_batch, one.training.packed_sample_len) == (2048, 8, None)
    apart = mapped(case(model={"seq_len": 2048}, training={**training, "pack_sample_into_one": False}))
    assert apart.skipped is None and apart.training is not None, apart.skipped
    assert (apart.training.seq_len, apart.training.micro_batch, apart.training.packed_sample_len) == (2048, 8, None)
    assert any("an upper bound" in d for d in apart.defaults)
    other = mapped(case(model={"seq_len": 2048}, training={**training, "framework": "NeMo",
                                                           "pack_sample_into_one": False}))
    assert other.skipped is not None and "packed_sample_len" in other.skipped
    stated = mapped(case(model={"seq_len": 2048},
                         training={**training, "pack_sample_into_one": False, "packed_sample_len": 1024}))
    assert stated.skipped is None and stated.training is not None and stated.training.packed_sample_len == 1024
    assert not any("an upper bound" in d for d in stated.defaults)


def test_tf32_training_is_refused_naming_the_precision():
    """fp32 training with TF32 matmuls has no precision of its own in the model: the case says so, rather than
    being priced as an unstated bf16 run; TF32 beside a named 16-bit precision is that precision."""
    m = mapped(case(training={"precision": "tf32"}))
    assert m.skipped is not None and "TF32" in m.skipped and "tf32" in m.skipped
    m = mapped(case(training={"precision": "bf16 (tf32 for fp32 ops)"}))
    assert m.skipped is None and m.training is not None and m.training.precision == "bf16"


@pytest.mark.parametrize(("inter_node", "network", "flagged"), [
    ("8x 400Gb/s NDR InfiniBand", ("ib", 8, 400.0), False), ("RoCE v2, 8x200G", ("roce", 8, 200.0), False),
    ("RoCE v2 (8×200G)", ("roce", 8, 200.0), False), ("4 x HDR200 InfiniBand", ("ib", 4, 200.0), False),
    ("NDR400 IB, 8 HCAs", ("ib", 8, 400.0), False), ("2 x 100GbE RoCE", ("roce", 2, 100.0), False),
    ("InfiniBand EDR, one ConnectX-4 HCA (mlx5_0) per node", ("ib", 1, 100.0), False),
    ("Spectrum-X Ethernet 400G", ("roce", 8, 400.0), True), ("3.2 Tbps InfiniBand", ("ib", 8, 400.0), True),
    ("TCP 25GbE", ("ethernet", 8, 25.0), True), ("HDR InfiniBand (Selene)", ("ib", 8, 200.0), True),
    ("InfiniBand, 1600 Gbps", ("ib", 8, 200.0), True), ("RoCE 800 Gb/s per node", ("roce", 8, 100.0), True)])
def test_network_descriptions_as_sources_write_them(inter_node: str, network: tuple[str, int, float], flagged: bool):
    """The inter-node text gives the NICs' rate ('400Gb/s', '200G', '100GbE', InfiniBand's EDR / HDR / NDR, a node's
    '3.2 Tbps', a rate above any NIC's or said per node) and count ('8x', '8 HCAs', 'one HCA'; a part name's number,
    ConnectX-4, is not a count), and the
    transport (Spectrum-X is RoCE, plain Ethernet or TCP NCCL's sockets); a count it does not give is the server
    preset's, flagged (before: the preset's whole network, the text's rate unread)."""
    m = mapped(case(training={"global_batch": 256}, cluster={
        "gpu": "H100 80GB", "gpus_per_node": 8, "nodes": 4, "num_gpus": 32, "inter_node": inter_node,
        "inter_node_bw_per_node": None}))
    assert m.skipped is None and m.topology is not None and m.topology.inter_node is not None, m.skipped
    net = m.topology.inter_node
    assert (net.transport, net.nics_per_node, net.nic_gbps) == network
    assert any(d.startswith("NICs per node not stated") for d in m.defaults) is flagged


@pytest.mark.parametrize(("tokens", "sequences", "read"), [
    (8388608, 4096, "8388608 (8,388,608 tokens)"),  # a plain count: 8,388,608 / 2,048
    ("8M", 4096, "8M (8,388,608 tokens)"),  # not whole in powers of 1000: 8 x 2^20, as Llama's tables write it
    ("8.192M", 4000, "8.192M (8,192,000 tokens)"),  # whole in powers of 1000: read so
])
def test_a_global_batch_in_tokens_alone_gives_the_sequences(tokens: object, sequences: int, read: str):
    """A case stating its batch only in tokens takes global_batch = tokens / seq_len (flagged), so its stated
    micro-batch gets its accumulation (on 512 GPUs of 8 sequences 4,096 sequences are one micro-step, on 8 GPUs of 1
    4,000 are 500)."""
    m = mapped(case(training={"global_batch": None, "grad_accum": None, "global_batch_tokens": tokens,
                              "micro_batch": 8 if sequences == 4096 else 1},
                    cluster={"num_gpus": 512 if sequences == 4096 else 8}))
    assert m.skipped is None
    assert m.training.global_batch == sequences
    assert any(line.startswith(f"global_batch not stated: global_batch_tokens {read}") for line in m.defaults)


def test_a_global_batch_in_tokens_that_is_no_whole_sequences_is_refused():
    m = mapped(case(training={"global_batch": None, "grad_accum": None, "global_batch_tokens": 1000}))
    assert m.skipped == "global_batch_tokens 1000 is not a whole number of 2048-token sequences"


def test_the_model_shape_under_the_frameworks_names():
    """Megatron-LM's flag names (num_layers, hidden_size, num_attention_heads, ffn_hidden_size, num_query_groups,
    padded_vocab_size) and Hugging Face's (num_hidden_layers, intermediate_size, num_key_value_heads, vocab_size)
    are the shape, where before they were passed over and a model of no preset was skipped as shapeless."""
    megatron = {"name": "in-house 70B", "params": None, "layers": None, "hidden": None, "heads": None, "ffn": None,
                "vocab": None, "num_layers": 80, "hidden_size": 8192, "num_attention_heads": 64,
                "num_query_groups": 8, "ffn_hidden_size": 32768, "padded_vocab_size": 50368}
    hf = {"name": "in-house 70B", "params": None, "layers": None, "hidden": None, "heads": None, "ffn": None,
          "vocab": None, "num_hidden_layers": 80, "hidden_size": 8192, "num_attention_heads": 64,
          "num_key_value_heads": 8, "intermediate_size": 32768, "vocab_size": 50368}
    for section in (megatron, hf):
        entry = copy.deepcopy(FOUNDRY_70B)
        entry["model"] = {**section, "seq_len": 2048}
        m = mapped(entry)
        assert m.skipped is None, m.skipped
        shape = m.model
        assert (shape.layers, shape.hidden, shape.heads, shape.kv_heads, shape.ffn_hidden, shape.vocab) == \
            (80, 8192, 64, 8, 32768, 50368)


@pytest.mark.parametrize(("flags", "precision"), [
    ({"fp8": "hybrid"}, "fp8"),  # Megatron-LM's --fp8-format hybrid beside bf16 parameters
    ({"fp8_format": "e4m3"}, "fp8"),
    ({"use_fp8": True}, "fp8"),
    ({"fp8": False}, "bf16"),
    ({"fp8": "none"}, "bf16"),
])
def test_an_fp8_flag_beside_the_parameters_precision_is_fp8_training(flags: dict[str, object], precision: str):
    """A case whose precision names its parameters' dtype (bf16) and whose fp8 flag says the GEMMs run in fp8 is
    fp8 training; before, the flag was passed over and the case priced in bf16."""
    m = mapped(case(training={"precision": "bf16", **flags}))
    assert m.skipped is None and m.training is not None
    assert m.training.precision == precision


@pytest.mark.parametrize(("field", "stated", "fused"), [
    ("use_flash_attn", True, True),  # Megatron-LM's --use-flash-attn: where its published runs were unfused
    ("attn_implementation", "flash_attention_2", True), ("attn_implementation", "sdpa", True),
    ("attn_implementation", "eager", False),  # Hugging Face's
    ("attention_backend", "local", False), ("attention_backend", "flash", True),  # Megatron-Core's
])
def test_the_attention_kernel_under_the_frameworks_names(field: str, stated, fused: bool):
    """The attention kernel stated as the frameworks' flags name it decides as `flash_attention` does; before, such a
    field was passed over and Megatron-LM's era rule priced `--use-flash-attn` runs unfused."""
    m = mapped(case(training={"framework": "Megatron-LM", field: stated}))
    assert m.skipped is None and m.training is not None, m.skipped
    assert m.training.flash_attention is fused


@pytest.mark.parametrize(("training", "depth"), [({"mtp_num_layers": 1}, 1), ({"num_nextn_predict_layers": "1"}, 1),
                                                 ({"mtp_num_layers": 0}, 0), ({}, 0)])
def test_multi_token_prediction_layers_a_case_states(training, depth):
    """Megatron-Core's --mtp-num-layers or the Hugging Face config's num_nextn_predict_layers: the job's MTP modules."""
    result = mapped(case(training=training))
    assert result.skipped is None and result.training.mtp_layers == depth
