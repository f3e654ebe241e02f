"""What each training framework does by default, as data: one table, each default with the file of the
framework's source that sets it.

A job names its framework (`training.framework`); every field the job leaves unstated then takes that
framework's default instead of clustersim's generic one (scenario.complete_training). Stated fields always
win. A job that names no framework keeps the generic defaults of workloads.spec (PyTorch FSDP-like
overlap, 16-bit gradient reduction).

A default may depend on the job: on its data-parallel strategy (DeepSpeed overlaps ZeRO-3's reduction
only), its precision (Megatron reduces bf16 jobs' gradients in fp32) or its layout (sequence parallelism
where tp > 1). Each entry is (the spec field, its value, when it applies, the source).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Framework = Literal["pytorch-ddp", "pytorch-fsdp", "fsdp2", "deepspeed", "megatron-core", "nemo",
                    "megatron-deepspeed", "llm-foundry", "maxtext", "internevo"]
# other names users write for the same frameworks
FRAMEWORK_ALIASES: dict[str, Framework] = {
    "ddp": "pytorch-ddp", "fsdp": "pytorch-fsdp", "fsdp1": "pytorch-fsdp", "torchtitan": "fsdp2",
    "megatron": "megatron-core", "megatron-lm": "megatron-core", "composer": "llm-foundry",
    "internlm": "internevo"}


@dataclass(frozen=True)
class Job:
    """What a default may depend on: the job's strategy, precision and layout as resolved so far."""

    kind: str
    precision: str
    tp: int
    pp: int
    virtual_stages: int = 1
    compiled: bool = False  # the job states torch.compile (fused_elementwise true)
    eager: bool = False  # the job states eager element-wise ops (fused_elementwise false)
    eager_loss: bool = False  # the job states an eager loss (cross_entropy eager), compiled model or not


@dataclass(frozen=True)
class Default:
    """One field's default under a framework: `path` names the spec field (strategy.x, parallel.x or a
    TrainingSpec field), `value` is the value or a function of the job, `when` limits it to some jobs."""

    path: str
    value: Any
    source: str
    when: Callable[[Job], bool] | None = None

    def applies(self, job: Job) -> bool:
        return self.when is None or self.when(job)

    def value_for(self, job: Job) -> Any:
        return self.value(job) if callable(self.value) else self.value


@dataclass(frozen=True)
class Conventions:
    """A framework's data-parallel strategies (the first is its default) and its defaults."""

    title: str
    kinds: tuple[str, ...]
    defaults: tuple[Default, ...] = field(default=())


def _fp32_reduce_if_bf16(job: Job) -> int:
    return 4 if job.precision == "bf16" else 2


def _tp(job: Job) -> bool:
    return job.tp > 1


def _pp(job: Job) -> bool:
    return job.pp > 1


def _interleaved(job: Job) -> bool:
    return job.pp > 1 and job.virtual_stages > 1


def _fp16(job: Job) -> bool:
    return job.precision == "fp16"


def _fp8(job: Job) -> bool:
    return job.precision == "fp8"


def _zero1(job: Job) -> bool:
    return job.kind == "zero1"


def _zero12(job: Job) -> bool:
    return job.kind in ("zero1", "zero2")


_DDP_REDUCER = "torch/csrc/distributed/c10d/reducer.cpp: a bucket takes its parameters' dtype"
_EAGER = ("torch.compile is opt-in (torch/__init__.py: it wraps only the module it is given), so a PyTorch model runs "
          "its norms, rotary embedding and activations as one eager kernel per operation (transformers' "
          "LlamaRMSNorm, apply_rotary_pos_emb, SiLU times the up projection)")
_AMP_PARAMS = ("PyTorch AMP (torch.autocast) keeps the model's parameters in fp32 and casts them per operation; "
               "FSDP's sharded flat parameters are fp32 beside their bf16 gathered copies")
_MEGATRON_ARGS = ("megatron/training/arguments.py: with --bf16, accumulate_allreduce_grads_in_fp32 is set "
                  "(bf16 gradients are accumulated and all-reduced in fp32) unless --grad-reduce-in-bf16")
_MEGATRON_OVERLAP = ("megatron/training/arguments.py: --overlap-grad-reduce and --overlap-param-gather are "
                     "off unless given")
_MEGATRON_ORDER = "megatron/core/parallel_state.py: rank order tp-cp-ep-dp-pp"
_MEGATRON_SP_REGATHER = ("megatron/core/tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication."
                         "backward (and Transformer Engine's Linear / LayerNormLinear): with sequence parallelism "
                         "the column-parallel layers keep their input's 1/tp shard and all-gather it again in "
                         "backward for the weight gradient, beside the data-gradient GEMM")
_TE_ASYNC = ("transformer_engine/pytorch/module/linear.py: a column-parallel layer's input-gradient reduction "
             "runs asynchronously beside its weight-gradient GEMM")
_TE_ATTENTION = ("transformer_engine/pytorch/attention: DotProductAttention prefers cuDNN's fused attention on "
                 "Hopper and later")
_MEGATRON_BUCKET = ("megatron/core/distributed/distributed_data_parallel.py: bucket_size default 40,000,000 "
                    "elements (at least; 1,000,000 per data-parallel rank beyond 40 ranks)")

_MEGATRON_COMMON = (
    Default("strategy.grad_reduce_bytes", _fp32_reduce_if_bf16, _MEGATRON_ARGS),
    Default("strategy.fp32_grad_copy", True, "megatron/core/optimizer/optimizer.py "
            "Float16OptimizerWithFloat16Params: fp16 gradients are copied to fp32 main gradients for the step",
            _fp16),
    Default("strategy.bucket_bytes", lambda job: 40_000_000 * _fp32_reduce_if_bf16(job), _MEGATRON_BUCKET),
    Default("strategy.first_bucket_bytes", lambda job: 40_000_000 * _fp32_reduce_if_bf16(job), _MEGATRON_BUCKET),
    Default("strategy.zero_bucket_elements", 40_000_000, f"{_MEGATRON_BUCKET}; the distributed optimizer "
            "reduce-scatters and all-gathers the same buckets"),
    Default("parallel.placement", "tp-dp-pp", _MEGATRON_ORDER),
    Default("parallel.sp_backward_regather", True, _MEGATRON_SP_REGATHER, _tp),
    Default("parallel.tp_async_grad_reduce", True, _TE_ASYNC, _tp),
    Default("attention_kernel", "cudnn", _TE_ATTENTION),
    Default("fp8_weight_cache", True, "megatron/core/pipeline_parallel/schedules.py forward_step: "
            "model.set_is_first_microbatch() on a step's first micro-batch only; megatron/core/extensions/"
            "transformer_engine.py TELinear.forward passes is_first_microbatch (then False) to Transformer Engine, "
            "whose Linear casts the weight to fp8 when it is True and reuses the cached cast after it "
            "(transformer_engine/pytorch/module/linear.py, get_weight_workspace)", _fp8),
    Default("parallel.tied_grad_sync", "after_dp", "megatron/core/distributed/finalize_model_grads.py: "
            "finish_grad_sync (the data-parallel reduction) first, then _allreduce_embedding_grads"),
)
_DEEPSPEED_BUCKET_ALL_REDUCE = (
    "deepspeed/runtime/zero/config.py use_multi_rank_bucket_allreduce, True since DeepSpeed 0.12.4 (PR #4695, "
    "2023-11): stage_1_and_2.py average_tensor all-reduces each bucket (allreduce_and_scatter) and each rank keeps "
    "its slice; before it, or with the option off, one dist.reduce per destination rank (reduce_per_rank)")
_DEEPSPEED_TIED = ("deepspeed/runtime/pipe/schedule.py TrainSchedule: ReduceTiedGrads, then ReduceGrads, then "
                   "OptimizerStep")

_INTERNEVO_OPTIMIZER = "internlm/solver/optimizer/hybrid_zero_optim.py HybridZeroOptimizer"
# the loss's element-wise bytes a logit (simulator.training.compute LOSS_BYTES_PER_LOGIT)


def _compiled_loss_bytes(job: Job) -> float:
    """PyTorch's loss: compiled with the model (8 bytes a logit) unless the job runs it eager (44)."""
    return 8.0 if job.compiled and not job.eager_loss else 44.0


_HF_LOSS = ("transformers: LlamaForCausalLM and the other causal LMs upcast the logits (logits.float()) and take "
            "nn.functional.cross_entropy eagerly, 44 bytes a logit; compiled with the model under torch.compile, "
            "Inductor's fused reductions, 8")
_MEGATRON_LOSS = ("megatron/core/model_parallel_config.py: cross_entropy_loss_fusion False, so "
                  "tensor_parallel/cross_entropy.py vocab_parallel_cross_entropy runs its fp32 passes one by one: 52 "
                  "bytes a logit")
_FLASH_ATTN_LOSS = "flash_attn.losses.cross_entropy.CrossEntropyLoss (a Triton kernel): 6 bytes a logit"

FRAMEWORKS: dict[str, Conventions] = {
    "pytorch-ddp": Conventions("PyTorch DistributedDataParallel with AMP", ("ddp",), (
        Default("strategy.grad_reduce_bytes", 4, f"{_DDP_REDUCER}; under AMP the parameters are fp32"),
        Default("strategy.overlap_grad_reduce", True, "torch/csrc/distributed/c10d/reducer.cpp: a bucket is "
                "all-reduced by the autograd hook that fills it, during backward"),
        Default("strategy.fp32_params", True, _AMP_PARAMS),
        Default("strategy.grad_bucket_copy", True, "torch/nn/parallel/distributed.py: gradient_as_bucket_view "
                "defaults to False, so the buckets hold a second copy of every gradient"),
        Default("fused_elementwise", False, _EAGER),
        Default("loss_bytes_per_logit", _compiled_loss_bytes, _HF_LOSS),
    )),
    "pytorch-fsdp": Conventions("PyTorch FSDP (FullyShardedDataParallel)", ("fsdp", "hsdp"), (
        Default("strategy.grad_reduce_bytes", 2, "torch/distributed/fsdp/api.py MixedPrecision: reduce_dtype "
                "None takes param_dtype (bf16 in the usual policy)"),
        Default("strategy.fp32_params", True, _AMP_PARAMS),
        Default("fused_elementwise", False, _EAGER),
        Default("loss_bytes_per_logit", _compiled_loss_bytes, _HF_LOSS),
    )),
    "fsdp2": Conventions("PyTorch FSDP2 (fully_shard) as torchtitan runs it", ("fsdp", "hsdp", "ddp"), (
        Default("strategy.grad_reduce_bytes", 4, "torchtitan/config/job_config.py: training.mixed_precision_reduce "
                "defaults to float32"),
        Default("strategy.fp32_params", True, _AMP_PARAMS),
        Default("strategy.reshard_after_forward", False, "torchtitan/distributed (apply_fsdp): with pipeline "
                "parallelism parameters stay gathered after forward", _pp),
        Default("fused_elementwise", False, "torchtitan/config/job_config.py: compile is off by default (PyTorch "
                "eager element-wise ops)"),
        Default("cross_entropy", lambda job: "fused" if job.compiled else "eager", "torchtitan "
                "components/loss.py: the loss is torch.nn.functional.cross_entropy(pred.flatten(0, 1).float(), "
                "labels), eager, or compiled with the model under training.compile (build_cross_entropy_loss, "
                "since bbb1b616e, 2025-04-02; eager before it, compiled or not)"),
        Default("loss_bytes_per_logit", _compiled_loss_bytes, "torchtitan components/loss.py: "
                "F.cross_entropy on fp32 logits, eager (44 bytes a logit) or compiled (Inductor's fused reductions: "
                "8)"),
        Default("parallel.sequence_parallel", True, "torchtitan parallelize_llama: the TP plan shards the norms "
                "(SequenceParallel)", _tp),
        Default("parallel.placement", "tp-dp-pp", "torchtitan ParallelDims: device mesh (pp, dp_replicate, "
                "dp_shard, cp, tp)"),
        Default("parallel.overlap_p2p", True, "torch.distributed.pipelining: asynchronous isend/irecv", _pp),
        Default("parallel.cp_merge", "eager", "torch/distributed/tensor/experimental/_attention.py: the ring "
                "merges its steps' outputs in fp32 eager ops"),
        Default("fp8_recipe", "tensorwise", "torchao/float8/config.py: Float8LinearConfig's input, weight and "
                "gradient casts default to ScalingType.DYNAMIC, a per-tensor scale from the tensor's current amax "
                "(torchtitan's float8 converter: recipe 'tensorwise' unless another is named)", _fp8),
    )),
    "deepspeed": Conventions("DeepSpeed ZeRO", ("zero1", "zero2", "zero3", "ddp"), (
        Default("strategy.overlap_grad_reduce", lambda job: job.kind == "zero3", "deepspeed/runtime/zero/config.py "
                "overlap_comm_valid: overlap_comm defaults to True at stage 3 only; below it the reduction runs "
                "on the compute stream (stage_1_and_2.py average_tensor)"),
        Default("strategy.bucket_all_reduce", True, _DEEPSPEED_BUCKET_ALL_REDUCE, _zero12),
        Default("strategy.prefetch_bucket_elements", 50_000_000, "deepspeed/runtime/zero/config.py: "
                "stage3_prefetch_bucket_size default 5e7 (partitioned_param_coordinator.py prefetches up to it; "
                "stage3_max_live_parameters, 1e9, is then never the bound)", lambda job: job.kind == "zero3"),
        Default("strategy.gather_per_module", True, "deepspeed/runtime/zero/partitioned_param_coordinator.py "
                "fetch_sub_module: each submodule's parameters are all-gathered when it runs (prefetched ahead)",
                lambda job: job.kind == "zero3"),
        Default("strategy.fp32_grad_copy", True, "deepspeed/runtime/zero/stage_1_and_2.py: the optimizer "
                "steps fp32 copies of its partition's gradients"),
        Default("strategy.grad_reduce_bytes", 2, "deepspeed/runtime/config.py: communication_data_type None "
                "reduces in the gradients' dtype (bf16 / fp16)"),
        Default("parallel.tied_grad_sync", "before_dp", _DEEPSPEED_TIED),
        Default("strategy.contiguous_gradients", True, "deepspeed/runtime/zero/config.py: contiguous_gradients "
                "True; stage_1_and_2.py backward allocates a reduce_bucket_size buffer (a second with overlap_comm), "
                "stage3.py one at start-up", lambda job: job.kind != "ddp"),
        Default("loss_bytes_per_logit", 44.0, f"DeepSpeed trains the user's model with its own loss; {_HF_LOSS}"),
    )),
    "megatron-core": Conventions("Megatron-LM / Megatron-Core", ("ddp", "zero1"), (
        *_MEGATRON_COMMON,
        Default("strategy.overlap_grad_reduce", False, _MEGATRON_OVERLAP),
        Default("strategy.overlap_param_gather", False, _MEGATRON_OVERLAP),
        Default("parallel.overlap_p2p", True, "megatron/training/arguments.py: --no-overlap-p2p-communication "
                "(store_false: overlap_p2p_comm on unless given), turned off without virtual pipeline stages",
                _interleaved),
        Default("loss_bytes_per_logit", 52.0, _MEGATRON_LOSS),
    )),
    "nemo": Conventions("NVIDIA NeMo (Megatron-Core) recipes", ("zero1", "ddp"), (
        *(default for default in _MEGATRON_COMMON if default.path != "strategy.grad_reduce_bytes"),
        Default("strategy.overlap_grad_reduce", True, "nemo/collections/llm/recipes: DistributedDataParallelConfig"
                "(overlap_grad_reduce=True, overlap_param_gather=True) with the distributed optimizer"),
        Default("strategy.overlap_param_gather", True, "nemo/collections/llm/recipes (as above)"),
        Default("strategy.grad_reduce_bytes", _fp32_reduce_if_bf16, "nemo/lightning/pytorch/plugins/"
                "mixed_precision.py MegatronMixedPrecision: grad_reduce_in_fp32 True"),
        Default("parallel.sequence_parallel", True, "nemo/collections/llm/recipes (llama): sequence_parallel "
                "with tensor parallelism", _tp),
        Default("parallel.overlap_p2p", True, "nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py "
                "MegatronCommOverlapCallback: overlap_p2p_comm with virtual pipeline stages", _interleaved),
        Default("loss_bytes_per_logit", 40.0, "nemo/collections/llm/gpt/model/base.py GPTConfig: "
                "cross_entropy_loss_fusion True (megatron/core/fusions/fused_cross_entropy.py: the upcast joined with "
                "the max, the subtraction with the exponent: 40 bytes a logit)"),
    )),
    "megatron-deepspeed": Conventions("Megatron-DeepSpeed", ("zero1", "ddp"), (
        Default("strategy.overlap_grad_reduce", False, "deepspeed/runtime/pipe/schedule.py TrainSchedule: "
                "ReduceGrads after the last micro-batch"),
        Default("strategy.fp32_grad_copy", True, "deepspeed/runtime/bf16_optimizer.py / fp16 optimizer: fp32 "
                "gradients for the step"),
        Default("parallel.placement", "tp-dp-pp", "deepspeed/runtime/pipe/topology.py "
                "PipeModelDataParallelTopology: axes pipe, data, model"),
        Default("parallel.tied_grad_sync", "before_dp", _DEEPSPEED_TIED),
        # ZeRO-1/2 run DeepSpeed's ZeRO optimizer (DeepSpeedZeroOptimizer), as under the deepspeed framework
        Default("strategy.bucket_all_reduce", True, _DEEPSPEED_BUCKET_ALL_REDUCE, _zero12),
        Default("strategy.contiguous_gradients", True, "deepspeed/runtime/zero/config.py: contiguous_gradients "
                "True; stage_1_and_2.py backward allocates a reduce_bucket_size buffer", _zero12),
        Default("loss_bytes_per_logit", 52.0, "Megatron-DeepSpeed: megatron/core/tensor_parallel/cross_entropy.py "
                "vocab_parallel_cross_entropy, unfused (52 bytes a logit)"),
    )),
    "llm-foundry": Conventions("MosaicML LLM Foundry (Composer, PyTorch FSDP)", ("fsdp", "hsdp", "ddp"), (
        Default("strategy.grad_reduce_bytes", 2, "composer/distributed/mosaic_parallelism.py: "
                "mixed_precision PURE (LLM Foundry's yamls) reduces in bf16"),
        Default("strategy.fp32_params", True, _AMP_PARAMS),
        Default("loss_bytes_per_logit", 6.0, "llmfoundry/models/mpt/modeling_mpt.py: loss_fn defaults to "
                f"fused_crossentropy, {_FLASH_ATTN_LOSS}"),
    )),
    # InternEvo also runs torch FSDP (configs/7B_sft.py: parallel zero1 fsdp=True), under the generic defaults
    "internevo": Conventions("InternEvo (InternLM's training framework, hybrid ZeRO-1)", ("zero1", "fsdp"), (
        Default("strategy.zero_grad_all_reduce", True, f"{_INTERNEVO_OPTIMIZER} _attach_reduction_hook: the "
                "gradient hooks pass reduce_rank None, and internlm/solver/optimizer/utils.py reduce_tensor then "
                "all-reduces each bucket over the data-parallel group (dist.all_reduce); each rank keeps its "
                "partition's slice", _zero1),
        Default("strategy.overlap_grad_reduce", True, "configs/7B_sft.py hybrid_zero_optimizer: "
                "overlap_sync_grad=True (zero_overlap_communication in InternLM 2023-07): buckets are reduced on "
                "a communication stream from the hooks of the last micro-batch's backward", _zero1),
        Default("strategy.zero_bucket_elements", 512 * 1024**2, "configs/7B_sft.py hybrid_zero_optimizer: "
                f"reduce_bucket_size=512 * 1024 * 1024, elements ({_INTERNEVO_OPTIMIZER} "
                "_store_and_try_reduce_grads_by_bucket counts numel)", _zero1),
        Default("strategy.grad_reduce_bytes", 2, "internlm/solver/optimizer/utils.py reduce_tensor: the bucket "
                "is reduced in the gradients' own dtype (bf16 / fp16)", _zero1),
        Default("strategy.fp32_grad_copy", True, f"{_INTERNEVO_OPTIMIZER} _step: the partition's averaged "
                "gradients are cast to fp32 for the fp32 master weights", _zero1),
        Default("elementwise_bytes", 71.0, "internlm/model/modeling_internlm.py PackedFlashBaseLayer1D._forward: "
                "each norm casts the residual to fp32 (.float(): 6 B) before apex's MixedFusedRMSNorm (fp32 in, "
                "bf16 out: 6 B), flash_attn's rotary kernel rewrites q and k in place (8 B), the two residual adds "
                "are eager (6 B each) and linear.py FeedForward's SwiGLU, F.silu(w1(x)) * w2(x), is two eager "
                "kernels over the 8/3 h intermediate (10 B an element: 27 B): 24 + 8 + 12 + 27, about 71 B per "
                "token per hidden unit, where fused blocks move 40", lambda job: not (job.compiled or job.eager)),
        Default("loss_bytes_per_logit", 6.0, f"internlm/model/losses/ce_loss.py FlashGPTLMLoss: {_FLASH_ATTN_LOSS}"),
    )),
    "maxtext": Conventions("MaxText (JAX, fully sharded)", ("fsdp", "hsdp"), (  # hsdp: FSDP with data parallelism
        Default("strategy.grad_reduce_bytes", 4, "MaxText/configs/base.yml: weight_dtype float32 (gradients "
                "take the weights' dtype)"),
        Default("strategy.fp32_params", True, "MaxText/configs/base.yml: weight_dtype float32"),
        Default("activation_checkpointing", "nothing_saveable", "MaxText/configs/base.yml: remat_policy 'full', "
                "jax.checkpoint with no policy (layers/decoders.py get_remat_policy): nothing kept, what backward "
                "needs recomputed (workloads/remat.py)"),
        Default("strategy.limit_all_gathers", 2, "MaxText's GPU XLA flags (configs/gpu/a3/*.sh, "
                "docs/run_maxtext/run_maxtext_single_host_gpu.md): pipelined all-gather and reduce-scatter with "
                "xla_gpu_enable_while_loop_double_buffering: the scan over layers gathers the next layer's weights "
                "during this one and reduce-scatters the previous one's gradients, two layers' buffers at once"),
        Default("allocator", "xla", "JAX: XLA's buffer assignment places a step's temporaries when it compiles "
                "the step (docs.jax.dev GPU memory allocation: a preallocated pool, not PyTorch's caching "
                "allocator)"),
        Default("loss_bytes_per_logit", 8.0, "MaxText: the loss is jitted with the step, and XLA fuses its "
                "reductions over the logits (8 bytes a logit, as a compiled loss)"),
    )),
}


def framework_name(value: object) -> object:
    """A framework's name as the table spells it (aliases and case folded); anything else as given."""
    if not isinstance(value, str):
        return value
    key = value.strip().lower().replace("_", "-").replace(" ", "-")
    return FRAMEWORK_ALIASES.get(key, key)


def default_kind(framework: str) -> str:
    """The data-parallel strategy a job under `framework` runs when it names none."""
    return FRAMEWORKS[framework].kinds[0]


def framework_defaults(framework: str, job: Job, stated: Mapping[str, set[str]]) -> dict[str, Any]:
    """The defaults `framework` gives `job`, nested as TrainingSpec data ({"strategy": {...}, ...}), leaving
    out every field in `stated` (section -> field names the user set; section "" for TrainingSpec's own)."""
    filled: dict[str, Any] = {}
    for default in FRAMEWORKS[framework].defaults:
        section, _, name = default.path.rpartition(".")
        if name in stated.get(section, set()) or not default.applies(job):
            continue
        target = filled.setdefault(section, {}) if section else filled
        target.setdefault(name, default.value_for(job))
    return filled

