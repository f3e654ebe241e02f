"""torchtitan job TOML -> training job: torchtitan's keys and defaults (torchtitan/config/job_config.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from simulator.core.errors import ConfigError
from simulator.importers.torchtitan import import_torchtitan
from simulator.scenario import complete_training
from simulator.training.predict import predict_step
from topologies.presets import load_preset
from workloads.presets import load_model
from workloads.spec import TrainingSpec

DATA = Path(__file__).parent / "data"
BASE = '[model]\nname = "llama3"\nflavor = "8B"\n'


def job(text: str, gpus: int = 64):
    return import_torchtitan(text, "job.toml", gpus, None)


def test_llama3_8b_example():
    """The llama3_8b-style example: the preset, TP 2 with sequence parallelism and async TP (compile on), FSDP
    over the 32 GPUs left (shard -1), local batch 2 as the micro-batch, 2 x 32 a step, op-level selective AC."""
    imported = import_torchtitan((DATA / "llama3_8b.toml").read_text(), "llama3_8b.toml", 64, None)
    t = imported.training
    assert imported.model == "llama3-8b"
    assert t["parallel"] == {"tp": 2, "pp": 1, "cp": 1, "ep": 1, "placement": "tp-dp-pp", "sequence_parallel": True,
                             "tp_comm_overlap": True, "tp_comm_overlap_backward": False}
    assert t["strategy"] == {"kind": "fsdp", "grad_reduce_bytes": 4}  # mixed_precision_reduce float32
    assert (t["micro_batch"], t["global_batch"], t["seq_len"]) == (2, 64, 8192)
    assert (t["activation_checkpointing"], t["precision"], t["fused_elementwise"]) == ("op", "bf16", True)
    assert imported.unknown == [] and imported.warnings == []


def test_defaults_are_torchtitans():
    """Unstated: local batch 8, seq_len 2048, selective AC every 2nd block (full recomputation of 16 of the 32
    layers), no compile (eager element-wise ops), FSDP over every GPU."""
    imported = job(BASE)
    t = imported.training
    assert (t["micro_batch"], t["global_batch"], t["seq_len"]) == (8, 8 * 64, 2048)
    assert (t["activation_checkpointing"], t["recompute_layers"]) == ("full", 16) and imported.warnings == []
    assert t["fused_elementwise"] is False and t["strategy"]["kind"] == "fsdp"


@pytest.mark.parametrize(("compile_section", "loss"), [
    ("", "eager"), ('[compile]\nenable = true\n', "fused"), ('[training]\ncompile = true\n', "fused"),
    ('[compile]\nenable = true\ncomponents = ["model"]\n', "eager"),
    ('[compile]\nenable = false\ncomponents = ["model", "loss"]\n', "eager")])
def test_the_loss_is_compiled_with_the_model_where_components_name_it(compile_section: str, loss: str):
    """torchtitan compiles its fp32 cross entropy with the model unless [compile] components leaves "loss" out
    (components/loss.py; components default ["model", "loss"]): the fused loss's memory, else the eager one's."""
    assert job(BASE + compile_section).training["cross_entropy"] == loss


def test_compile_components_must_be_names():
    with pytest.raises(ConfigError, match="compile.components: expected a list of names"):
        job(BASE + '[compile]\nenable = true\ncomponents = "model"\n')


@pytest.mark.parametrize(("option", "pp", "expected"), [
    ("1", 1, ("full", None)), ("3", 1, ("full", 10)), ("op", 1, ("op", None)), ("2", 2, ("full", 16))])
def test_selective_ac_every_nth_block(option: str, pp: int, expected: tuple[str, int | None]):
    """selective_ac_option n recomputes every n-th of the 32 blocks whole: full with 32 // n layers (n = 1:
    all), with pipeline parallelism too."""
    text = (f'{BASE}[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "{option}"\n'
            f'[parallelism]\npipeline_parallel_degree = {pp}\n')
    imported = job(text)
    t = imported.training
    assert (t["activation_checkpointing"], t.get("recompute_layers")) == expected
    assert imported.warnings == []


@pytest.mark.parametrize(("flavor", "preset"), [("8B", "llama3-8b"), ("70B", "llama3-70b"), ("405B", "llama3-405b")])
def test_llama3_flavors_map_to_presets(flavor: str, preset: str):
    """Each llama3 flavor is the preset of its shape."""
    assert job(f'[model]\nname = "llama3"\nflavor = "{flavor}"\n').model == preset


def test_llama2_flavor():
    """llama2 13B is the llama2-13b preset."""
    assert job('[model]\nname = "llama2"\nflavor = "13B"\n').model == "llama2-13b"


def test_hsdp_beside_tensor_parallelism_predicts():
    """replicate 2 x shard 4 x TP 8 on 8 DGX H100 (torchtitan's 3D layout with HSDP): the imported job predicts,
    its model states sharded over the 4-rank shard groups that span four nodes."""
    imported = job(BASE.replace("8B", "70B") + "[parallelism]\ndata_parallel_replicate_degree = 2\n"
                   "data_parallel_shard_degree = 4\ntensor_parallel_degree = 8\n", gpus=64)
    training = TrainingSpec.model_validate({**imported.training, "model": imported.model})
    model = load_model(imported.model)
    topology = load_preset("dgx-h100", nodes=8)
    hybrid = predict_step(topology, complete_training(training, model, topology), model)
    sharded = training.model_copy(update={"strategy": training.strategy.model_copy(
        update={"kind": "fsdp", "shard_group_gpus": None})})
    full = predict_step(topology, complete_training(sharded, model, topology), model)
    assert hybrid.step_time_s > 0
    assert hybrid.memory.optimizer_bytes == pytest.approx(2 * full.memory.optimizer_bytes, rel=1e-9)


def test_hsdp_ddp_and_explicit_degrees():
    """replicate 2 x shard 32: HSDP with 32-GPU shard groups; replicate 64 alone: DDP."""
    hsdp = job(BASE + "[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 32\n")
    assert hsdp.training["strategy"]["kind"] == "hsdp" and hsdp.training["strategy"]["shard_group_gpus"] == 32
    ddp = job(BASE + "[parallelism]\ndata_parallel_replicate_degree = 64\ndata_parallel_shard_degree = 1\n")
    assert ddp.training["strategy"] == {"kind": "ddp"}


def test_hsdp_shards_over_the_shard_and_context_parallel_ranks():
    """torchtitan's HSDP mesh is (dp_replicate, dp_shard_cp): replicate 2 x shard 4 x CP 2 on 16 GPUs shards over
    groups of 8 ranks, and replicate 8 x CP 2 (shard 1) is HSDP over the 2 context-parallel ranks, not DDP
    (FSDP applies whenever dp_shard or cp exceeds 1; torchtitan parallelize.py)."""
    both = job(BASE + "[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 4\n"
               "context_parallel_degree = 2\n", gpus=16).training["strategy"]
    assert (both["kind"], both["shard_group_gpus"]) == ("hsdp", 8)
    cp_only = job(BASE + "[parallelism]\ndata_parallel_replicate_degree = 8\ndata_parallel_shard_degree = 1\n"
                  "context_parallel_degree = 2\n", gpus=16).training["strategy"]
    assert (cp_only["kind"], cp_only["shard_group_gpus"]) == ("hsdp", 2)


def test_pipeline_micro_batches_and_interleaving():
    """PP 4 with Interleaved1F1B: micro-batches of pipeline_parallel_microbatch_size, 2 stages per rank, FSDP
    keeps parameters after forward, sends overlap compute; global batch 32 = local 4 x dp 8 (no accumulation)."""
    text = BASE + ("[training]\nlocal_batch_size = 4\n[parallelism]\npipeline_parallel_degree = 4\n"
                   "tensor_parallel_degree = 2\npipeline_parallel_schedule = \"Interleaved1F1B\"\n"
                   "pipeline_parallel_microbatch_size = 2\n")
    t = job(text).training
    assert t["parallel"]["pipeline_schedule"] == "interleaved" and t["parallel"]["virtual_stages"] == 2
    assert t["parallel"]["overlap_p2p"] is True and t["strategy"]["reshard_after_forward"] is False
    assert (t["micro_batch"], t["global_batch"]) == (2, 4 * 8)


def test_layers_per_stage_sets_stages_per_rank():
    """pipeline_parallel_layers_per_stage 4 on Llama 3 8B's 32 layers over 4 ranks: 2 stages per rank."""
    text = BASE + ("[parallelism]\npipeline_parallel_degree = 4\npipeline_parallel_schedule = \"Interleaved1F1B\"\n"
                   "pipeline_parallel_layers_per_stage = 4\n")
    assert job(text).training["parallel"]["virtual_stages"] == load_model("llama3-8b").layers // (4 * 4)


def test_older_batch_size_splits_into_pp_micro_batches():
    """Releases with training.batch_size split the local batch into pp micro-batches."""
    t = job(BASE + "[training]\nbatch_size = 8\n[parallelism]\npipeline_parallel_degree = 4\n").training
    assert t["micro_batch"] == 2 and t["global_batch"] == 8 * 16


def test_accumulation_from_global_batch():
    """global_batch_size above local x dp is gradient accumulation: kept as the step's batch."""
    t = job(BASE + "[training]\nlocal_batch_size = 1\nglobal_batch_size = 256\n").training
    assert (t["micro_batch"], t["global_batch"]) == (1, 256)


def test_float8_full_ac_and_context_parallel():
    """converters = ["float8"] is fp8; mode full; CP 2 merges its ring eagerly."""
    text = ('[model]\nname = "llama3"\nflavor = "8B"\nconverters = ["float8"]\n[activation_checkpoint]\n'
            'mode = "full"\n[parallelism]\ncontext_parallel_degree = 2\n')
    t = job(text).training
    assert (t["precision"], t["activation_checkpointing"], t["parallel"]["cp_merge"]) == ("fp8", "full", "eager")


def test_unknown_keys_listed_not_refused():
    """A key torchtitan does not have is listed, the known-but-irrelevant ones are not."""
    imported = job(BASE + "typo_key = 3\n[optimizer]\nlr = 1e-4\n[training]\nseq_lenn = 4096\n")
    assert imported.unknown == ["model.typo_key", "training.seq_lenn"]


@pytest.mark.parametrize(("text", "needle"), [
    ('[model]\nname = "llama3"\nflavor = "debugmodel"\n', "give --model"),
    (BASE + "[parallelism]\ntensor_parallel_degree = 3\n", "do not divide the cluster's 64 GPUs"),
    (BASE + "[parallelism]\ndata_parallel_shard_degree = 16\n", "multiply to 16 GPUs, the cluster has 64"),
    (BASE + "[parallelism]\ntensor_parallel_degree = \"two\"\n", "parallelism.tensor_parallel_degree: expected"),
    (BASE + "[training]\nenable_cpu_offload = true\n", "does not model CPU offload"),
    (BASE + "[activation_checkpoint]\nmode = \"some\"\n", "one of none, selective, full"),
    (BASE + "[training]\nglobal_batch_size = 100\n", "multiple of the local batch"),
    ("[model\nname=", "not valid TOML"),
])
def test_bad_configs_name_the_key(text: str, needle: str):
    """Each bad config is one ConfigError naming the file and the key."""
    with pytest.raises(ConfigError, match="job.toml") as info:
        job(text)
    assert needle in str(info.value)


def test_model_flag_replaces_name_and_flavor():
    """--model replaces [model] name and flavor (a flavor with no preset is then no error, nor unknown)."""
    imported = import_torchtitan('[model]\nname = "llama3"\nflavor = "debugmodel"\n', "job.toml", 8,
                                 load_model("llama2-7b"))
    assert imported.model is None and imported.unknown == []


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]), st.sampled_from([1, 2, 4]))
def test_shard_degree_fills_the_cluster(tp: int, pp: int, cp: int, rep: int):
    """data_parallel_shard_degree -1 takes the GPUs the other degrees leave: replicate x shard x tp x pp x cp is
    the cluster's 64 GPUs, the strategy is HSDP / FSDP / DDP by which of replicate and shard x cp (FSDP's mesh,
    dp_shard_cp) exceed 1, and the step's batch is the local batch times the data-parallel degree."""
    assume(64 % (rep * tp * pp * cp) == 0)
    shard = 64 // (rep * tp * pp * cp)
    text = BASE + (f"[training]\nlocal_batch_size = {pp}\n[parallelism]\ntensor_parallel_degree = {tp}\n"
                   f"pipeline_parallel_degree = {pp}\ncontext_parallel_degree = {cp}\n"
                   f"data_parallel_replicate_degree = {rep}\n")
    t = job(text).training
    kind = "hsdp" if rep > 1 and shard * cp > 1 else "fsdp" if shard * cp > 1 else "ddp"
    assert t["strategy"]["kind"] == kind and t["global_batch"] == pp * rep * shard
    if kind == "hsdp":
        assert t["strategy"]["shard_group_gpus"] == shard * cp
