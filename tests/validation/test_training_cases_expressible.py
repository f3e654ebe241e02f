"""Runs users bring, as training cases: mixtures of experts with expert parallelism, FSDP over all GPUs as
MaxText runs it, Megatron's recomputation flags, pipeline runs without a stated micro-batch, and the GPUs in
wide use (H800, A800, H20, GH200, B300, GB300, A10G); a case that still cannot be expressed says why."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from simulator.core.errors import ConfigError
from simulator.training.predict import predict_step
from simulator.validation.training_cases import map_case, parse_cases

# A Megatron-Core Mixtral 8x7B run: TP 2, EP 4, over 64 H100 (hand-made in the cases' schema).
MOE_CASE: dict[str, Any] = {
    "id": "user-mixtral-8x7b-tp2-ep4-64gpu",
    "model": {"name": "Mixtral-8x7B", "seq_len": 4096},
    "training": {"framework": "Megatron-Core", "strategy": ["tp", "ep", "dp"], "tp": 2, "ep": 4, "micro_batch": 1,
                 "global_batch": 256, "precision": "bf16", "activation_checkpointing": "recompute-activations"},
    "cluster": {"gpu": "H100 80GB", "gpus_per_node": 8, "num_gpus": 64},
    "metrics": {"tokens_per_s_per_GPU": 1000},
}


def case(data: dict[str, Any], **sections: dict[str, Any]) -> Any:
    """`data` with some fields of its sections replaced, as one parsed case."""
    entry = copy.deepcopy(data)
    for section, fields in sections.items():
        entry[section].update(fields)
    return parse_cases(yaml.safe_dump([entry]), "test")[0]


def test_expert_parallel_case_lowers_onto_ep():
    """strategy ep with training.ep: ParallelSpec.ep 4 (of DP 32), the released model's experts (Mixtral: 8,
    top-2), sequence parallelism on with TP (Megatron-Core requires it, flagged), Megatron's
    recompute-activations read as selective."""
    mapped = map_case(case(MOE_CASE))
    assert mapped.skipped is None, mapped.skipped
    assert mapped.training is not None and mapped.model is not None
    par = mapped.training.parallel
    assert (par.tp, par.ep, par.sequence_parallel) == (2, 4, True)
    assert (mapped.model.experts, mapped.model.experts_per_token) == (8, 2)
    assert mapped.training.activation_checkpointing == "selective"
    assert any("expert parallelism with tp > 1" in flag for flag in mapped.defaults)
    assert mapped.model_parallel


def test_expert_tensor_parallelism_of_a_case():
    """training.etp 1 (Megatron-Core --expert-tensor-parallel-size 1) is carried; a degree other than 1 or tp says
    it is not modelled."""
    mapped = map_case(case(MOE_CASE, training={"etp": 1}))
    assert mapped.training is not None and mapped.training.parallel.expert_tp == 1
    assert map_case(case(MOE_CASE)).training.parallel.expert_tp == 2  # type: ignore[union-attr]
    skipped = map_case(case(MOE_CASE, training={"tp": 4, "etp": 2})).skipped
    assert skipped is not None and "etp 2" in skipped


def test_expert_parallel_case_predicts():
    """The lowered MoE case runs through the predictor: its expert all-to-alls show as exposed ep_comm."""
    mapped = map_case(case(MOE_CASE, training={"global_batch": 64}))
    assert mapped.topology is not None and mapped.training is not None and mapped.model is not None
    prediction = predict_step(mapped.topology, mapped.training, mapped.model)
    assert prediction.step_time_s > 0.0 and prediction.comm_by_collective_s["ep_comm"] > 0.0


def test_moe_shape_stated_in_the_case():
    """A mixture of experts the case describes itself: experts, experts_per_token, expert_ffn."""
    shape = {"name": "MoE-16x", "layers": 16, "hidden": 2048, "heads": 16, "vocab": 32000, "ffn": 8192,
             "experts": 16, "experts_per_token": 2, "expert_ffn": 1408}
    mapped = map_case(case(MOE_CASE, model=shape, training={"tp": 1, "ep": 8}))
    assert mapped.skipped is None, mapped.skipped
    assert mapped.model is not None and mapped.training is not None
    assert (mapped.model.experts, mapped.model.experts_per_token, mapped.model.expert_ffn_hidden) == (16, 2, 1408)
    assert mapped.training.parallel.ep == 8


def test_expert_capacity_stated_in_the_case():
    """A capacity factor and padding as the case states them (Megatron-Core's flag names too) reach the routing;
    unstated: dropless, unpadded; on a dense model the prediction refuses it naming training.routing (which
    validate-training reports as the case's skip reason)."""
    plain = map_case(case(MOE_CASE))
    assert (plain.training.routing.capacity_factor, plain.training.routing.pad_to_capacity) == (None, False)
    padded = map_case(case(MOE_CASE, training={"moe_expert_capacity_factor": 1.0,
                                               "moe_pad_expert_input_to_capacity": True}))
    assert (padded.training.routing.capacity_factor, padded.training.routing.pad_to_capacity) == (1.0, True)
    dropping = map_case(case(MOE_CASE, training={"capacity_factor": 1.25}))
    assert (dropping.training.routing.capacity_factor, dropping.training.routing.pad_to_capacity) == (1.25, False)
    dense = {"name": "Llama 2 7B", "layers": 32, "hidden": 4096, "heads": 32, "vocab": 32000, "ffn": 11008}
    refused = map_case(case(MOE_CASE, model=dense, training={"ep": None, "strategy": ["tp", "dp"],
                                                             "capacity_factor": 1.25}))
    with pytest.raises(ConfigError, match="training.routing"):
        predict_step(refused.topology, refused.training, refused.model)


def test_unexpressible_expert_cases_say_why():
    """ep named without a degree; an ep that does not divide the data-parallel ranks; experts without top-k."""
    no_degree = map_case(case(MOE_CASE, training={"ep": None}))
    assert no_degree.skipped == "ep degree not stated"
    uneven = map_case(case(MOE_CASE, training={"ep": 12}))
    assert uneven.skipped == "ep 12 does not divide the 32 data- x context-parallel ranks it splits"
    shape = {"name": "MoE", "layers": 4, "hidden": 512, "heads": 8, "vocab": 1000, "experts": 8}
    assert map_case(case(MOE_CASE, model=shape, training={"tp": 1})).skipped == \
        "mixture of experts: experts_per_token (top-k) not stated"



def test_experts_not_tensor_split_take_the_tensor_parallel_ranks_too():
    """etp 1 (Megatron-Core's MoE parallel folding: each expert whole on one GPU): the expert-parallel group is
    carved from the tensor- x data- x context-parallel ranks, so ep may exceed the data-parallel degree (16 GPUs at
    tp 2: ep 16 over 8 data-parallel ranks); with the experts tensor-split (etp unset: tp) it may not."""
    shape = {"name": "MoE", "layers": 4, "hidden": 512, "heads": 8, "vocab": 1000, "experts": 16,
             "experts_per_token": 2}
    cluster = {"gpu": "H100 80GB", "gpus_per_node": 8, "num_gpus": 16}
    split = map_case(case(MOE_CASE, model=shape, cluster=cluster, training={"ep": 16}))
    assert split.skipped == "ep 16 does not divide the 8 data- x context-parallel ranks it splits"
    folded = map_case(case(MOE_CASE, model=shape, cluster=cluster, training={"ep": 16, "etp": 1}))
    assert folded.skipped is None
    assert (folded.training.parallel.tp, folded.training.parallel.ep, folded.training.parallel.etp) == (2, 16, 1)
    step = predict_step(folded.topology, folded.training, folded.model)
    assert step.step_time_s > 0

@pytest.mark.parametrize(("stated", "dispatcher"), [
    ({}, "alltoall"), ({"moe_token_dispatcher": "DeepEP"}, "deepep"), ({"moe_token_dispatcher_type": "flex"}, "deepep"),
    ({"moe_flex_dispatcher_backend": "hybridep"}, "deepep"), ({"moe_token_dispatcher": "A2A"}, "alltoall"),
    ({"moe_token_dispatcher": "alltoall"}, "alltoall"), ({"moe_token_dispatcher": "alltoall (NCCL)"}, "alltoall"),
])
def test_the_token_dispatcher_of_a_case(stated: dict[str, Any], dispatcher: str):
    """Megatron-Core's dispatcher as a case names it (--moe-token-dispatcher-type, --moe-flex-dispatcher-backend):
    flex (DeepEP unless another backend is named), DeepEP and HybridEP are DeepEP's kernels; unstated, alltoall."""
    m = map_case(case(MOE_CASE, training=stated))
    assert m.skipped is None and m.training.parallel.ep_dispatcher == dispatcher


def test_an_unmodelled_token_dispatcher_is_named():
    """Megatron-Core's allgather dispatcher (every token to every expert-parallel rank) is not modelled: the case says
    so rather than being priced as an all-to-all."""
    m = map_case(case(MOE_CASE, training={"moe_token_dispatcher": "allgather"}))
    assert m.skipped == ("moe_token_dispatcher 'allgather': only alltoall and DeepEP's (flex, deepep, hybridep) are "
                         "modelled")

@pytest.mark.parametrize("fields", [
    {"num_experts": 8, "top_k": 2}, {"num_local_experts": 8, "num_experts_per_tok": 2},
    {"moe_num_experts": 8, "moe_router_topk": 2}, {"experts": "8", "experts_per_token": "top-2"},
])
def test_a_mixture_of_experts_under_its_configs_names_is_read(fields: dict[str, Any]):
    """Hugging Face's and Megatron's names for the experts and top-k are the schema's experts and
    experts_per_token: the model is the same mixture, not a dense model."""
    shape = {"name": "MoE", "layers": 4, "hidden": 512, "heads": 8, "vocab": 1000}
    named = map_case(case(MOE_CASE, model={**shape, "experts": 8, "experts_per_token": 2}, training={"tp": 1}))
    aliased = map_case(case(MOE_CASE, model={**shape, **fields}, training={"tp": 1}))
    assert aliased.model is not None and named.model is not None
    assert (aliased.model.experts, aliased.model.experts_per_token) == (8, 2)
    assert aliased.model.model_copy(update={"source": ""}) == named.model.model_copy(update={"source": ""})


def test_an_unread_expert_field_stops_the_case_naming_it():
    """A key about experts the tool does not read would leave the model dense: the case is skipped naming it."""
    shape = {"name": "MoE", "layers": 4, "hidden": 512, "heads": 8, "vocab": 1000, "expert_capacity_tokens": 64}
    skipped = map_case(case(MOE_CASE, model=shape, training={"tp": 1})).skipped
    assert skipped is not None and "model.expert_capacity_tokens: not a field this tool reads" in skipped


@pytest.mark.parametrize("renamed", [
    {"tensor_model_parallel_size": 2, "tp": None}, {"TP": 2, "tp": None}, {"tensor_parallel_size": 2, "tp": None},
    {"expert_model_parallel_size": 4, "ep": None}, {"micro_batch_size": 1, "micro_batch": None},
    {"global_batch_size": 256, "global_batch": None}, {"train_batch_size": 256, "global_batch": None},
    {"recompute_granularity": "selective", "activation_checkpointing": None},
])
def test_training_fields_under_their_frameworks_names_are_read(renamed: dict[str, Any]):
    """Megatron's, DeepSpeed's and Hugging Face's names for the degrees, batches and recomputation (in any case) are
    the schema's fields: the case lowers as with them."""
    assert map_case(case(MOE_CASE, training=renamed)).training == map_case(case(MOE_CASE)).training


def test_a_distributed_optimizer_stated_under_either_name_is_zero1():
    """`distributed_optimizer: true` (as FlagPerf's tables write Megatron-LM's --use-distributed-optimizer) shards the
    optimizer as the flag's own name does; without it the Megatron-LM run is plain data parallelism."""
    framework = {"framework": "Megatron-LM"}
    named = map_case(case(MOE_CASE, training={**framework, "use_distributed_optimizer": True})).training
    aliased = map_case(case(MOE_CASE, training={**framework, "distributed_optimizer": True})).training
    plain = map_case(case(MOE_CASE, training=framework)).training
    assert named is not None and aliased is not None and plain is not None
    assert aliased == named and aliased.strategy.kind == "zero1" and plain.strategy.kind == "ddp"


@pytest.mark.parametrize("renamed", [
    {"gpu_type": "H100 80GB", "gpu": None}, {"world_size": 64, "num_gpus": None},
    {"num_nodes": 8, "num_gpus": None}, {"gpus_per_host": 8, "gpus_per_node": None},
])
def test_cluster_fields_under_other_names_are_read(renamed: dict[str, Any]):
    """The cluster's GPU, counts and network as other tables head them lower as the schema's names do."""
    assert map_case(case(MOE_CASE, cluster=renamed)).training == map_case(case(MOE_CASE)).training
    assert map_case(case(MOE_CASE, cluster=renamed)).topology == map_case(case(MOE_CASE)).topology


def test_a_parallel_degree_under_a_name_not_read_stops_the_case_naming_it():
    """Left unread, a degree would change the layout silently."""
    skipped = map_case(case(MOE_CASE, training={"data_model_parallel_degree": 4})).skipped
    assert skipped is not None and "training.data_model_parallel_degree: not a field this tool reads" in skipped


def test_a_sequence_length_in_the_training_section_is_the_models():
    """`training.seq_length` (as configs write it) where the model section leaves the length out."""
    mapped = map_case(case(MOE_CASE, model={"seq_len": None}, training={"seq_length": 8192}))
    assert mapped.training is not None and mapped.training.seq_len == 8192


def test_sequence_parallelism_set_by_the_case():
    """`sequence_parallel: true` is Megatron's sequence parallelism as 'sp' in the strategy is; `false` turns off a
    framework's default of it (NeMo's), and the TP overlap that needs it."""
    nemo = {"framework": "NeMo 24.07", "strategy": ["tp", "dp"], "ep": None, "tp": 2}
    default = map_case(case(MOE_CASE, training=nemo))
    assert default.training is not None and default.training.parallel.sequence_parallel
    off = map_case(case(MOE_CASE, training={**nemo, "sequence_parallel": "false"}))
    assert off.training is not None and not off.training.parallel.sequence_parallel
    assert not off.training.parallel.tp_comm_overlap
    on = map_case(case(MOE_CASE, training={"framework": "in-house", "strategy": ["tp", "dp"], "ep": None,
                                           "sequence_parallel": True}))
    assert on.training is not None and on.training.parallel.sequence_parallel

# MaxText's default sharding on GPUs: FSDP over every device (ici_fsdp_parallelism -1 in a node,
# dcn_fsdp_parallelism over nodes), written as the fsdp degree = the GPU count.
MAXTEXT: dict[str, Any] = {
    "id": "user-maxtext-llama2-7b-fsdp64",
    "model": {"name": "LLAMA2-7B", "seq_len": 4096},
    "training": {"framework": "MaxText (JAX)", "strategy": ["fsdp"], "fsdp": 64, "micro_batch": 4,
                 "precision": "bf16", "activation_checkpointing": "full"},
    "cluster": {"gpu": "H100 80GB", "gpus_per_node": 8, "num_gpus": 64},
    "metrics": {"MFU_%": 50},
}


def test_maxtext_fsdp_over_all_gpus_is_full_shard():
    """fsdp degree = all 64 GPUs: FULL_SHARD over every rank; dcn data parallelism over ici FSDP (fsdp 8 of 64)
    is hybrid sharding with a node-wide shard group."""
    everywhere = map_case(case(MAXTEXT))
    assert everywhere.skipped is None and everywhere.training is not None
    assert (everywhere.training.strategy.kind, everywhere.training.strategy.fsdp_sharding) == ("fsdp", "FULL_SHARD")
    hybrid = map_case(case(MAXTEXT, training={"fsdp": 8}))
    assert hybrid.training is not None
    assert (hybrid.training.strategy.kind, hybrid.training.strategy.shard_group_gpus) == ("hsdp", 8)


def test_pipeline_case_without_micro_batch_takes_one():
    """A pipeline run stating only its global batch: micro-batch 1 (Megatron-LM's pipeline scripts), so
    1536 / (DP 16 x 1) = 96 micro-batches, not one micro-batch of the whole local batch."""
    gpt3 = {"id": "user-gpt3-175b-tp8-pp8", "model": {"name": "GPT-3 175B", "layers": 96, "hidden": 12288,
                                                      "heads": 96, "vocab": 51200, "seq_len": 2048},
            "training": {"framework": "Megatron-LM", "strategy": ["tp", "pp", "dp"], "tp": 8, "pp": 8,
                         "global_batch": 1536, "activation_checkpointing": "recompute-granularity full"},
            "cluster": {"gpu": "A100 80GB", "gpus_per_node": 8, "num_gpus": 1024}, "metrics": {"MFU_%": 50}}
    mapped = map_case(case(gpt3))
    assert mapped.training is not None
    assert (mapped.training.micro_batch, mapped.training.global_batch) == (1, 1536)
    assert mapped.training.activation_checkpointing == "full"
    assert "micro_batch not stated: 1 with pipeline parallelism (Megatron-LM's example scripts)" in mapped.defaults


def test_gpus_in_wide_use_lower_onto_their_servers():
    """H800 and A800 on their 8-link NVSwitch boards, H20 and B300 on the boards of their generation, GB300 in
    an NVL72 rack, GH200 four to a node in a NVLink mesh, A10G on a PCIe server (the server flagged)."""
    expected = {"H800 80GB": ("H800-SXM5-80GB", "nvswitch-nvlink4-8links", 8),
                "A800 80GB": ("A800-SXM4-80GB", "nvswitch-nvlink3-8links", 8),
                "H20": ("H20-96GB", "nvswitch-nvlink4", 8), "B300": ("B300-288GB", "nvswitch-nvlink5", 8),
                "GB300 NVL72": ("GB300", "nvlink5-nvl72", 4), "GH200": ("GH200-96GB", "nvlink4-full-mesh-4", 4),
                "A10G": ("A10G", "pcie4", 8)}
    for text, (gpu, intra, per_node) in expected.items():
        mapped = map_case(case(MAXTEXT, cluster={"gpu": text, "gpus_per_node": None}))
        assert mapped.skipped is None and mapped.topology is not None, (text, mapped.skipped)
        assert (mapped.topology.gpu, mapped.topology.intra_node, mapped.topology.gpus_per_node) == \
            (gpu, intra, per_node), text
    gb300 = map_case(case(MAXTEXT, cluster={"gpu": "GB300 NVL72", "gpus_per_node": None})).topology
    assert gb300 is not None and (gb300.name, gb300.inter_node.nics_per_node, gb300.inter_node.nic_gbps) == \
        ("gb300-nvl72", 4, 800.0)  # the rack's ConnectX-8 network, not GB200's
    b300 = map_case(case(MAXTEXT, cluster={"gpu": "B300", "gpus_per_node": None})).topology
    assert b300 is not None and (b300.name, b300.inter_node.nics_per_node, b300.inter_node.nic_gbps) == \
        ("dgx-b300", 8, 800.0)


def test_released_preset_at_a_shorter_sequence_than_its_training_context():
    """A case running Llama 3.1 405B (preset trained at 8,192) at 4,096 tokens takes the preset's shape at the
    case's sequence: no conflict between the preset's training context and the case's."""
    mapped = map_case(case(MOE_CASE, model={"name": "LLAMA3-405B", "seq_len": 4096},
                           training={"strategy": ["tp", "pp", "dp"], "tp": 8, "pp": 8, "ep": None},
                           cluster={"num_gpus": 512}))
    assert mapped.skipped is None, mapped.skipped
    assert mapped.model is not None and mapped.training is not None
    assert (mapped.model.layers, mapped.model.max_seq_len, mapped.training.seq_len) == (126, 4096, 4096)


# A Megatron-Core pipeline whose 94 layers do not divide over pp 8 x vp 4 = 32 chunks, 96 do (Qwen3-235B's layout).
PIPELINE_CASE: dict[str, Any] = {
    "id": "user-94-layers-pp8-vp4",
    "model": {"name": "Deep", "layers": 94, "hidden": 4096, "heads": 32, "ffn": 11008, "vocab": 32000,
              "seq_len": 4096},
    "training": {"framework": "Megatron-Core", "strategy": ["tp", "pp", "dp"], "tp": 2, "pp": 8, "vp": 4,
                 "micro_batch": 1, "global_batch": 512, "precision": "bf16", "activation_checkpointing": "none"},
    "cluster": {"gpu": "H100 80GB", "gpus_per_node": 8, "num_gpus": 256},
    "metrics": {"tokens_per_s_per_GPU": 1000},
}


@pytest.mark.parametrize(("training", "split", "flagged"), [
    ({}, "embedding_and_loss", True),
    ({"framework": "Megatron-DeepSpeed"}, "layers", False),  # DeepSpeed's pipeline partitions by layers
    ({"pp": 4, "vp": 5}, "layers", False),  # 94 layers over 20 chunks: uneven either way (stage counts needed)
    ({"account_for_embedding_in_pipeline_split": True, "account_for_loss_in_pipeline_split": True},
     "embedding_and_loss", False),
    ({"pipeline_split": "layers", "layers": 94}, "layers", False),
])
def test_the_pipeline_split_of_a_case(training: dict[str, Any], split: str, flagged: bool):
    """Megatron-Core runs layers that do not divide over pp x vp chunks, when two more do, by counting the embedding
    and the loss as layers (--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split); a case
    under Megatron's frameworks that leaves it unsaid is read so (flagged), one that states the flags or a split
    keeps them, and DeepSpeed's pipelines split by layers."""
    training = {key: value for key, value in training.items() if key != "layers"}
    m = map_case(case(PIPELINE_CASE, training=training))
    assert m.skipped is None, m.skipped
    assert m.training.parallel.pipeline_split == split
    assert any("pipeline split not stated" in flag for flag in m.defaults) == flagged


def test_one_account_for_flag_alone_is_named():
    """Counting only the embedding (or only the loss) as a layer is not modelled: the case says so."""
    m = map_case(case(PIPELINE_CASE, training={"account_for_loss_in_pipeline_split": True}))
    assert m.skipped is not None and "only one of account_for_embedding_in_pipeline_split" in m.skipped


def test_more_chunks_than_layers_runs_with_the_embedding_and_loss_counted():
    """pp 32 x vp 3 = 96 chunks over 94 layers: refused split by layers (two chunks would hold none), priced with the
    embedding and the loss each in a chunk of its own."""
    m = map_case(case(PIPELINE_CASE, training={"pp": 32, "vp": 3, "tp": 1}))
    assert m.skipped is None and m.training.parallel.pipeline_split == "embedding_and_loss"
    assert predict_step(m.topology, m.training, m.model).step_time_s > 0
