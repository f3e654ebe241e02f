"""The flags that describe a training job, defined once for every command that takes them (predict, scale,
plan): the same name, help text and units everywhere, and how they override a scenario.

Counts take suffixes (`--global-batch 4K` is 4,000 sequences, `--global-batch-tokens 16M` is 16,000,000
tokens and 4Mi 4,194,304: simulator.core.units.parse_count).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from simulator.cli.common import count_option, parse_env, read_yaml
from simulator.collectives.nccl_releases import release_option
from simulator.collectives.select import selection_option
from simulator.core.errors import ConfigError
from simulator.core.units import binary_count_text
from simulator.scenario import ScenarioSpec, scenario_from_data
from simulator.scenario_overrides import PARALLEL_OPTIONS, ROUTING_OPTIONS, apply_options
from topologies.spec import TopologySpec
from workloads.spec import ModelSpec, TrainingSpec

ScenarioArg = Annotated[Path | None, typer.Argument(help="Scenario YAML (default: the embedded scenario).")]
TopologyOpt = Annotated[str | None, typer.Option(help="Topology preset or YAML file.")]
NodesOpt = Annotated[int | None, typer.Option(help="Nodes (servers); default: the topology's.")]
GpusOpt = Annotated[int | None, typer.Option(
    help="GPUs per node. Fewer than a preset's server holds, on a server with a NIC per GPU (DGX / HGX), take the "
         "NICs of the GPUs used (4 of a DGX H100's 8).")]
ModelOpt = Annotated[str | None, typer.Option(help="Model preset, model YAML, or HuggingFace config.json.")]
StrategyOpt = Annotated[str | None, typer.Option(
    help="Data-parallel strategy: ddp, zero1, zero2, zero3, fsdp or hsdp.")]
TpOpt = Annotated[int | None, typer.Option(help="Tensor-parallel degree (GPUs sharing each layer).")]
PpOpt = Annotated[int | None, typer.Option(help="Pipeline-parallel degree (stages).")]
CpOpt = Annotated[int | None, typer.Option(
    help="Context-parallel degree (GPUs splitting each sequence; ring attention).")]
CpCommOpt = Annotated[str | None, typer.Option(
    help="Context parallelism by p2p (a key/value ring behind attention) or a2a (DeepSpeed-Ulysses all-to-alls).")]
EpOpt = Annotated[int | None, typer.Option(
    help="Expert-parallel degree (GPUs of the data-parallel group splitting each MoE block's experts; all-to-all "
    "token dispatch).")]
EtpOpt = Annotated[int | None, typer.Option(
    help="Expert tensor-parallel degree: 1 keeps each expert whole on one GPU and takes the expert-parallel ranks "
    "from consecutive GPUs (Megatron-Core --expert-tensor-parallel-size 1); default: --tp.")]
EpOverlapOpt = Annotated[bool | None, typer.Option(
    "--ep-overlap/--no-ep-overlap", help="Hide each pass's expert all-to-alls behind another micro-batch's compute "
    "(Megatron-Core --overlap-moe-expert-parallel-comm, DualPipe; needs --ep > 1).")]
EpDispatcherOpt = Annotated[str | None, typer.Option(
    help="How the expert all-to-alls move tokens: alltoall (NCCL's, Megatron-Core's default dispatcher) or deepep "
    "(DeepEP's kernels, the flex dispatcher: once per node over the network, then NVLink).")]
PadToCapacityOpt = Annotated[bool | None, typer.Option(
    "--pad-to-capacity/--no-pad-to-capacity", help="Every expert runs its full capacity, padded (needs "
    "--capacity-factor).")]
SequenceParallelOpt = Annotated[bool | None, typer.Option(
    "--sequence-parallel/--no-sequence-parallel", help="Megatron sequence parallelism (needs --tp > 1).")]
ScheduleOpt = Annotated[str | None, typer.Option(help="Pipeline schedule: 1f1b, gpipe or interleaved.")]
VirtualStagesOpt = Annotated[int | None, typer.Option(help="Model chunks per stage (interleaved).")]
PipelineSplitOpt = Annotated[str | None, typer.Option(
    help="How layers divide among pipeline chunks: layers (default) or embedding_and_loss (the embedding and the "
    "output layer each take a layer's place, Megatron-Core --account-for-embedding/loss-in-pipeline-split).")]
PipelineLayoutOpt = Annotated[str | None, typer.Option(
    help="What each pipeline chunk holds, Megatron-Core's --pipeline-model-parallel-layout: E the embedding, t a "
    "layer, L the loss, | between chunks, (...)*n and t*n repeats; e.g. 'Et|(tt|)*30L' (61 layers, --pp 8: 4 "
    "chunks a stage, interleaved). Replaces --pipeline-split.")]
PlacementOpt = Annotated[str | None, typer.Option(
    help="Order of tp/pp/dp over consecutive ranks, innermost first, e.g. tp-pp-dp (default) or tp-dp-pp.")]
MicroBatchOpt = Annotated[int | None, typer.Option(help="Sequences per GPU per micro-step.")]
GlobalBatchOpt = Annotated[str | None, typer.Option(
    metavar="COUNT", help="Sequences per optimizer step: 1536, 4K (K, M: powers of 1000).")]
GlobalBatchTokensOpt = Annotated[str | None, typer.Option(
    metavar="TOKENS", help="The global batch in tokens instead (sequences x sequence length): 16M (powers of 1000) "
    "or 4Mi (powers of 1024); divided by the sequence length, which must divide it.")]
SeqLenOpt = Annotated[int | None, typer.Option(help="Tokens per sequence (default: the model's training context).")]
LoraRankOpt = Annotated[int | None, typer.Option(
    help="LoRA fine-tuning: adapters of this rank beside the weight matrices --lora-targets names (default: all of "
    "the blocks'), the weights frozen (the scenario's lora_rank; NeMo's default rank is 32). Default: every weight "
    "trains.")]
LoraTargetsOpt = Annotated[str | None, typer.Option(
    metavar="NAMES", help="With --lora-rank: the matrices that carry adapters, comma-separated: qkv, attn_out, "
    "mlp_up, mlp_down (Megatron's fused layers), q, k, v, gate, up (apart, one adapter each), a framework's names "
    "(linear_qkv, q_proj, o_proj, gate_proj, ...) or all, attention, mlp. NeMo 2.0 adapts all four fused layers, "
    "NeMo 1.x (24.07 and earlier) linear_qkv, Hugging Face PEFT q_proj,v_proj for Llama-like models (the "
    "scenario's lora_targets). Default: all.")]
PackedSampleLenOpt = Annotated[int | None, typer.Option(
    help="Tokens of each sample packed into a sequence, attention within the sample (packed fine-tuning; the "
    "scenario's packed_sample_len). Default: attention over the whole sequence.")]
RecomputeOpt = Annotated[str | None, typer.Option(
    help="Activation recomputation: none, selective, full, op (torchtitan's per-op policy) or a JAX policy as "
    "MaxText names it (save_qkv_proj, minimal, nothing_saveable, ...; remat_policy=NAME too) (the scenario's "
    "activation_checkpointing); Megatron's recompute-activations (selective) and recompute-granularity=full (full) "
    "too.")]
RecomputeLayersOpt = Annotated[int | None, typer.Option(
    help="With --recompute full: how many layers recompute, spread evenly (every k-th layer: layers / k, as "
    "torchtitan's selective_ac_option k; Megatron's --recompute-method block --recompute-num-layers N); the others "
    "keep their activations. Default: all.")]
RecomputeModulesOpt = Annotated[str | None, typer.Option(
    metavar="NAMES", help="With --recompute selective: the submodules each layer re-runs in backward, as "
    "Megatron-Core's --recompute-modules names them, space- or comma-separated: core_attn, layernorm, moe_act, mlp, "
    "moe, shared_experts, mla_up_proj, e.g. 'moe_act layernorm' (the scenario's recompute_modules). Default: "
    "core_attn, Megatron-Core's.")]
MtpLayersOpt = Annotated[int | None, typer.Option(
    min=0, help="Multi-token prediction modules (DeepSeek-V3's MTP, Megatron-Core's --mtp-num-layers): each one more "
    "block of the model's last kind and one more pass through the output layer and loss, on the last pipeline "
    "stage (the scenario's mtp_layers). Default: 0.")]
PrecisionOpt = Annotated[str | None, typer.Option(help="Compute precision: bf16 (default), fp16, fp8 or fp32.")]
Fp8RecipeOpt = Annotated[str | None, typer.Option(
    help="With --precision fp8, how its scales are found (Megatron-Core's --fp8-recipe names): delayed, tensorwise "
    "(per-tensor current scaling: NeMo's 'cs'), mxfp8 or blockwise (the scenario's fp8_recipe). Default: the "
    "framework's (tensorwise under fsdp2, torchao's dynamic scaling), else delayed.")]
ShardGroupOpt = Annotated[int | None, typer.Option(
    min=1, help="With --strategy hsdp: how many consecutive data-parallel ranks each shard group spans, a divisor of "
    "a node's or whole nodes (torchtitan's data_parallel_shard_degree; the scenario's "
    "strategy.shard_group_gpus). Default: a node's. With --strategy zero1: the ranks each optimizer group shards "
    "over (InternEvo's zero1=N). Default: all.")]
MemoryFractionOpt = Annotated[float | None, typer.Option(
    help="The share of each GPU's memory the framework's allocator may take (JAX's XLA_PYTHON_CLIENT_MEM_FRACTION, "
    "0.94 in NVIDIA's MaxText recipes; PyTorch's set_per_process_memory_fraction): the job fits when everything "
    "but the CUDA context and NCCL's buffers fits in that share (the scenario's training.memory_fraction). "
    "Default: the whole GPU.")]
NcclVersionOpt = Annotated[str | None, typer.Option(
    help="The NCCL release the job runs, e.g. 2.21 or 2.18.6: the algorithms it offers (NVLS from 2.17, PAT from "
    "2.23, ...) and, with --nccl-selection nccl, its tuner's choice (the scenario's nccl_version). Default: the "
    "newest modelled, or where a calibration profile is given the newest of its logs.")]
NcclEnvOpt = Annotated[str | None, typer.Option(
    help="NCCL environment for every collective, e.g. 'NCCL_NVLS_ENABLE=0 NCCL_ALGO=Ring', over the scenario's "
    "nccl_env (a variable given here replaces the scenario's).")]
NcclSelectionOpt = Annotated[str | None, typer.Option(
    help="Each collective's algorithm and protocol: model (the pair the cost model prices fastest) or nccl (the pair "
    "the release's tuner ranks first, with NCCL's own constants) (the scenario's nccl_selection). Default: model, "
    "or where a calibration profile is given the one its fit priced its logs with (nccl unless fitted otherwise).")]
FrameworkOpt = Annotated[str | None, typer.Option(
    help="The framework that runs the job: pytorch-ddp, pytorch-fsdp, fsdp2 (torchtitan), deepspeed, megatron-core, "
    "nemo, megatron-deepspeed, llm-foundry, maxtext or internevo. What the job leaves unstated takes that framework's "
    "defaults (overlap, gradient reduction dtype, buckets, placement, memory); see docs/frameworks.md.")]

# flag (the command function's parameter) -> the training field it sets, where the names differ
FIELD_OF = {"ep_overlap": "ep_comm_overlap", "schedule": "pipeline_schedule", "moe_imbalance": "load_imbalance"}
JOB_OPTIONS = ("topology", "nodes", "gpus_per_node", "model", "strategy", "shard_group_gpus", "micro_batch", "seq_len",
               "packed_sample_len", "lora_rank", "lora_targets", "recompute", "recompute_layers",
               "recompute_modules", "mtp_layers", "precision", "fp8_recipe", "framework", "memory_fraction")


def with_nccl(scenario: ScenarioSpec, version: str | None, selection: str | None,
              env: str | None = None) -> ScenarioSpec:
    """`scenario` with --nccl-version, --nccl-selection and --nccl-env applied (None: as it is); ConfigError
    names the flag."""
    updates: dict[str, object] = {}
    if env is not None:
        updates["nccl_env"] = {**scenario.nccl_env, **parse_env(env, "--nccl-env")}
    if version is not None:
        release_option(version, "--nccl-version")
        updates["nccl_version"] = version
    if selection is not None:
        updates["nccl_selection"] = selection_option(selection, "--nccl-selection")
    return scenario.model_copy(update=updates) if updates else scenario


def job_options(flags: dict[str, Any]) -> dict[str, Any]:
    """The job's flags of a command (its parameters by name) keyed by the fields they override."""
    named = {FIELD_OF.get(flag, flag): value for flag, value in flags.items()}
    return {key: named.get(key) for key in (*JOB_OPTIONS, *PARALLEL_OPTIONS, *ROUTING_OPTIONS)}


def global_batch_of(global_batch: str | None, global_batch_tokens: str | None, seq_len: int) -> int | None:
    """Sequences per step from --global-batch, or from --global-batch-tokens over the job's sequence length
    (which must divide it); None when neither is given. ConfigError names the flags."""
    if global_batch is not None and global_batch_tokens is not None:
        raise ConfigError("--global-batch and --global-batch-tokens give the same thing: give one of them")
    if global_batch_tokens is None:
        return count_option(global_batch, "--global-batch")
    tokens = count_option(global_batch_tokens, "--global-batch-tokens") or 0
    if tokens <= 0 or tokens % seq_len:
        nearest = max(1, round(tokens / seq_len))
        # "4M tokens" in a paper is usually 4 x 2^20: say so when the binary reading would have been whole
        binary = binary_count_text(global_batch_tokens)
        hint = ""
        if binary and (whole := count_option(binary, "--global-batch-tokens") or 0) % seq_len == 0:
            hint = f"; {binary} is {whole:,} tokens, {whole // seq_len:,} sequences"
        raise ConfigError(f"--global-batch-tokens {global_batch_tokens}: {tokens:,} tokens is not a whole number of "
                          f"{seq_len:,}-token sequences (--seq-len); give a multiple of {seq_len:,} (the nearest: "
                          f"{nearest * seq_len:,}, {nearest:,} sequences{hint}) or --global-batch")
    return tokens // seq_len


def load_scenario(path: Path | None) -> ScenarioSpec | None:
    """The scenario file's spec; None for no file (the embedded scenario)."""
    if path is None:
        return None
    return scenario_from_data(read_yaml(path, "scenario"), str(path))


def override(scenario: ScenarioSpec | None, options: dict[str, Any], global_batch: str | None = None,
             global_batch_tokens: str | None = None) -> tuple[ScenarioSpec, TopologySpec, TrainingSpec, ModelSpec]:
    """Apply the command line to the scenario (None: the embedded one), validating every changed field,
    and fill what the job leaves unstated (complete_training). With --model and no scenario file the
    embedded scenario gives only the cluster: its job's fields (sequence, batch, recomputation,
    strategy) were chosen for its model. --global-batch-tokens is divided by the sequence length the
    job resolves to."""
    spec, topology, training, model = apply_options(scenario, options)
    batch = global_batch_of(global_batch, global_batch_tokens, training.seq_len or model.training_context)
    if batch is None:
        return spec, topology, training, model
    return apply_options(scenario, {**options, "global_batch": batch})
