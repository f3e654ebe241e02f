"""The training runs kept out of ../shared/data/training/cases.yaml, in its schema, so that `validate-training` on
them is an out-of-sample error: NVIDIA NeMo's published pre-training tables (benchmarks/data/
heldout_training_cases.yaml) and the runs of twelve other sources (outside_sources_training_cases.yaml: IBM's
fms-fsdp README tables, torchtitan's 2024 performance page, NVIDIA's DGX Cloud Benchmarking tables, Trainy's
torchtitan runs, OneFlow DLPerf's Megatron-LM runs on V100, InternEvo's performance page, Megatron-DeepSpeed's rebase
README, the PyTorch blog's float8 + FSDP2 post, TinyLlama's README, DeepSpeed's Azure post and autotuning tutorial,
the Hugging Face blog's FSDP / DeepSpeed comparison).
These tests check the files, not the model's error: they parse, their rows name their sources and none is in
the shared cases, the batch columns agree as the tables print them, and the rows the lowering expresses stay
expressed, the others skipped for the reason their source leaves open.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from simulator.validation.training_cases import map_case, parse_cases

REPO = Path(__file__).resolve().parents[2]
HELDOUT = REPO / "benchmarks" / "data" / "heldout_training_cases.yaml"
OUTSIDE = REPO / "benchmarks" / "data" / "outside_sources_training_cases.yaml"
SHARED_CASES = REPO.parent / "shared" / "data" / "training" / "cases.yaml"
EXPRESSED_AT_LEAST = 33  # of 33


def _cases():
    return parse_cases(HELDOUT.read_text(), str(HELDOUT))


def test_file_parses_and_every_row_is_a_nemoperf_row_with_its_table():
    """33 rows, ids nemoperf-<release>-<system>-..., each naming its page (url) and table."""
    cases = _cases()
    assert len(cases) == 33
    assert {c.source for c in cases} == {"nemoperf"}
    for entry in yaml.safe_load(HELDOUT.read_text()):
        assert entry["source"]["url"].startswith(("https://github.com/NVIDIA/NeMo/", "https://docs.nvidia.com/"))
        assert entry["source"]["table"]
        assert entry["id"].split("-")[2] in ("h100", "b200", "gb200")


@pytest.mark.skipif(not SHARED_CASES.exists(), reason="shared data not checked out next to the repo")
@pytest.mark.parametrize("path", [HELDOUT, OUTSIDE], ids=["heldout", "outside-sources"])
def test_no_row_is_in_the_shared_cases(path: Path):
    """Kept out: no id and no (model, GPUs, published figures) of either file appears in the shared cases."""
    shared = parse_cases(SHARED_CASES.read_text(), str(SHARED_CASES))
    kept_out = parse_cases(path.read_text(), str(path))

    def key(c):
        return str(c.model.get("name")).lower(), c.cluster.get("num_gpus"), frozenset(c.metrics.values())

    assert not {c.id for c in kept_out} & {c.id for c in shared}
    assert not {key(c) for c in kept_out} & {key(c) for c in shared}


def test_batch_columns_agree_as_printed():
    """GBS = MBS x DP x GA on every row that states GA (the 25.x tables), DP = GPUs / (TP x PP x CP); the
    24.07 rows' GBS divides by MBS x DP."""
    for c in _cases():
        t = c.training
        dp = c.cluster["num_gpus"] // (t["tp"] * t["pp"] * t["cp"])
        assert dp == t["dp_derived"], c.id
        if t.get("grad_accum") is not None:
            assert t["global_batch"] == t["micro_batch"] * dp * t["grad_accum"], c.id
        assert t["global_batch"] % (t["micro_batch"] * dp) == 0, c.id


def test_every_row_is_expressed_with_its_stated_schedule():
    """Every row lowers onto the predictor's specs (every model the tables name has a preset; GB200 jobs that do
    not fill whole racks split evenly over them). Stated VP above 1 is the interleaved schedule."""
    mapped = [map_case(c) for c in _cases()]
    expressed = [m for m in mapped if m.skipped is None]
    assert len(expressed) >= EXPRESSED_AT_LEAST, [m.skipped for m in mapped if m.skipped]
    for m in expressed:
        vp = m.case.training.get("vp") or 1
        assert m.training is not None and m.training.parallel.virtual_stages == vp, m.case.id
        assert m.training.parallel.pipeline_schedule == ("interleaved" if vp > 1 else "1f1b"), m.case.id


def _outside():
    return parse_cases(OUTSIDE.read_text(), str(OUTSIDE))


def test_outside_file_parses_and_every_row_names_its_page_and_revision():
    """250 rows of sixteen sources, each with its url (a GitHub file, or a paper with the repository file of its
    configuration), table and the repository commit its figures were read at."""
    assert len(_outside()) == 250
    assert {c.source for c in _outside()} == {"fmsfsdp", "torchtitan2024", "dgxc", "trainy", "dlperf", "internevo",
                                             "mdsrebase", "pytorchf8fsdp2", "tinyllama", "dsazure", "hfblog",
                                             "dsautotune", "mz", "mlm", "flagperf", "neox20b"}
    for entry in yaml.safe_load(OUTSIDE.read_text()):
        assert entry["source"]["url"].startswith(("https://github.com/", "https://arxiv.org/"))
        assert "github.com/" in entry["source"]["url"]
        assert entry["source"]["repo_commit"] and entry["source"]["table"]


def test_outside_rows_expressed_and_the_reason_for_the_others():
    """240 rows are expressed. The 16 fms-fsdp rows that checkpoint every k-th block without saying k take
    the share their README's HFU over MFU implies (13B on A100, eager: 0.59 / 0.51, 19 of 40 layers);
    torchtitan's 'selective layer' takes its option's default, every 2nd block: 16 of Llama 3 8B's 32 layers, 20
    of Llama 2 13B's 40; InternEvo's 32 throughput rows pack samples it cuts at seq_len, priced at that bound.
    Skipped: the float8 post's eight Table 1 rows give no GPU count, the Hugging Face blog's two rows no
    vocabulary. Qwen3's pp 32 x 3 virtual stages over 94 layers run with the embedding and the loss counted as
    layers, as Megatron-Core runs such a split. The ten MaxText
    rows run its save_qkv_proj policy with cuDNN's attention. The DGX Cloud recipes' TP overlap
    (ub_tp_comm_overlap) is read as their configs set it: on in every recipe with TP but Grok 1's, whose
    grok1_314b.yaml sets it false."""
    mapped = [map_case(c) for c in _outside()]
    skipped = [m for m in mapped if m.skipped is not None]
    assert len(mapped) - len(skipped) == 240
    reasons = {"pytorchf8fsdp2": "cluster size not stated", "hfblog": "not stated: vocab"}
    assert all(reasons[m.case.source] in m.skipped for m in skipped)
    assert [sum(m.case.source == source for m in skipped) for source in reasons] == [8, 2]
    blocks = {m.case.id: m.training.recompute_layers for m in mapped if "-blockac-" in m.case.id and m.training}
    assert (len(blocks), blocks["fmsfsdp-a100-128gpu-llama2-13b-fsdp-blockac-eager"]) == (8, 19)
    maxtext = [m.training for m in mapped if "maxtext" in m.case.id and m.training is not None]
    assert len(maxtext) == 10
    assert {(t.activation_checkpointing, t.attention_kernel, t.framework, t.memory_fraction, t.allocator)
            for t in maxtext} == {("save_qkv_proj", "cudnn", "maxtext", 0.94, "xla")}
    # configure.sh: FSDP over every GPU up to 32 nodes, over 16 nodes (128 GPUs) with data parallelism beyond
    assert sorted({(t.strategy.kind, t.strategy.shard_group_gpus) for t in maxtext}, key=str) == [
        ("fsdp", None), ("hsdp", 128)]
    for m in mapped:
        if m.case.source == "dgxc" and m.training is not None:
            on = m.training.parallel.tp > 1 and "grok1" not in m.case.id
            assert m.training.parallel.tp_comm_overlap is on, m.case.id
    layer = [m for m in mapped if m.case.id.endswith("-layerac")]
    assert [(m.training.activation_checkpointing, m.training.recompute_layers) for m in layer] == [
        ("full", 16), ("full", 20)]


def test_dlperf_rows_lower_as_their_run_script_ran_them():
    """DLPerf's Megatron-LM rows (run script mutil_perf_pretrain_gpt_dp_mp_pp.sh: --fp16, --checkpoint-activations,
    seq 2048) on V100-SXM2-16GB servers in the hybrid cube mesh, one 100 Gb/s EDR HCA each across servers; the
    layout of the case name (data x tensor x pipeline) and the non-overlapped all-reduce of Megatron-LM's local DDP."""
    mapped = [map_case(c) for c in _outside() if c.source == "dlperf"]
    assert len(mapped) == 18 and all(m.skipped is None for m in mapped)
    for m in mapped:
        assert m.topology is not None and m.training is not None
        net = m.topology.inter_node
        assert (m.topology.gpu, m.topology.intra_node) == ("V100-SXM2-16GB", "nvlink2-hybrid-cube-mesh")
        if m.topology.nodes > 1:  # a one-server run keeps the preset's network, which it does not use
            assert net is not None and (net.nics_per_node, net.nic_gbps) == (1, 100.0), m.case.id
        assert (m.training.precision, m.training.activation_checkpointing, m.training.seq_len) == ("fp16", "full", 2048)
        dp, tp, pp = (int(x) for x in m.case.id.split("-")[-3].split("x"))
        par = m.training.parallel
        assert (par.tp, par.pp, m.topology.nodes * m.topology.gpus_per_node // (par.tp * par.pp)) == (tp, pp, dp)
        assert not m.training.strategy.overlap_grad_reduce, m.case.id


def test_internevo_rows_lower_with_their_packing_micro_steps_and_gated_mlp():
    """InternEvo's FLOPS rows pack samples into one (pack_sample_into_one: true): micro_bsz sequences of 2,048 tokens
    a micro-step (its packs are cut into seq_len segments), over its `micro_num` micro-steps, with InternLM's gated
    MLP (its public config); its throughput rows keep each sample's boundaries (false), lengths not stated:
    the same micro-batch of full seq_len pieces, the bound InternEvo's PackedDataset cuts samples at, flagged."""
    rows = [c for c in _outside() if c.source == "internevo"]
    flops = [map_case(c) for c in rows if c.id.endswith("-flops")]
    assert len(flops) == 22 and all(m.skipped is None for m in flops)
    for m in flops:
        assert m.training is not None and m.model is not None
        micro_bsz, micro_num = (int(x) for x in re.search(r"-mbs(\d+)-mn(\d+)-", m.case.id).groups())
        assert (m.training.seq_len, m.training.micro_batch) == (2048, micro_bsz), m.case.id
        gpus = m.topology.nodes * m.topology.gpus_per_node  # data parallel over every GPU
        steps = m.training.grad_accum or (m.training.global_batch or micro_bsz * gpus) // (micro_bsz * gpus)
        assert (steps, m.model.gated_mlp) == (micro_num, True), m.case.id
        # the page's numbers date from InternEvo's first commit, whose install doc pins flash-attention v1.0.5
        assert (m.training.attention_kernel, m.training.elementwise_bytes) == ("flash1", 71.0), m.case.id
    throughput = [map_case(c) for c in rows if c.id.endswith("-throughput")]
    assert len(throughput) == 32 and all(m.skipped is None for m in throughput)
    for m in throughput:
        assert m.training is not None and any("an upper bound" in d for d in m.defaults), m.case.id
        micro_bsz = 2 if "-tp1-" in m.case.id else 4  # the page's hyperparameter table
        assert (m.training.seq_len, m.training.micro_batch, m.training.grad_accum) == (2048, micro_bsz, 4)
