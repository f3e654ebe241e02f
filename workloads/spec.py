"""Pydantic specs of what is trained: the model's shape, the training job, the parallel strategy.

These are the edges of the one-way data flow: users write them in YAML (scenario files, presets)
or on the command line; everything inside works on the frozen values. Units are in field names.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from simulator.core.units import from_text, parse_bytes, parse_count
from workloads.frameworks import FRAMEWORKS, Framework, framework_name
from workloads.pipeline_layout import layout_chunks
from workloads.remat import policy_name

Precision = Literal["bf16", "fp16", "fp8", "fp32"]
# Transformer Engine's fp8 scaling recipes as Megatron-Core's --fp8-recipe names them (transformer_config.py)
Fp8Recipe = Literal["delayed", "tensorwise", "mxfp8", "blockwise"]
# none, selective, full and op, then JAX's policies as MaxText names them (workloads.remat.REMAT_POLICIES)
Checkpointing = Literal["none", "selective", "full", "op", "nothing_saveable", "save_out_proj", "save_qkv_proj",
                        "save_dot_except_mlp", "save_dot_except_mlpwi", "save_dot_with_context_except_mlp", "minimal",
                        "minimal_with_context"]
# Megatron-LM's recomputation flags as activation_checkpointing values (megatron/training/arguments.py):
# --recompute-activations sets --recompute-granularity selective (attention's softmax and dropout recomputed,
# Korthikanti et al. 2022); --recompute-granularity full recomputes whole layers; --checkpoint-activations, its
# name before 2022, meant full.
MEGATRON_CHECKPOINTING: dict[str, Checkpointing] = {
    "recompute-activations": "selective", "recompute-granularity-selective": "selective",
    "recompute-granularity-full": "full", "checkpoint-activations": "full"}
# A block's weight matrices a LoRA adapter can sit beside: Megatron's fused layers (qkv: linear_qkv, attn_out:
# linear_proj, mlp_up: linear_fc1 with a gated MLP's gate and up together, mlp_down: linear_fc2) and the parts
# that Hugging Face models keep apart (q, k, v; gate and up), each of which then has an adapter of its own.
LoraTarget = Literal["qkv", "q", "k", "v", "attn_out", "mlp_up", "gate", "up", "mlp_down"]
LORA_ALL: tuple[LoraTarget, ...] = ("qkv", "attn_out", "mlp_up", "mlp_down")
# the names frameworks give those matrices (NeMo 2.0 llm/peft/lora.py, NeMo 1.x nlp/parts/peft_config.py
# PEFT_MODULE_MAP, Hugging Face Llama / GPT-2 / BLOOM / MPT modules, torchtitan's Llama), and group names
LORA_TARGET_NAMES: dict[str, tuple[LoraTarget, ...]] = {
    **{name: (name,) for name in get_args(LoraTarget)},
    "linear_qkv": ("qkv",), "attention_qkv": ("qkv",), "query_key_value": ("qkv",), "c_attn": ("qkv",),
    "wqkv": ("qkv",), "q_proj": ("q",), "k_proj": ("k",), "v_proj": ("v",), "wq": ("q",), "wk": ("k",),
    "wv": ("v",), "linear_proj": ("attn_out",), "attention_dense": ("attn_out",), "o_proj": ("attn_out",),
    "out_proj": ("attn_out",), "wo": ("attn_out",), "linear_fc1": ("mlp_up",), "mlp_fc1": ("mlp_up",),
    "gate_proj": ("gate",), "w1": ("gate",), "up_proj": ("up",), "w3": ("up",), "linear_fc2": ("mlp_down",),
    "mlp_fc2": ("mlp_down",), "down_proj": ("mlp_down",), "w2": ("mlp_down",),
    "attention": ("qkv", "attn_out"), "mlp": ("mlp_up", "mlp_down"), "all": LORA_ALL, "all_linear": LORA_ALL}


def lora_targets_of(value: object) -> object:
    """LoRA targets as written ('q_proj,v_proj', ['linear_qkv'], 'all') -> canonical LoraTarget names, in order
    and without repeats; ValueError names an unknown one. Other values pass through to pydantic."""
    if isinstance(value, str):
        value = [part for part in value.replace(" ", ",").split(",") if part]
    if not isinstance(value, (list, tuple)):
        return value
    targets: list[str] = []
    for item in value:
        names = LORA_TARGET_NAMES.get(str(item).strip().lower().replace("-", "_"))
        if names is None:
            raise ValueError(f"unknown LoRA target {item!r}: give {', '.join(get_args(LoraTarget))}, a framework's "
                             "name for one (linear_qkv, q_proj, o_proj, gate_proj, ...), or all, attention, mlp")
        targets.extend(name for name in names if name not in targets)
    return targets


# the submodules Megatron-Core's selective recomputation re-runs in backward (--recompute-granularity selective
# --recompute-modules; megatron/core/transformer/transformer_config.py recompute_modules, default core_attn)
RecomputeModule = Literal["core_attn", "layernorm", "moe_act", "mlp", "moe", "shared_experts", "mla_up_proj"]
MEGATRON_RECOMPUTE_DEFAULT: tuple[RecomputeModule, ...] = ("core_attn",)


def recompute_modules_of(value: object) -> object:
    """Recompute modules as written ('moe_act layernorm', 'core_attn,mlp', ['moe']) -> a list without repeats;
    ValueError names an unknown one. Other values pass through to pydantic."""
    if isinstance(value, str):
        value = [part for part in value.replace(",", " ").split() if part]
    if not isinstance(value, (list, tuple)):
        return value
    modules: list[str] = []
    for item in value:
        name = str(item).strip().lower().replace("-", "_")
        if name not in get_args(RecomputeModule):
            raise ValueError(f"unknown recompute module {item!r}: give {', '.join(get_args(RecomputeModule))} "
                             "(Megatron-Core's --recompute-modules)")
        if name not in modules:
            modules.append(name)
    return modules


Optimizer = Literal["adam", "adamw", "sgd"]
StrategyKind = Literal["ddp", "zero1", "zero2", "zero3", "fsdp", "hsdp"]
FsdpSharding = Literal["FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "NO_SHARD"]
PipelineSchedule = Literal["1f1b", "gpipe", "interleaved"]
PipelineSplit = Literal["layers", "embedding_and_loss"]
AttentionKernel = Literal["flash2", "cudnn", "triton", "flash1"]
CpComm = Literal["p2p", "a2a"]
EpDispatcher = Literal["alltoall", "deepep"]
TiedGradSync = Literal["before_dp", "after_dp"]
Allocator = Literal["caching", "xla"]
CrossEntropy = Literal["fused", "eager"]
CpMerge = Literal["fused", "eager"]
# Order of the parallel dimensions over consecutive GPU ranks, innermost first: "tp-pp-dp" puts a
# tensor-parallel group on neighbouring GPUs (one node), pipeline stages next, data parallel outermost.
Placement = Literal["tp-pp-dp", "tp-dp-pp", "pp-tp-dp", "pp-dp-tp", "dp-tp-pp", "dp-pp-tp"]

_FROZEN = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # no field is infinite
# sizes and counts written with units in YAML ("25MiB", "500M"): one parser each (simulator.core.units)
ByteSize = Annotated[int, BeforeValidator(from_text(parse_bytes))]
Count = Annotated[int, BeforeValidator(from_text(parse_count))]


class MlaSpec(BaseModel):
    """Multi-head latent attention (DeepSeek-V2, DeepSeek-AI 2024, section 2.1; DeepSeek-V3): queries and keys/
    values go through low-rank latents; each head's query and key have a part without position (nope) and a
    rotary part (rope, its key part shared by all heads), its value its own width."""

    model_config = _FROZEN

    q_lora_rank: int | None = Field(
        strict=True,
        default=None, ge=1, description="Query latent width (DeepSeek-V3 1536); none: queries straight from the "
        "hidden state (DeepSeek-V2-Lite).")
    kv_lora_rank: int = Field(strict=True, ge=1, description="Key/value latent width (DeepSeek-V3 512).")
    qk_nope_head_dim: int = Field(
        strict=True, ge=1, description="Per-head query/key width without rotary position (128).")
    qk_rope_head_dim: int = Field(
        strict=True, ge=0, description="Per-head rotary query/key width (64); the key's is shared.")
    v_head_dim: int = Field(strict=True, ge=1, description="Per-head value width (128).")


class ModelSpec(BaseModel):
    """A decoder-only transformer (GPT / Llama / MPT family); encoder models are the same blocks."""

    model_config = _FROZEN

    name: str = Field(description="Model name, e.g. llama2-7b.")
    layers: int = Field(strict=True, ge=1, description="Transformer blocks.")
    hidden: int = Field(strict=True, ge=1, description="Hidden size (d_model).")
    heads: int = Field(strict=True, ge=1, description="Attention heads.")
    kv_heads: int | None = Field(strict=True, default=None, ge=1, description="Key/value heads (GQA); default: heads.")
    head_dim: int | None = Field(
        strict=True,
        default=None, ge=1, description="Size of one attention head; default hidden / heads (Qwen3, Gemma and "
        "GPT-OSS set it apart: heads x head_dim need not be hidden).")
    ffn_hidden: int | None = Field(strict=True, default=None, ge=1, description="MLP inner size; default 4 x hidden, "
                                                "required with gated_mlp (a mixture of experts: a dense block's).")
    gated_mlp: bool = Field(default=False, description="SwiGLU-style MLP with three matrices (Llama).")
    vocab: int = Field(strict=True, ge=1, description="Vocabulary size.")
    max_seq_len: int = Field(strict=True, default=2048, ge=1, description="Context length the model was built for.")
    train_seq_len: int | None = Field(
        strict=True, default=None, ge=1, description="Sequence length of the model's main pre-training, where it "
        "differs from max_seq_len (Llama 3.1 405B: 8192 of its 131072); a job that states no seq_len runs at "
        "it. Default: max_seq_len.")
    tied_embeddings: bool = Field(default=False, description="Output projection shares the input embedding.")
    learned_positions: bool = Field(default=False, description="Learned position embedding table (GPT-2/3).")
    bias: bool = Field(
        default=False,
        description="Linear layers and LayerNorms have bias vectors (GPT-2/3, BERT); false for Llama and MPT no_bias.")
    experts: int = Field(
        strict=True,
        default=1, ge=1, description="Routed experts of every block's MLP (mixture of experts, e.g. Mixtral 8); "
        "1: a dense MLP.")
    experts_per_token: int = Field(
        strict=True, default=1, ge=1, description="Experts each token is routed to (top-k; Mixtral 2).")
    expert_ffn_hidden: int | None = Field(
        strict=True, default=None, ge=1, description="Inner size of one expert's MLP; default ffn_hidden.")
    shared_experts: int = Field(
        strict=True,
        default=0, ge=0, description="Experts every token also passes through (DeepSeekMoE, Qwen-MoE shared "
        "experts), each expert_ffn_hidden wide.")
    dense_layers: int = Field(
        strict=True,
        default=0, ge=0, description="A mixture of experts' first blocks that keep a dense MLP of ffn_hidden "
        "(DeepSeek-V2/V3 first_k_dense_replace, Kimi K2, GLM-4.5); the others are mixtures.")
    mla: MlaSpec | None = Field(
        default=None, description="Multi-head latent attention (DeepSeek-V2/V3, Kimi K2) in place of multi-head "
        "attention; kv_heads and head_dim then do not apply.")
    source: str | None = Field(default=None, description="Where the shape comes from (paper, config).")

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.head_dim is None and self.mla is None and self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads}), or head_dim given")
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.experts_per_token > self.experts:
            raise ValueError(f"experts_per_token ({self.experts_per_token}) exceeds experts ({self.experts})")
        if self.experts == 1 and (self.shared_experts or self.expert_ffn_hidden is not None or self.dense_layers):
            raise ValueError("shared_experts, expert_ffn_hidden and dense_layers describe a mixture of experts: "
                             "set experts > 1")
        if self.mla is not None and (self.kv_heads not in (None, self.heads) or self.head_dim is not None
                                     or self.bias):
            raise ValueError("mla: kv_heads (every head has its keys and values), head_dim (the mla widths say) "
                             "and bias do not apply to multi-head latent attention")
        if self.train_seq_len is not None and self.train_seq_len > self.max_seq_len:
            raise ValueError(f"train_seq_len ({self.train_seq_len}) exceeds max_seq_len ({self.max_seq_len})")
        if self.dense_layers >= self.layers:
            raise ValueError(f"dense_layers ({self.dense_layers}) must leave some of the {self.layers} blocks "
                             "mixtures of experts")
        return self

    @property
    def training_context(self) -> int:
        """Tokens per sequence of a job that states none: the model's pre-training sequence length."""
        return self.train_seq_len or self.max_seq_len

    @property
    def moe(self) -> bool:
        """Whether the blocks' MLPs are mixtures of experts."""
        return self.experts > 1


class StrategySpec(BaseModel):
    """Data-parallel strategy and its knobs (defaults are the frameworks' defaults)."""

    model_config = _FROZEN

    kind: StrategyKind = Field(default="fsdp", description="ddp, zero1, zero2, zero3, fsdp or hsdp.")
    fsdp_sharding: FsdpSharding = Field(
        default="FULL_SHARD", description="FSDP sharding strategy (kind fsdp); hsdp means HYBRID_SHARD.")
    bucket_bytes: ByteSize = Field(
        strict=True, default=25 * 1024**2, ge=1, description="DDP gradient bucket in bytes: 26214400, 25MiB, 25M "
        "(powers of 1024) or 25MB (powers of 1000). PyTorch's bucket_cap_mb=25 is 25MiB, the default.")
    first_bucket_bytes: ByteSize = Field(
        strict=True, default=1024**2, ge=1, description="DDP first bucket in bytes (1MiB, as bucket_bytes).")
    zero_bucket_elements: Count = Field(
        strict=True, default=500_000_000, ge=1, description="DeepSpeed reduce/allgather bucket size in elements "
        "(5e8, 500M).")
    contiguous_gradients: bool = Field(
        default=False, description="DeepSpeed ZeRO's contiguous_gradients: gradients are copied into a flat "
        "bucket buffer of zero_bucket_elements (ZeRO-1/2: allocated for each backward, two with overlap; ZeRO-3: "
        "one, held all along), counted among the buffers in memory. The deepspeed framework sets it.")
    backward_prefetch: bool = Field(
        default=True, description="FSDP backward_prefetch (BACKWARD_PRE): gather the next block during backward.")
    limit_all_gathers: int = Field(
        strict=True, default=2, ge=1, description="Blocks gathered at once at most (FSDP's rate limiter: at 2, "
        "the block computing and the next, prefetched); each holds its 16-bit parameters and, in backward, its "
        "unreduced gradients.")
    prefetch_bucket_elements: Count | None = Field(
        strict=True, default=None, ge=1, description="DeepSpeed ZeRO-3's stage3_prefetch_bucket_size: parameters "
        "are fetched at most this many elements ahead of the block computing, so the blocks whose gathers may be in "
        "flight are this over a block's elements (at least 1) instead of limit_all_gathers; none: FSDP's limiter. "
        "The deepspeed framework sets DeepSpeed's default, 5e7.")
    reshard_after_forward: bool | None = Field(
        default=None, description="Free gathered parameters after forward, gathering them again for backward "
        "(default: yes for FULL_SHARD/HYBRID_SHARD/ZeRO-3, no for SHARD_GRAD_OP).")
    shard_group_gpus: int | None = Field(
        strict=True, default=None, ge=1, description="HSDP: how many consecutive data- x context-parallel ranks "
        "each shard group spans, a divisor of a node's or whole nodes (torchtitan's data_parallel_shard_degree; "
        "default: a node's). ZeRO-1: the optimizer states shard within groups of that many ranks and are "
        "replicated across the groups (InternEvo's zero1=N; Megatron-Core's --num-distributed-optimizer-instances "
        "k is data-parallel ranks / k): the parameters are gathered within a group, and gradients are "
        "reduce-scattered within it and all-reduced across the groups (all-reduced over every rank with "
        "zero_grad_all_reduce or bucket_all_reduce). Default: all of them.")
    grad_reduce_bytes: int = Field(
        strict=True, default=2, ge=1, le=4, description="Bytes per gradient element reduced (2: bf16/fp16, 4: fp32).")
    overlap_grad_reduce: bool = Field(
        default=True, description="Reduce gradient buckets as backward produces them (PyTorch DDP, FSDP, "
        "Megatron --overlap-grad-reduce); false: one reduction after the whole backward (Megatron-LM before 2023).")
    fp32_grad_copy: bool = Field(
        default=False, description="The optimizer step copies 16-bit gradients to fp32 beside fp32 master weights "
        "(Megatron-LM, DeepSpeed mixed-precision optimizers): 4 more bytes per parameter of the optimizer's shard "
        "at the step; false for PyTorch AMP / FSDP, whose gradients are already fp32.")
    zero_grad_all_reduce: bool = Field(
        default=False, description="ZeRO-1: all-reduce the full gradients (at grad_reduce_bytes, held whole on "
        "every rank) instead of reduce-scattering them, then step the rank's shard and all-gather the parameters "
        "(DeepSpeed's bf16 optimizer: buffered_allreduce_fallback over its fp32 gradient buffer).")
    grad_accumulation_bytes: float = Field(
        default=0.0, ge=0.0, description="HBM bytes moved per locally held parameter after every micro-batch's "
        "backward to add its gradients into the accumulation buffer (DeepSpeed's bf16 optimizer: 18, a bf16 -> fp32 "
        "cast and an fp32 add); 0 where the weight-gradient GEMM accumulates in place.")
    overlap_param_gather: bool = Field(
        default=False, description="ZeRO-1 / distributed optimizer: gather updated parameters during the next "
        "step's forward (Megatron --overlap-param-gather) instead of right after the optimizer step.")
    fp32_params: bool = Field(
        default=False, description="The model's parameters are kept in fp32 and cast for compute (PyTorch AMP, "
        "FSDP's sharded flat parameters, MaxText): 4 bytes of parameters and 4 of gradients per parameter, Adam's "
        "8 without a separate master copy, instead of 2 + 2 + 12.")
    grad_bucket_copy: bool = Field(
        default=False, description="DDP's buckets hold a second copy of every gradient at grad_reduce_bytes "
        "(PyTorch DDP's gradient_as_bucket_view=False, its default); false: two buckets' worth of buffers.")
    gather_per_module: bool = Field(
        default=False, description="ZeRO-3 gathers each weight matrix with an all-gather of its own (DeepSpeed "
        "stage 3 fetches submodule by submodule) instead of one per block (PyTorch FSDP's unit).")
    zeropp_quantized_weights: bool = Field(
        default=False, description="ZeRO++ qwZ (Wang et al. 2023, section 3.1): ZeRO-3's parameter all-gathers "
        "move int8 weights, half the bf16 bytes (DeepSpeed zero_quantized_weights).")
    zeropp_hierarchical_partition: bool = Field(
        default=False, description="ZeRO++ hpZ (section 3.2): each node keeps a secondary shard of the bf16 "
        "weights, so backward's all-gathers stay inside the node (DeepSpeed zero_hpz_partition_size = GPUs per "
        "node); it costs 2 bytes per parameter over the node's GPUs.")
    zeropp_quantized_gradients: bool = Field(
        default=False, description="ZeRO++ qgZ (section 3.3): gradients reduce-scattered as int4 (a quarter of "
        "the bf16 bytes) through hierarchical all-to-alls (DeepSpeed zero_quantized_gradients); priced here as "
        "a reduce-scatter of those bytes.")
    reduce_per_rank: bool = Field(
        default=False, description="ZeRO-1/2 reduce each gradient bucket with one reduce per data-parallel rank "
        "(to the rank owning that slice: DeepSpeed's average_tensor before 0.12.4, or with "
        "use_multi_rank_bucket_allreduce false) instead of one reduce-scatter: the same bytes, as many launches as "
        "ranks. Set, it wins over bucket_all_reduce.")
    bucket_all_reduce: bool = Field(
        default=False, description="ZeRO-1/2 all-reduce each gradient bucket over the data-parallel group and keep "
        "this rank's slice (DeepSpeed's use_multi_rank_bucket_allreduce, its default since 0.12.4) instead of one "
        "reduce-scatter: twice the bytes, one launch a bucket.")

    @model_validator(mode="after")
    def _check(self) -> StrategySpec:
        if self.zero_grad_all_reduce and self.kind != "zero1":
            raise ValueError(f"zero_grad_all_reduce is a ZeRO-1 variant; kind is {self.kind}")
        zeropp = [name for name in ("zeropp_quantized_weights", "zeropp_hierarchical_partition",
                                    "zeropp_quantized_gradients") if getattr(self, name)]
        if zeropp and self.kind != "zero3":
            raise ValueError(f"{zeropp[0]} is a ZeRO++ option of ZeRO-3; kind is {self.kind}")
        if self.shard_group_gpus is not None and not (self.hybrid or self.kind == "zero1"):
            raise ValueError(f"shard_group_gpus is HSDP's shard group (kind hsdp, or fsdp with HYBRID_SHARD) or "
                             f"ZeRO-1's optimizer group (kind zero1); kind is {self.kind}"
                             + (f" with {self.fsdp_sharding}" if self.kind == "fsdp" else ""))
        return self

    @property
    def hybrid(self) -> bool:
        """Sharded within a shard group, replicated across the groups: HSDP (kind hsdp, or fsdp HYBRID_SHARD), or
        ZeRO-1 whose optimizer states shard within groups of shard_group_gpus ranks."""
        return self.kind == "hsdp" or (self.kind == "fsdp" and self.fsdp_sharding == "HYBRID_SHARD") \
            or (self.kind == "zero1" and self.shard_group_gpus is not None)


class ParallelSpec(BaseModel):
    """Model parallelism: tensor (Megatron), sequence and pipeline parallelism, and how ranks are placed.

    The data-parallel degree is what is left: GPUs / (tp x pp x cp)."""

    model_config = _FROZEN

    tp: int = Field(
        strict=True, default=1, ge=1, description="Tensor-parallel degree (GPUs sharing every layer's matrices).")
    pp: int = Field(strict=True, default=1, ge=1, description="Pipeline-parallel degree (stages of contiguous layers).")
    cp: int = Field(
        strict=True,
        default=1, ge=1, description="Context-parallel degree: each sequence is split over cp GPUs, which pass "
        "key/value blocks around a ring behind the attention (Megatron-Core --context-parallel-size, torchtitan "
        "context_parallel_degree); they sit next to the TP ranks and reduce gradients with the data-parallel ones.")
    ep: int = Field(
        strict=True,
        default=1, ge=1, description="Expert-parallel degree: each MoE block's experts are split over ep GPUs of the "
        "data-parallel group, which send every token to its experts and back by all-to-all (Megatron-Core "
        "--expert-model-parallel-size, DeepSpeed-MoE, torchtitan expert_parallel_degree); expert gradients are "
        "reduced over the dp / ep ranks that hold the same experts.")
    etp: int | None = Field(
        default=None, ge=1, description="Expert tensor-parallel degree: over how many GPUs each routed expert's "
        "matrices split (Megatron-Core --expert-tensor-parallel-size). Unset: tp (Megatron-Core's default), the "
        "expert-parallel ranks then taken from GPUs with the same TP index. 1: each expert whole on one GPU, the "
        "expert-parallel ranks consecutive GPUs of the TP x context x data-parallel ranks (an expert group of 8 "
        "on one 8-GPU server even with tp 2), the MoE block's experts free of TP collectives, and expert "
        "gradients reduced over tp x dp / ep ranks. Only 1 and tp are modelled.")
    cp_comm: CpComm = Field(
        default="p2p", description="How context-parallel ranks share attention: p2p, a ring of key/value blocks "
        "hidden behind the attention (Megatron-Core's default); a2a, all-to-alls that trade the sequence split for a "
        "head split around attention, not overlapped (DeepSpeed-Ulysses, Megatron-Core --cp-comm-type a2a; the "
        "heads and key/value heads must divide by tp x cp).")
    cp_merge: CpMerge = Field(
        default="fused", description="How a context-parallel ring merges its steps' partial outputs: fused "
        "(Transformer Engine's kernels, Megatron-Core) or eager (PyTorch's context_parallel, torchtitan: fp32 "
        "element-wise ops between steps, memory traffic of their own).")
    sequence_parallel: bool = Field(
        default=False, description="Megatron sequence parallelism: norms and dropout sharded over the TP group; "
        "all-reduces become reduce-scatter + all-gather pairs.")
    tp_comm_overlap: bool = Field(
        default=False, description="Overlap TP communication with the GEMMs (Megatron-Core --tp-comm-overlap, "
        "torchtitan async TP).")
    tp_comm_overlap_backward: bool = Field(
        default=True, description="With tp_comm_overlap, backward's TP collectives overlap too (Transformer Engine "
        "userbuffers under Megatron-Core); false: forward and recomputed forward only (torch's async TP, whose "
        "micro-pipelining sped Llama 3 forward passes up 20-29% but steps 8%).")
    tp_async_grad_reduce: bool = Field(
        default=False, description="Each column-parallel layer's backward input-gradient reduction (all-reduce, or "
        "reduce-scatter with sequence parallelism) runs beside its weight-gradient GEMM, the rest of the TP "
        "collectives after their GEMMs: what Transformer Engine's Linear does without userbuffers (async_op=True, "
        "Megatron-Core and NeMo) and Megatron-LM's async_tensor_model_parallel_allreduce; implied by "
        "tp_comm_overlap's backward overlap.")
    ep_dispatcher: EpDispatcher = Field(
        default="alltoall", description="How the expert all-to-alls move tokens: alltoall, NCCL's all-to-all with "
        "every token sent once to each rank holding one of its experts (Megatron-Core --moe-token-dispatcher-type "
        "alltoall, the default); deepep, DeepEP's kernels (Megatron-Core's flex dispatcher with the DeepEP or HybridEP "
        "backend): a token crosses the network once to each node holding one of its experts and is passed on over "
        "NVLink there, at the NICs' and NVLink's rates (simulator.collectives.deepep).")
    ep_comm_overlap: bool = Field(
        default=False, description="Hide each pass's expert all-to-alls behind another micro-batch's compute of the "
        "same layer (Megatron-Core --overlap-moe-expert-parallel-comm, DeepSeek's DualPipe): ideal pairing, each "
        "all-to-all exposed only where it outlasts half the layer pass it pairs with; needs ep >= 2.")
    pipeline_schedule: PipelineSchedule = Field(
        default="1f1b", description="gpipe (all forwards, then all backwards), 1f1b (PipeDream-Flush, Megatron's "
        "default) or interleaved (1F1B over virtual stages).")
    virtual_stages: int = Field(
        strict=True, default=1, ge=1, description="Model chunks per pipeline rank (interleaved schedule; Megatron "
        "--num-layers-per-virtual-pipeline-stage).")
    pipeline_split: PipelineSplit = Field(
        default="layers", description="How layers divide among the pp x virtual_stages model chunks: layers (as "
        "evenly as possible, the embedding and the output layer on top of the first and last chunk's layers) or "
        "embedding_and_loss (the input embedding and the output layer with its loss each take a layer's place: "
        "Megatron-Core --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split, Llama "
        "3's one layer fewer on the first and last stage), which allows pp x virtual_stages up to layers + 2.")
    pipeline_layout: str | None = Field(
        default=None, description="What each model chunk holds, Megatron-Core's --pipeline-model-parallel-layout: "
        "E the embedding, t a transformer layer, L the loss, | between chunks, (...)*n and t*n repeats, e.g. "
        "'Et|(tt|)*30L' for 61 layers on pp 8 x 4 chunks. Its chunks / pp sets virtual_stages (and the interleaved "
        "schedule when above 1) unless they are given; it replaces pipeline_split.")
    p2p_scatter_gather: bool = Field(
        default=True, description="Each TP rank sends 1/tp of a stage's activation and the next stage all-gathers it "
        "over NVLink (Megatron's scatter-gather, DeepSpeed's partitioned pipeline buffers); false: every TP rank "
        "sends it whole.")
    sp_backward_regather: bool = Field(
        default=False, description="With sequence parallelism (ignored without), backward all-gathers each "
        "column-parallel layer's "
        "input again for its weight gradient (Megatron and Transformer Engine keep only the 1/tp shard), beside "
        "the data-gradient GEMM: 6 TP collectives per layer backward instead of 4.")
    tied_grad_sync: TiedGradSync = Field(
        default="before_dp", description="With pipeline parallelism and tied input/output embeddings, when the "
        "first and last stages all-reduce the tied matrix's gradients: before_dp (before the data-parallel "
        "reduction, DeepSpeed's pipeline schedule) or after_dp (after it, Megatron's finalize_model_grads).")
    overlap_p2p: bool = Field(
        default=False, description="Pipeline sends overlap the next chunk's compute (Megatron-Core "
        "--overlap-p2p-communication, torchtitan); false: a stage waits for its transfer (Megatron-LM, DeepSpeed).")
    placement: Placement = Field(
        default="tp-pp-dp", description="Order of the parallel dimensions over consecutive GPU ranks, innermost "
        "first (Megatron-Core's default order is tp-dp-pp).")

    @property
    def expert_tp(self) -> int:
        """The tensor-parallel degree of the routed experts: etp, else tp."""
        return self.tp if self.etp is None else self.etp

    @model_validator(mode="before")
    @classmethod
    def _layout_chunks(cls, data: object) -> object:
        """A pipeline_layout's chunks / pp as virtual_stages, interleaved above 1, where those are not given."""
        if not isinstance(data, dict) or not isinstance(data.get("pipeline_layout"), str):
            return data
        try:
            chunks = len(layout_chunks(data["pipeline_layout"]))
        except ValueError as exc:
            raise ValueError(f"pipeline_layout {exc}") from None
        pp = data.get("pp", 1)
        if not isinstance(pp, int):
            return data  # the field's own check names it
        if chunks % pp:
            raise ValueError(f"pipeline_layout has {chunks} chunks, which do not divide over pp {pp}")
        filled: dict[str, object] = {"virtual_stages": chunks // pp} if data.get("virtual_stages") is None else {}
        if chunks // pp > 1 and data.get("pipeline_schedule") is None:
            filled["pipeline_schedule"] = "interleaved"
        return {**data, **filled}

    @model_validator(mode="after")
    def _check(self) -> ParallelSpec:
        if self.pipeline_layout is not None:
            chunks = self.pp * self.virtual_stages
            if len(layout_chunks(self.pipeline_layout)) != chunks:
                raise ValueError(f"pipeline_layout has {len(layout_chunks(self.pipeline_layout))} chunks, not pp "
                                 f"{self.pp} x virtual_stages {self.virtual_stages} = {chunks}")
            if self.pipeline_split != "layers":
                raise ValueError("pipeline_layout places the embedding and the loss itself: leave pipeline_split out")
        if self.pipeline_schedule == "interleaved" and self.virtual_stages < 2:
            raise ValueError("pipeline_schedule interleaved needs virtual_stages >= 2")
        if self.pipeline_schedule != "interleaved" and self.virtual_stages != 1:
            raise ValueError(f"virtual_stages {self.virtual_stages} needs pipeline_schedule interleaved")
        if self.pp == 1 and self.pipeline_schedule == "interleaved":
            raise ValueError("pipeline_schedule interleaved needs pp >= 2")
        if self.tp == 1 and (self.sequence_parallel or self.tp_comm_overlap or self.tp_async_grad_reduce):
            raise ValueError("sequence_parallel, tp_comm_overlap and tp_async_grad_reduce need tp >= 2")
        if self.ep > 1 and self.tp > 1 and not self.sequence_parallel:
            raise ValueError("ep > 1 with tp > 1 needs sequence_parallel (Megatron-Core requires it: each TP rank "
                             "dispatches its own share of the tokens)")
        if self.etp is not None and self.etp not in (1, self.tp):
            raise ValueError(f"etp {self.etp}: expert tensor parallelism is modelled as 1 or tp ({self.tp}) only")
        if self.etp == 1 and self.tp > 1 and self.ep == 1:
            raise ValueError("etp 1 with tp > 1 needs expert parallelism (ep >= 2): the experts' GPUs come from it")
        if self.ep_comm_overlap and self.ep == 1:
            raise ValueError("ep_comm_overlap needs ep >= 2 (expert all-to-alls to overlap)")
        if not self.tp_comm_overlap_backward and not self.tp_comm_overlap:
            raise ValueError("tp_comm_overlap_backward: false needs tp_comm_overlap: true")
        return self


class RoutingSpec(BaseModel):
    """How a mixture of experts' router loads the expert-parallel ranks (simulator.training.routing).

    The default is the balanced, dropless routing a load-balancing loss aims at."""

    model_config = _FROZEN

    load_imbalance: float = Field(
        default=1.0, ge=1.0, allow_inf_nan=False,
        description="Routed tokens on the busiest expert-parallel rank over the mean rank's, per micro-batch (max / "
        "mean; 1 balanced). Every rank waits for the busiest at the combine all-to-all. At most ep counts (one rank "
        "gets every token of its group); with ep 1 a GPU holds every expert and it moves no time.")
    capacity_factor: float | None = Field(
        default=None, gt=0.0, allow_inf_nan=False,
        description="Tokens an expert takes at most, in units of its balanced share (GShard / Switch capacity "
        "factor, Megatron-Core --moe-expert-capacity-factor); tokens beyond it are dropped. None: dropless.")
    pad_to_capacity: bool = Field(
        default=False, description="Every expert runs its full capacity, padded (Megatron-Core "
        "--moe-pad-expert-input-to-capacity); needs capacity_factor.")

    @model_validator(mode="after")
    def _check(self) -> RoutingSpec:
        if self.pad_to_capacity and self.capacity_factor is None:
            raise ValueError("pad_to_capacity needs a capacity_factor")
        return self


# other names for the fp8 recipes: NeMo's performance scripts' --fp8_recipe (ds, cs, mxfp8, ss), Megatron-Bridge's
# recipe names (fp8cs, fp8mx) and Transformer Engine's recipe classes (DelayedScaling, Float8CurrentScaling,
# MXFP8BlockScaling, Float8BlockScaling)
FP8_RECIPE_ALIASES = {"ds": "delayed", "delayedscaling": "delayed", "fp8ds": "delayed", "fp8cs": "tensorwise",
                      "fp8mx": "mxfp8", "cs": "tensorwise", "current": "tensorwise",
                      "currentscaling": "tensorwise", "pertensorcurrentscaling": "tensorwise",
                      "float8currentscaling": "tensorwise", "mxfp8blockscaling": "mxfp8", "ss": "blockwise",
                      "float8blockscaling": "blockwise", "subchannel": "blockwise"}


def fp8_recipe_of(value: object) -> object:
    """An fp8 recipe as written ('cs', 'current scaling', 'Float8CurrentScaling') -> its Fp8Recipe name; anything
    else as given (pydantic names the choices)."""
    if not isinstance(value, str):
        return value
    key = "".join(ch for ch in value.lower() if ch.isalnum())
    return FP8_RECIPE_ALIASES.get(key, key if key in get_args(Fp8Recipe) else value)


def checkpointing_of(value: object) -> object:
    """A Megatron flag name (MEGATRON_CHECKPOINTING; with or without its dashes, 'recompute-granularity full'
    or '=full') or a MaxText remat_policy ('remat_policy=full', 'minimal_flash': workloads.remat.policy_name) as
    its activation_checkpointing value; anything else as given."""
    if not isinstance(value, str):
        return value
    policy = policy_name(value)
    if policy is not None:
        return policy
    key = "-".join(value.strip().lstrip("-").lower().replace("=", " ").replace("_", "-").split())
    return MEGATRON_CHECKPOINTING.get(key, value)


class TrainingSpec(BaseModel):
    """One training job: the model, its batch and precision, and the data-parallel strategy."""

    model_config = _FROZEN

    model: str | ModelSpec = Field(description="Preset name (see `clustersim presets`), or the shape inline.")
    framework: Framework | None = Field(
        default=None, description="The framework that runs the job (pytorch-ddp, pytorch-fsdp, fsdp2 (torchtitan), "
        "deepspeed, megatron-core, nemo, megatron-deepspeed, llm-foundry, maxtext, internevo): every field the job "
        "leaves unstated takes that framework's default (docs/frameworks.md). None: clustersim's generic defaults.")
    seq_len: int | None = Field(
        strict=True, default=None, ge=1, description="Tokens per sequence (default: the model's).")
    packed_sample_len: int | None = Field(
        strict=True, default=None, ge=1,
        description="Each sequence packs independent samples of this many tokens, and attention stays within a "
        "sample (FlashAttention's variable-length kernels, Transformer Engine's THD format, document masks: how "
        "NeMo and torchtune pack fine-tuning data). Attention then costs as for sequences of this length; for "
        "samples of mixed lengths give mean(l^2) / mean(l). Default: none (attention spans the whole sequence).")
    lora_rank: int | None = Field(
        strict=True, default=None, ge=1,
        description="LoRA fine-tuning: the weight matrices lora_targets names get a trainable adapter of this rank "
        "(NeMo's default rank is 32); the base weights, norms, embedding and output layer are frozen, so they have no "
        "weight gradients, reductions or optimizer states. Default: none (every weight trains).")
    lora_targets: tuple[LoraTarget, ...] | None = Field(
        default=None,
        description="With lora_rank: the block's matrices that carry adapters: qkv (fused: one adapter), q, k, v "
        "(apart: one each), attn_out, mlp_up (fused gate and up), gate, up, mlp_down, or the frameworks' names for "
        "them (linear_qkv, linear_proj, linear_fc1, linear_fc2; q_proj, v_proj, o_proj, gate_proj, up_proj, "
        "down_proj; attention_qkv; wq, wo, w1, ...) and all, attention, mlp; a list or 'q_proj,v_proj'. Defaults "
        "differ by library: NeMo 2.0 all four fused layers (nemo/collections/llm/peft/lora.py LoRA.target_modules), "
        "NeMo 1.x (24.07 and earlier) linear_qkv only (nlp/parts/peft_config.py get_target_modules), Hugging Face "
        "PEFT q_proj and v_proj for Llama-like models. Default: every weight matrix of the block.")
    micro_batch: int = Field(strict=True, default=1, ge=1, description="Sequences per GPU per micro-step.")
    global_batch: Count | None = Field(
        strict=True, default=None, ge=1,
        description="Sequences per optimizer step over all GPUs: 1536, 4K (default: no accumulation).")
    grad_accum: int | None = Field(strict=True, default=None, ge=1, description="Micro-steps per optimizer step.")
    precision: Precision = Field(default="bf16", description="Compute precision (mixed with fp32 master weights).")
    activation_checkpointing: Checkpointing = Field(
        default="none", description="none, selective (Megatron's: attention's core recomputed), full, op "
        "(torchtitan's per-op selective checkpointing: every other matmul's output and attention's kept, the rest "
        "recomputed), or one of JAX's policies as MaxText names them: nothing_saveable (MaxText's remat_policy "
        "full), save_out_proj, save_qkv_proj, save_dot_except_mlp, save_dot_except_mlpwi, "
        "save_dot_with_context_except_mlp, minimal, minimal_with_context (the named matmul outputs kept, what "
        "backward needs of the rest recomputed; 'remat_policy=NAME' is read too). Megatron-LM's flags are "
        "accepted: recompute-activations (selective), recompute-granularity full (full), checkpoint-activations "
        "(full).")
    recompute_layers: int | None = Field(
        strict=True, default=None, ge=0,
        description="With activation_checkpointing full: how many of the model's layers recompute, spread evenly "
        "over it (every k-th layer: torchtitan's selective_ac_option k is layers / k, fms-fsdp's "
        "selective_checkpointing share p is p x layers; Megatron's --recompute-method block "
        "--recompute-num-layers N recomputes N of each model chunk's); the other layers keep all their "
        "activations. Default: every layer.")
    recompute_modules: tuple[RecomputeModule, ...] | None = Field(
        default=None,
        description="With activation_checkpointing selective: the submodules each layer re-runs in backward, as "
        "Megatron-Core's --recompute-modules names them (a list or 'moe_act layernorm'): core_attn (the attention "
        "kernel), layernorm (the two norms), moe_act (the routed experts' activation), mlp (a dense block's MLP), "
        "moe (the whole mixture-of-experts layer: router, experts and its all-to-alls), shared_experts, mla_up_proj "
        "(MLA's query and key-value up projections). A module the block lacks re-runs nothing; what a module "
        "re-runs it keeps no output of. Default: core_attn (Megatron-Core's default).")
    mtp_layers: int = Field(
        strict=True, default=0, ge=0, description="Multi-token prediction modules (DeepSeek-V3's MTP, Megatron-Core "
        "--mtp-num-layers): each is one more block of the model's last kind after its layers and one more pass "
        "through the output layer and loss, on the last pipeline stage (or the chunk a pipeline_layout's m names).")
    optimizer: Optimizer = Field(default="adamw", description="Optimizer (Adam keeps two fp32 moments).")
    flash_attention: bool = Field(
        default=True, description="Fused attention that keeps no seq x seq scores (FlashAttention, PyTorch SDPA).")
    attention_kernel: AttentionKernel = Field(
        default="flash2", description="The fused attention kernel: flash2 (FlashAttention-2, PyTorch SDPA's flash "
        "backend), cudnn (cuDNN's fused flash attention, Transformer Engine's choice on Hopper and later: "
        "Megatron-Core, NeMo), triton (the Triton FlashAttention of MPT's attn_impl: triton, LLM Foundry's "
        "default before v0.7; they differ on Hopper and Blackwell) or flash1 (FlashAttention 1.x, flash-attn "
        "before 2.0, July 2023: half FlashAttention-2's rate).")
    fused_elementwise: bool = Field(
        default=True, description="Norms, rotary and the MLP activation run as fused kernels (torch.compile, "
        "Megatron / Transformer Engine / apex fused kernels); false: PyTorch eager ops, each through HBM "
        "(torchtitan without compile: about 3.6x the element-wise bytes).")
    elementwise_bytes: float | None = Field(
        default=None, gt=0, description="Bytes the block's element-wise work (norms, rotary, residual adds, the MLP "
        "activation) moves per token per hidden unit a layer forward, where a framework's block is neither fully "
        "fused (40) nor eager (145): the internevo framework sets its count. Default: by fused_elementwise.")
    cross_entropy: CrossEntropy = Field(
        default="fused", description="The loss over the logits: fused (Megatron's vocabulary-parallel cross "
        "entropy, its gradient written over the saved softmax: 4 bytes a logit) or eager (PyTorch's "
        "F.cross_entropy on fp32 logits: the log-softmax output it saves, then in backward that output's "
        "gradient and the input gradient, 12 bytes a logit at the start of backward). A compiled loss "
        "(torchtitan's under compile) is fused.")
    loss_bytes_per_logit: float | None = Field(
        default=None, gt=0, description="Bytes the loss's element-wise passes move per logit, forward and backward "
        "together (simulator.training.compute LOSS_BYTES_PER_LOGIT): Megatron's vocabulary-parallel cross entropy 52 "
        "(40 fused), PyTorch's eager F.cross_entropy on fp32 logits 44, a compiled loss 8, flash-attn's Triton "
        "kernel 6. Default: the framework's, else by cross_entropy (fused 40, eager 44).")
    memory_fraction: float | None = Field(
        default=None, gt=0.0, le=1.0, description="The share of each GPU's memory the framework's allocator may "
        "take: JAX's XLA_PYTHON_CLIENT_MEM_FRACTION (e.g. 0.94 in NVIDIA's MaxText recipes), PyTorch's "
        "torch.cuda.set_per_process_memory_fraction. The CUDA context and NCCL's buffers sit beside it. Default: "
        "none, all of it (PyTorch; JAX since its pool may grow past its 75% preallocation).")
    allocator: Allocator = Field(
        default="caching", description="How device memory is handed out: caching (PyTorch's CUDA caching allocator, "
        "whose cached blocks leave about 5% of the live tensors' size unusable) or xla (XLA's buffer assignment "
        "packs a step's temporaries into one block when the program is compiled: no such slack). The maxtext "
        "framework sets xla.")
    fp8_recipe: Fp8Recipe = Field(
        default="delayed", description="How fp8 scaling factors are found (Transformer Engine's recipes by Megatron-"
        "Core's --fp8-recipe names): delayed (from the amax history, computed inside the cast; Megatron-Core's "
        "default), tensorwise (per-tensor current scaling, NeMo's 'fp8 current scaling': an amax pass over each "
        "tensor before its cast, fused into the norm and activation kernels that produce some of them), mxfp8 "
        "(Blackwell's 32-element block scales) or blockwise (128-element blocks), both scaled inside the cast. "
        "Read only under precision fp8.")
    fp8_weight_cache: bool = Field(
        default=False, description="Under fp8, each weight is cast to fp8 once a step, on its first micro-batch, "
        "and the later micro-batches reuse the cast (Transformer Engine's weight cache, which Megatron-Core and NeMo "
        "drive); false: every micro-batch casts the weights again (torchao float8, Transformer Engine outside "
        "Megatron). The megatron-core and nemo frameworks set it.")
    launch_blocking: bool = Field(
        default=False, description="CUDA_LAUNCH_BLOCKING=1: every kernel launch waits for the kernel to finish, so "
        "the host's per-operation time lies between kernels instead of behind them (a workaround for NCCL hangs; "
        "BLOOM's 48-node runs set it).")
    strategy: StrategySpec = Field(default_factory=StrategySpec, description="Data-parallel strategy.")
    parallel: ParallelSpec = Field(
        default_factory=ParallelSpec, description="Tensor / pipeline parallelism and placement (default: none).")
    routing: RoutingSpec = Field(
        default_factory=RoutingSpec, description="A mixture of experts' routing: load imbalance over the "
        "expert-parallel ranks, capacity factor (default: balanced, dropless).")

    @field_validator("activation_checkpointing", mode="before")
    @classmethod
    def _megatron_names(cls, value: object) -> object:
        return checkpointing_of(value)

    @field_validator("fp8_recipe", mode="before")
    @classmethod
    def _fp8_recipe_alias(cls, value: object) -> object:
        return fp8_recipe_of(value)

    @field_validator("framework", mode="before")
    @classmethod
    def _framework_alias(cls, value: object) -> object:
        return framework_name(value)

    @field_validator("lora_targets", mode="before")
    @classmethod
    def _lora_names(cls, value: object) -> object:
        return lora_targets_of(value)

    @field_validator("recompute_modules", mode="before")
    @classmethod
    def _recompute_names(cls, value: object) -> object:
        return recompute_modules_of(value)

    @model_validator(mode="after")
    def _check(self) -> TrainingSpec:
        if self.global_batch is not None and self.grad_accum is not None:
            raise ValueError("give global_batch or grad_accum, not both")
        if self.framework is not None and "kind" in self.strategy.model_fields_set \
                and self.strategy.kind not in FRAMEWORKS[self.framework].kinds:
            raise ValueError(f"strategy {self.strategy.kind} is not one {self.framework} runs; it runs "
                             f"{', '.join(FRAMEWORKS[self.framework].kinds)}")
        if self.packed_sample_len is not None and self.seq_len is not None and self.packed_sample_len > self.seq_len:
            raise ValueError(f"packed_sample_len: {self.packed_sample_len} is longer than seq_len {self.seq_len} (a "
                             "packed sample is part of a sequence)")
        if self.packed_sample_len is not None and self.parallel.cp > 1:
            raise ValueError("packed_sample_len with context parallelism (cp > 1) is not modelled: a ring over "
                             "packed samples splits each sample, not the sequence")
        if self.lora_targets is not None and self.lora_rank is None:
            raise ValueError("lora_targets names the matrices LoRA adapts; give lora_rank too")
        for fused, parts in (("qkv", ("q", "k", "v")), ("mlp_up", ("gate", "up"))):
            if self.lora_targets and fused in self.lora_targets and set(parts) & set(self.lora_targets):
                raise ValueError(f"lora_targets: {fused} is one adapter over {', '.join(parts)} together; give {fused} "
                                 f"or some of {', '.join(parts)}, not both")
        if self.lora_targets == ():
            raise ValueError("lora_targets is empty: name the matrices that carry adapters, or leave it out for all")
        if self.recompute_layers is not None and self.activation_checkpointing != "full":
            raise ValueError(f"recompute_layers: {self.recompute_layers} layers recompute in full; it needs "
                             f"activation_checkpointing full, not {self.activation_checkpointing}")
        if self.recompute_modules is not None and self.activation_checkpointing != "selective":
            raise ValueError(f"recompute_modules: {', '.join(self.recompute_modules)} are what selective "
                             "recomputation re-runs; it needs activation_checkpointing selective, not "
                             f"{self.activation_checkpointing}")
        if self.recompute_modules == ():
            raise ValueError("recompute_modules is empty: name the submodules to re-run, or use "
                             "activation_checkpointing none")
        if self.parallel.pp > 1 and self.strategy.kind in ("zero2", "zero3"):
            raise ValueError(f"strategy {self.strategy.kind} with pipeline parallelism: DeepSpeed shards gradients "
                             "and parameters only without PP (use zero1, ddp or fsdp)")
        if self.parallel.etp == 1 and self.parallel.tp > 1 and self.strategy.hybrid:
            raise ValueError("parallel.etp 1 with sharding in groups (HSDP, or ZeRO-1's shard_group_gpus) is not "
                             "modelled: the groups' experts are taken as split after the TP ranks")
        return self
