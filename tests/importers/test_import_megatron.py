"""Megatron-LM argument lists and NeMo overrides -> training job (megatron/training/arguments.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simulator.core.errors import ConfigError
from simulator.importers.megatron import import_megatron
from simulator.importers.megatron_args import parse_arguments
from workloads.model import transformer
from workloads.presets import load_model
from workloads.spec import ModelSpec

DATA = Path(__file__).parent / "data"
SHAPE = "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --vocab-size 32000 "


def job(text: str, gpus: int = 64):
    return import_megatron(text, "args.sh", gpus, None)


def test_gpt3_175b_example():
    """The GPT-3 175B script (bash arrays, $TP, a torchrun prefix): TP 8 (from $TP), PP 8, sequence parallel, the
    distributed optimizer with both overlaps, gradients reduced in fp32 (Megatron's bf16 default), micro-batch 1,
    1536 a step, selective recompute, bf16; the model
    is GPT-3 175B's shape with GPT-2's vocabulary padded to 128 x 8."""
    imported = import_megatron((DATA / "gpt3_175b.sh").read_text(), "gpt3_175b.sh", 1024, None)
    t = imported.training
    assert t["parallel"] == {"tp": 8, "pp": 8, "cp": 1, "ep": 1, "placement": "tp-dp-pp", "sequence_parallel": True}
    assert t["strategy"] == {"kind": "zero1", "overlap_grad_reduce": True, "overlap_param_gather": True,
                             "grad_reduce_bytes": 4, "fp32_grad_copy": False}
    assert (t["micro_batch"], t["global_batch"], t["seq_len"]) == (1, 1536, 2048)
    assert (t["activation_checkpointing"], t["precision"]) == ("selective", "bf16")
    assert isinstance(imported.model, dict)
    model = ModelSpec.model_validate(imported.model)
    gpt3 = load_model("gpt3-175b")
    assert (model.layers, model.hidden, model.heads, model.ffn_hidden) == (gpt3.layers, gpt3.hidden, gpt3.heads,
                                                                           gpt3.ffn_hidden)
    assert model.vocab == 51200 and model.learned_positions and model.tied_embeddings and model.bias
    assert imported.unknown == [] and imported.warnings == []


def test_arguments_split_as_a_shell_does():
    """Backslash-continued lines, --flag=value, quotes, comments, a flag alone, variables."""
    text = 'TP=4\ntorchrun --nproc_per_node 8 pretrain_gpt.py \\\n  --tensor-model-parallel-size=$TP \\\n' \
           '  --bf16 --data-path "/a b" # a comment --fp16\n  --micro-batch-size ${MBS}\n'
    assert parse_arguments(text, "args.sh") == {"nproc_per_node": "8", "tensor-model-parallel-size": "4",
                                                 "bf16": True, "data-path": "/a b", "micro-batch-size": "${MBS}"}


def test_swiglu_gqa_rope_llama_shape():
    """--swiglu sizes the MLP int(4h x 2/3 / 64) x 64 (10880 for 4096: int(170.67) x 64), GQA 8 groups, rope, no
    bias, untied."""
    spec = job(SHAPE + "--swiglu --group-query-attention --num-query-groups 8 --position-embedding-type rope "
               "--disable-bias-linear --untie-embeddings-and-output-weights").model
    assert isinstance(spec, dict)
    assert (spec["ffn_hidden"], spec["kv_heads"], spec["gated_mlp"]) == (10880, 8, True)
    assert not (spec["learned_positions"] or spec["bias"] or spec["tied_embeddings"])


@pytest.mark.parametrize(("flags", "head_dim"), [
    ("--kv-channels 128 --num-attention-heads 64 --hidden-size 4096", 128),  # Qwen3-235B-A22B: 64 x 128 over 4096
    ("--kv-channels 128", 128),  # hidden / heads: the same block as without it
    ("model.kv_channels=null", None),  # NeMo's default: hidden / heads
])
def test_kv_channels_is_the_heads_width(flags: str, head_dim: int | None):
    """--kv-channels (NeMo's model.kv_channels) sets a head's width apart from hidden / heads (Megatron-Core's
    TransformerConfig.kv_channels; None there means hidden / heads)."""
    spec = job(SHAPE + flags).model
    assert isinstance(spec, dict) and spec.get("head_dim") == head_dim
    block = transformer(ModelSpec.model_validate(spec)).blocks[0][0]
    assert block.q_dim == spec["heads"] * (head_dim or spec["hidden"] // spec["heads"])


DSV3_FLAGS = ("--num-layers 61 --hidden-size 7168 --num-attention-heads 128 --ffn-hidden-size 18432 --swiglu "
              "--disable-bias-linear --vocab-size 129280 --num-experts 256 --moe-router-topk 8 "
              "--moe-ffn-hidden-size 2048 "
              "--multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 "
              "--qk-pos-emb-head-dim 64 --v-head-dim 128 ")


def test_deepseek_v3_flags_are_its_shape():
    """DeepSeek-V3 as Megatron-LM's flags give it (its MLA widths, three dense blocks then 58 MoE) is the released
    model's block structure: the preset's MLA and dense_layers."""
    spec = job(DSV3_FLAGS + '--moe-layer-freq "([0]*3+[1]*58)"').model
    assert isinstance(spec, dict)
    model, preset = ModelSpec.model_validate(spec), load_model("deepseek-v3")
    assert (model.mla, model.dense_layers) == (preset.mla, preset.dense_layers)
    assert sorted(n for _, n in transformer(model).blocks) == [3, 58]


@pytest.mark.parametrize(("freq", "dense"), [("1", 0), ("'([0]*3+[1]*58)'", 3), ("([0]+[1]*60)", 1),
                                             ("[0,0]+[1]*59", 2)])
def test_moe_layer_freq_gives_the_leading_dense_blocks(freq: str, dense: int):
    spec = job(DSV3_FLAGS + f"--moe-layer-freq {freq}").model
    assert isinstance(spec, dict) and spec["dense_layers"] == dense


@pytest.mark.parametrize(("freq", "needle"), [
    ("2", "one MoE block in every 2 interleaves dense blocks"),
    ("'([1]*3+[0]*1)*15+[1]'", "dense blocks after the first MoE block are not modelled"),
    ("'[0]*3+[1]*50'", "53 blocks where --num-layers is 61"),
    ("'__import__(1)'", "moe-layer-freq: expected an integer or a list expression"),
    ("'[2]*61'", "moe-layer-freq: expected an integer or a list expression"),
])
def test_moe_layer_freq_the_model_cannot_express_is_refused_saying_why(freq: str, needle: str):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        job(DSV3_FLAGS + f"--moe-layer-freq {freq}")


def test_latent_attention_with_biased_projections_is_refused():
    with pytest.raises(ConfigError, match="--multi-latent-attention without --disable-bias-linear"):
        job(DSV3_FLAGS.replace("--disable-bias-linear ", ""))


def test_recompute_flags():
    """--recompute-granularity full, --checkpoint-activations (full), none by default."""
    assert job(SHAPE + "--recompute-granularity full --recompute-method uniform").training[
        "activation_checkpointing"] == "full"
    assert job(SHAPE + "--checkpoint-activations").training["activation_checkpointing"] == "full"
    assert job(SHAPE).training["activation_checkpointing"] == "none"


def test_block_recompute_of_some_layers():
    """--recompute-method block --recompute-num-layers N recomputes N layers of each model chunk in full: 8 of
    the 32 (recompute_layers 8), 2 of each of 2 stages x 4 virtual stages (16); N at least a chunk's layers
    is all of them (no recompute_layers)."""
    flags = SHAPE + "--recompute-granularity full --recompute-method block --recompute-num-layers "
    some = job(flags + "8")
    assert (some.training["activation_checkpointing"], some.training["recompute_layers"]) == ("full", 8)
    assert some.warnings == []
    staged = job(flags + "2 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 4")
    assert staged.training["recompute_layers"] == 16 and staged.warnings == []
    assert "recompute_layers" not in job(flags + "32").training
    assert "recompute_layers" not in job(flags + "4 --pipeline-model-parallel-size 8").training


def test_virtual_pipeline_and_experts():
    """32 layers, PP 4, 4 layers per virtual stage: 2 stages per rank; 8 experts top-2, EP 8."""
    t = job(SHAPE + "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 4 --num-experts 8 "
            "--expert-model-parallel-size 8 --moe-router-topk 2")
    assert t.training["parallel"]["pipeline_schedule"] == "interleaved"
    assert t.training["parallel"]["virtual_stages"] == 2 and t.training["parallel"]["ep"] == 8
    assert isinstance(t.model, dict) and (t.model["experts"], t.model["experts_per_token"]) == (8, 2)


def test_expert_tensor_parallel_size():
    """--expert-tensor-parallel-size 1 with TP 2 keeps each expert whole (etp 1); unset, Megatron's default is the
    tensor-parallel size, left implicit."""
    moe = SHAPE + "--tensor-model-parallel-size 2 --sequence-parallel --num-experts 8 --expert-model-parallel-size 8 "
    assert job(moe + "--expert-tensor-parallel-size 1").training["parallel"]["etp"] == 1
    assert "etp" not in job(moe).training["parallel"]
    assert "etp" not in job(moe + "--expert-tensor-parallel-size 2").training["parallel"]


def test_pipeline_sends_overlap_only_when_interleaved():
    """Megatron's overlap_p2p_comm is on by default (--no-overlap-p2p-communication turns it off) and only under
    the interleaved schedule: arguments.py turns it off without virtual stages, and the import says so."""
    plain = job(SHAPE + "--pipeline-model-parallel-size 4")
    assert "overlap_p2p" not in plain.training["parallel"]
    assert any("only under the interleaved schedule" in note for note in plain.notes)
    virtual = SHAPE + "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 4 "
    assert job(virtual).training["parallel"]["overlap_p2p"] is True
    assert "overlap_p2p" not in job(virtual + "--no-overlap-p2p-communication").training["parallel"]
    assert "overlap_p2p" not in job(SHAPE).training["parallel"]  # no pipeline: nothing to overlap


def test_nemo_overrides():
    """NeMo's Hydra overrides read as the Megatron flags of the same meaning."""
    imported = job("python megatron_gpt_pretraining.py trainer.num_nodes=8 trainer.devices=8 "
                   "trainer.precision=bf16-mixed "
                   "model.num_layers=32 model.hidden_size=4096 model.num_attention_heads=32 model.num_query_groups=8 "
                   "model.ffn_hidden_size=14336 model.encoder_seq_length=8192 model.tensor_model_parallel_size=2 "
                   "model.sequence_parallel=True model.micro_batch_size=1 model.global_batch_size=128 "
                   "model.activations_checkpoint_granularity=selective model.optim.name=distributed_fused_adam "
                   "model.vocab_size=128256")
    t = imported.training
    assert (t["precision"], t["seq_len"], t["micro_batch"], t["global_batch"]) == ("bf16", 8192, 1, 128)
    assert t["parallel"]["tp"] == 2 and t["parallel"]["sequence_parallel"] is True
    assert t["strategy"]["kind"] == "zero1" and t["activation_checkpointing"] == "selective"
    assert isinstance(imported.model, dict) and imported.model["kv_heads"] == 8


def test_model_flag_replaces_the_shape():
    """With --model the shape flags are not needed."""
    imported = import_megatron("--tensor-model-parallel-size 2", "args.sh", 64, load_model("llama2-7b"))
    assert imported.model is None and imported.training["parallel"]["tp"] == 2


@pytest.mark.parametrize(("text", "needle"), [
    ("--tensor-model-parallel-size 8", "--num-layers, --hidden-size, --num-attention-heads not given"),
    ("--num-layers 2 --hidden-size 64 --num-attention-heads 2 --tokenizer-type HuggingFaceTokenizer",
     "vocabulary size is not in the arguments"),
    (SHAPE + "--tensor-model-parallel-size $TP", "tensor-model-parallel-size: expected an integer"),
    (SHAPE + "--overlap-param-gather", "needs --use-distributed-optimizer"),
    (SHAPE + "--num-distributed-optimizer-instances 2", "needs --use-distributed-optimizer"),
    (SHAPE + "--use-distributed-optimizer --num-distributed-optimizer-instances 3", "must divide the 64"),
    (SHAPE + "--bf16 --fp16", "not both"),
    (SHAPE + "--pipeline-model-parallel-size 3 --num-layers-per-virtual-pipeline-stage 5", "do not split"),
    (SHAPE + "--recompute-granularity some", "recompute-granularity: expected one of"),
    ('--data-path "unclosed', "cannot split into arguments"),
])
def test_bad_arguments_name_the_flag(text: str, needle: str):
    """Each bad argument list is one ConfigError naming the file and the flag."""
    with pytest.raises(ConfigError, match="args.sh") as info:
        job(text)
    assert needle in str(info.value)


def test_distributed_optimizer_instances_are_zero1_groups():
    """--num-distributed-optimizer-instances 4 on 64 GPUs with TP 2: 32 data-parallel ranks, optimizer states sharded
    within groups of 8; one instance (the default) shards over all of them."""
    grouped = job(SHAPE + "--tensor-model-parallel-size 2 --use-distributed-optimizer "
                          "--num-distributed-optimizer-instances 4").training["strategy"]
    assert (grouped["kind"], grouped["shard_group_gpus"]) == ("zero1", 8)
    whole = job(SHAPE + "--use-distributed-optimizer").training["strategy"]
    assert "shard_group_gpus" not in whole


def test_launcher_size_other_than_the_cluster_is_warned():
    """torchrun --nnodes 128 --nproc_per_node 8 on a 64-GPU cluster: one warning, the cluster taken."""
    imported = job("torchrun --nnodes 128 --nproc_per_node 8 pretrain_gpt.py " + SHAPE)
    assert len(imported.warnings) == 1 and "128 nodes x 8 GPUs" in imported.warnings[0]
    assert job("torchrun --nnodes 8 --nproc_per_node 8 pretrain_gpt.py " + SHAPE).warnings == []


def test_model_flag_leaves_no_shape_flag_unknown():
    """With --model, the script's shape flags are replaced, not unknown."""
    imported = import_megatron((DATA / "gpt3_175b.sh").read_text(), "gpt3_175b.sh", 1024, load_model("gpt3-175b"))
    assert imported.model is None and imported.unknown == []


def test_nemo_example_is_llama3_8b():
    """The NeMo Llama 3 8B command line describes the llama3-8b preset's shape exactly."""
    imported = import_megatron((DATA / "nemo_llama3_8b.txt").read_text(), "nemo_llama3_8b.txt", 32, None)
    assert isinstance(imported.model, dict) and imported.unknown == [] and imported.warnings == []
    shape = ModelSpec.model_validate(imported.model).model_dump(exclude={"name", "source"})
    assert shape == load_model("llama3-8b").model_dump(exclude={"name", "source"})


@pytest.mark.parametrize(("flags", "recipe"), [("", "delayed"), ("--fp8-recipe tensorwise ", "tensorwise"),
                                               ("--fp8-recipe MXFP8 ", "mxfp8")])
def test_fp8_recipe_flag(flags: str, recipe: str):
    """--fp8-format turns fp8 on; --fp8-recipe names its scaling (Megatron-Core's default delayed)."""
    t = job(SHAPE + "--bf16 --fp8-format hybrid " + flags).training
    assert (t["precision"], t["fp8_recipe"]) == ("fp8", recipe)


def test_an_fp8_recipe_outside_the_modelled_ones_is_refused_naming_it():
    with pytest.raises(ConfigError, match="fp8-recipe.*custom"):
        job(SHAPE + "--bf16 --fp8-format hybrid --fp8-recipe custom")
