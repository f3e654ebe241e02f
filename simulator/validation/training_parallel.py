"""Tensor / pipeline parallelism of a published training case: its degrees, the data-parallel degree
left over, and the conventions of the framework that ran it (placement of ranks, sequence
parallelism, pipeline schedule, when gradients are reduced), or why it cannot be expressed.

A case states at most its degrees (tp, pp, dp, or only tp x pp); everything else is the framework's
behaviour, read from its code and named in the case's `defaults` ("flagged"):

- Megatron-LM (2019-2022, megatron-2020-* and megatron-sc21-*): ranks tp innermost, then dp, then pp
  (mpu.initialize_model_parallel); no sequence parallelism; `--DDP-impl local` (the default until
  2023) all-reduces gradients after the whole backward; full recomputation where not stated (the
  README's example scripts all pass --checkpoint-activations). SC21 rows give only tp x pp and no heads:
  the split, heads, micro-batch, recomputation, virtual pipeline and DDP implementation come from
  SC21_TABLE_1 (the paper's Table 1 as its authors ran it).
- Megatron-Core (the Megatron-LM README's H100 table): the flags in `comm_overlap`;
  --overlap-param-gather means the distributed optimizer (zero1); --tp-comm-overlap requires
  --sequence-parallel (Megatron-Core's argument check); ranks tp-dp-pp; micro-batch 1 if not stated.
- NeMo (Megatron-Core): distributed optimizer (zero1) with grad-reduce and param-gather overlap,
  sequence parallelism whenever tp > 1 (its llama recipes), ranks tp-dp-pp, micro-batch 1 if not
  stated (its recipes' micro_batch_size). TP communication overlap (userbuffers) as the case states it, else
  as NeMo's pre-training performance recipe for the model sets it (_NEMO_RECIPE_TP_OVERLAP: NVIDIA's
  performance tables are run from those recipes), else off.
- Megatron-LM and Megatron-DeepSpeed optimizers keep 16-bit model parameters beside fp32 master
  weights and copy the gradients to fp32 for the step (fp32_grad_copy; memory only).
- Pipeline transfers block the sender in Megatron-LM and DeepSpeed; they overlap compute in
  Megatron-Core when its flags say "PP overlap" and the schedule is interleaved (Megatron-LM's
  arguments.py turns overlap_p2p_comm off without virtual stages), and in torchtitan. Both Megatron (scatter-gather)
  and DeepSpeed's pipeline engine (is_pipe_partitioned, is_grad_partitioned whenever tp > 1) send
  1/tp of the activation or its gradient from each TP rank.
- Megatron-DeepSpeed (BLOOM): ranks tp innermost, then dp, then pp (PipeModelDataParallelTopology,
  axes pipe, data, model); DeepSpeed's TrainSchedule (1F1B) reduces gradients after the last
  micro-batch; no sequence parallelism; its bf16 optimizer shards optimizer states (ZeRO-1). Where
  the case states DeepSpeed's BF16 optimizer (BLOOM's production run; the chronicles-prequel rows
  from 02-28, "BF16 optimizer that was just written to accumulate gradients in fp32"), each
  micro-batch's gradients are added into a whole fp32 buffer, which is all-reduced, not
  reduce-scattered; earlier rows accumulated in 16 bits (the prequel says so) and keep ZeRO-1, whose
  buckets go in one reduce per rank (DeepSpeed before 0.12.4, which all of Megatron-DeepSpeed's
  published runs predate; the deepspeed and megatron-deepspeed frameworks all-reduce each bucket).
- torchtitan: device mesh (pp, dp_replicate, dp_shard, cp, tp), so tp-dp-pp; its TP plan shards the
  norms (SequenceParallel); async TP overlaps TP communication; with PP, FSDP keeps parameters
  gathered after forward, the local batch is split into pp micro-batches (its default before PR
  #781 of 2025-01-07, which the Dec 2024 benchmark predates) and interleaved 1F1B puts 2 stages on
  each rank (generate_split_points); FSDP reduces gradients in fp32 (mixed_precision_reduce).
- Any other framework: the spec's defaults (tp-pp-dp, no sequence parallelism, 1F1B), flagged.
A stated virtual pipeline size (vp, Megatron-Core --virtual-pipeline-model-parallel-size: model chunks per
pipeline rank) above 1 is the interleaved 1F1B schedule over vp chunks, whatever the framework's default.
Context parallelism (cp) splits each sequence; expert parallelism (ep, Megatron-Core
--expert-model-parallel-size) splits each MoE block's experts over ep of the data- x context-parallel ranks,
with sequence parallelism on where tp > 1 (Megatron-Core requires it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from simulator.validation.training_cluster import Unexpressible
from simulator.validation.training_strategy import unnamed_strategy
from workloads.pipeline_layout import uneven_layout
from workloads.spec import ParallelSpec, StrategyKind


@dataclass(frozen=True)
class Sc21Run:
    """One weak-scaling run of Narayanan et al. 2021 (SC21), Table 1."""

    name: str  # the paper's model size
    gpus: int
    heads: int
    tp: int
    pp: int
    micro_batch: int
    global_batch: int
    layers_per_virtual_stage: int | None  # --num-layers-per-virtual-pipeline-stage (None: plain 1F1B)
    torch_ddp: bool  # --DDP-impl torch (PyTorch DDP, overlapped); else local (after the backward)


# DeepSpeed's BF16_Optimizer.update_hp_grads after each micro-batch's backward (deepspeed/runtime/pipe/
# engine.py _exec_backward_pass; bf16_optimizer.py): hp_grad.add_(lp.grad.to(fp32)): read bf16 (2 B),
# write the fp32 cast (4 B), read it and the fp32 gradient (4 + 4 B), write the sum (4 B).
BF16_ACCUMULATION_BYTES = 18.0

# (layers, hidden) -> the run. Source: Narayanan et al., "Efficient Large-Scale Language Model Training on
# GPU Clusters Using Megatron-LM", SC21, Table 1, as run by its authors' script NVIDIA/Megatron-LM
# examples/sc21/run_table_1.sh (GPUs, TP, PP, MBS, GBS, NLS, HS, NAH, DDP, --num-layers-per-virtual-pipeline-stage;
# every run --activations-checkpoint-method uniform, i.e. full recomputation, and --fp16).
SC21_TABLE_1: dict[tuple[int, int], Sc21Run] = {
    (24, 2304): Sc21Run("1.7B", 32, 24, 1, 1, 16, 512, None, True),
    (30, 3072): Sc21Run("3.6B", 64, 32, 2, 1, 16, 512, None, True),
    (36, 4096): Sc21Run("7.5B", 128, 32, 4, 1, 16, 512, None, True),
    (40, 6144): Sc21Run("18.4B", 256, 48, 8, 1, 8, 1024, None, True),
    (48, 8192): Sc21Run("39.1B", 512, 64, 8, 2, 4, 1536, None, False),
    (60, 10240): Sc21Run("76.1B", 1024, 80, 8, 4, 2, 1792, 5, False),
    (80, 12288): Sc21Run("145.6B", 1536, 96, 8, 8, 2, 2304, 5, False),
    (96, 16384): Sc21Run("310.1B", 1920, 128, 8, 16, 1, 2160, 3, False),
    (105, 20480): Sc21Run("529.6B", 2520, 128, 8, 35, 1, 2520, 1, False),
    (128, 25600): Sc21Run("1T", 3072, 160, 8, 64, 1, 3072, None, False),
}
_SC21_SOURCE = "SC21 Table 1 as run by Megatron-LM examples/sc21/run_table_1.sh"
_SC21_SCRIPT = "run_table_1.sh"
TORCHTITAN_STAGES_PER_RANK = 2  # torchtitan generate_split_points: multi-stage schedules, no split points given


@dataclass(frozen=True)
class ParallelLowering:
    """The case's layout with its framework's conventions.

    training / model: the case's sections with filled-in fields (micro_batch, activation_checkpointing,
    heads). strategy_kind: the framework's data-parallel strategy where the case names none (see
    unnamed_strategy), else None. strategy_knobs: StrategySpec fields the framework sets.
    """

    training: Mapping[str, Any]
    model: Mapping[str, Any]
    parallel: ParallelSpec
    dp: int
    strategy_kind: StrategyKind | None = None
    strategy_knobs: Mapping[str, Any] = field(default_factory=dict)


def framework_of(training: Mapping[str, Any]) -> str:
    """megatron-lm, megatron-core, nemo, megatron-deepspeed, torchtitan, internevo, or '' (not known)."""
    text = str(training.get("framework") or "").lower()
    for key, name in (("nemo", "nemo"), ("megatron-deepspeed", "megatron-deepspeed"),
                      ("megatron-core", "megatron-core"), ("megatron-lm", "megatron-lm"),
                      ("torchtitan", "torchtitan"), ("internevo", "internevo"), ("internlm", "internevo")):
        if key in text:
            return name
    return ""


def _fill_sc21(training: dict[str, Any], model: dict[str, Any], defaults: list[str]) -> Sc21Run:
    """Fill tp, pp, heads, micro-batch and recomputation of an SC21 row that states only tp x pp."""
    key = (int(model.get("layers") or 0), int(model.get("hidden") or 0))
    run = SC21_TABLE_1.get(key)
    product = training["model_parallel_size_tp_x_pp"]
    if run is None:
        raise Unexpressible(f"tp x pp = {product} without the split, and no SC21 Table 1 row with "
                            f"{key[0]} layers x {key[1]} hidden")
    if run.tp * run.pp != product or training.get("global_batch") not in (None, run.global_batch) \
            or model.get("heads") not in (None, run.heads):
        raise Unexpressible(f"SC21 Table 1 row for {key[0]} layers x {key[1]} hidden (tp {run.tp} x pp {run.pp}, "
                            f"global batch {run.global_batch}, {run.heads} heads) disagrees with the case")
    filled = [f"tp {run.tp}, pp {run.pp}", f"{run.heads} heads"]
    training.update(tp=run.tp, pp=run.pp)
    model["heads"] = run.heads
    if training.get("micro_batch") is None:
        training["micro_batch"] = run.micro_batch
        filled.append(f"micro_batch {run.micro_batch}")
    if training.get("activation_checkpointing") is None:
        training["activation_checkpointing"] = "full"
        filled.append("full recomputation (--activations-checkpoint-method uniform)")
    defaults.append(f"not stated: {', '.join(filled)} ({_SC21_SOURCE})")
    return run


def _degrees(training: Mapping[str, Any], names: list[str], n_gpus: int,
             stated_dp: int | None) -> tuple[int, int, int, int]:
    """(tp, pp, cp, dp) with dp = GPUs / (tp x pp x cp); a layout that does not fit the GPU count is an error."""
    for name in ("tp", "pp"):
        if name in names and training.get(name) is None and not training.get("model_parallel_size_tp_x_pp"):
            raise Unexpressible(f"{name} degree not stated")
    tp, pp = training.get("tp") or 1, training.get("pp") or 1
    product = training.get("model_parallel_size_tp_x_pp")
    if product and product != tp * pp:
        if training.get("tp") is None and training.get("pp") is None:
            raise Unexpressible(f"tp x pp = {product} stated without the split into tp and pp")
        raise Unexpressible(f"tp x pp = {product} stated, but tp {tp} x pp {pp} = {tp * pp}")
    cp = training.get("cp") or 1
    degrees = {"tp": tp, "pp": pp, **({"cp": cp} if cp > 1 else {})}

    def shown(extra: dict[str, int]) -> str:
        both = {**degrees, **extra}
        return f"{' x '.join(both)} = {' x '.join(map(str, both.values()))}"

    model_parallel = tp * pp * cp
    if n_gpus % model_parallel:
        raise Unexpressible(f"{shown({})} = {model_parallel} does not divide the {n_gpus} GPUs")
    if stated_dp is not None and model_parallel * stated_dp != n_gpus:
        raise Unexpressible(f"layout {shown({'dp': stated_dp})} = {model_parallel * stated_dp} GPUs, but "
                            f"the case has {n_gpus} GPUs")
    return tp, pp, cp, n_gpus // model_parallel


def _expert_degree(training: Mapping[str, Any], names: list[str], model: Mapping[str, Any], ranks: int,
                   folded_tp: int = 1) -> int:
    """The expert-parallel degree (1 if not used): it splits each MoE block's experts over that many of the
    `ranks` data- x context-parallel ranks (Megatron-Core --expert-model-parallel-size), times `folded_tp`, the
    tensor-parallel ranks the experts take too when they are not tensor-split (etp 1: Megatron-Core's MoE parallel
    folding, ParallelSpec.etp), so it divides them; the model's experts, where stated, divide by it too."""
    ep = training.get("ep")
    if ep is None:
        if "ep" in names:
            raise Unexpressible("ep degree not stated")
        return 1
    if (ranks * folded_tp) % ep:
        what = "tensor- x data- x context-parallel" if folded_tp > 1 else "data- x context-parallel"
        raise Unexpressible(f"ep {ep} does not divide the {ranks * folded_tp} {what} ranks it splits")
    experts = model.get("experts")
    if ep > 1 and experts is not None and experts % ep:
        raise Unexpressible(f"ep {ep} does not divide the model's {experts} experts")
    return int(ep)


def _ep_dispatcher(stated: str | None, defaults: list[str]) -> dict[str, str]:
    """ParallelSpec.ep_dispatcher from a case's Megatron-Core token dispatcher (`moe_token_dispatcher`): DeepEP's
    kernels for `flex` (whose backend is DeepEP unless named: --moe-flex-dispatcher-backend) and for the DeepEP and
    HybridEP backends, NCCL's all-to-all for `alltoall` / `a2a`; unstated, Megatron-Core's default (alltoall). The
    allgather dispatcher (every token to every expert-parallel rank) is not modelled."""
    if stated is None:
        return {}
    name = re.sub(r"[^a-z0-9]", "", stated.lower())
    if "deepep" in name or "hybridep" in name or name == "flex":
        defaults.append(f"token dispatcher {stated!r}: DeepEP's kernels (ep_dispatcher deepep)")
        return {"ep_dispatcher": "deepep"}
    if name.startswith(("alltoall", "a2a")):  # 'alltoall', 'A2A', 'alltoall (NCCL)'
        return {"ep_dispatcher": "alltoall"}
    raise Unexpressible(f"moe_token_dispatcher {stated!r}: only alltoall and DeepEP's (flex, deepep, hybridep) "
                        "are modelled")


@dataclass
class _Draft:
    """What a framework's conventions set, collected while lowering one case (then frozen into specs)."""

    case_id: str
    training: dict[str, Any]
    unnamed: bool  # the case names no data-parallel strategy: the framework's applies
    layers: int
    tp: int
    pp: int
    dp: int
    sc21: Sc21Run | None
    model_name: str = ""
    sp_stated: bool = False  # the case names sequence parallelism or sets it (read after the conventions)
    kind: StrategyKind | None = None
    spec: dict[str, Any] = field(default_factory=dict)
    knobs: dict[str, Any] = field(default_factory=dict)
    parts: list[str] = field(default_factory=list)

    @property
    def layered(self) -> bool:
        return self.tp > 1 or self.pp > 1

    def plain_schedule(self, why: str) -> None:
        if self.pp > 1 and self.training.get("vp") is None:  # a stated vp is the schedule (_stated_virtual_stages)
            self.parts.append(f"pipeline schedule 1f1b ({why})")


def _megatron_lm(d: _Draft) -> None:
    d.kind = "ddp"
    if d.training.get("activation_checkpointing") is None:  # SC21 rows have theirs filled already
        d.training["activation_checkpointing"] = "full"
        d.parts.append("full recomputation (--checkpoint-activations in every Megatron-LM README example script)")
    torch_ddp = bool(d.sc21 and d.sc21.torch_ddp)
    d.knobs.update(overlap_grad_reduce=torch_ddp, fp32_grad_copy=True)  # Float16OptimizerWithFloat16Params
    if _megatron_flag(d.training, "use_distributed_optimizer"):
        # --use-distributed-optimizer (Megatron-LM's DistributedOptimizer): optimizer state and fp32 master weights
        # sharded over the data-parallel ranks, gradients reduce-scattered after the backward unless
        # --overlap-grad-reduce, parameters all-gathered after the step unless --overlap-param-gather
        d.kind = "zero1"
        d.knobs.update(overlap_grad_reduce=_megatron_flag(d.training, "overlap_grad_reduce"),
                       overlap_param_gather=_megatron_flag(d.training, "overlap_param_gather"))
        d.parts.append("--use-distributed-optimizer: zero1")
    elif d.dp > 1:
        d.parts.append(f"--DDP-impl {'torch' if torch_ddp else 'local'} "
                       f"({_SC21_SCRIPT if d.sc21 else 'the default before 2023'}): "
                       + ("PyTorch DDP buckets overlap the backward" if torch_ddp
                          else "gradients all-reduced after the whole backward"))
    if d.layered:
        d.parts.append("ranks tp-dp-pp (mpu.initialize_model_parallel), no sequence parallelism")
    per_stage = d.sc21.layers_per_virtual_stage if d.sc21 else None
    if per_stage and d.pp > 1:
        d.spec.update(pipeline_schedule="interleaved", virtual_stages=d.layers // (d.pp * per_stage))
        d.parts.append(f"interleaved schedule, {d.spec['virtual_stages']} virtual stages "
                       f"(--num-layers-per-virtual-pipeline-stage {per_stage}, {_SC21_SCRIPT})")
    else:
        d.plain_schedule(f"no virtual pipeline in {_SC21_SCRIPT}" if d.sc21 else "no virtual pipeline stated")


# NVIDIA's published performance runs reduce gradients in bf16: their performance recipes set
# grad_reduce_in_fp32 = False (NeMo scripts/performance, Megatron-Bridge's performance configs), where
# Megatron-LM's and NeMo's training defaults reduce bf16 jobs' gradients in fp32 (workloads.frameworks).
_PERFORMANCE_REDUCE = "gradients reduced in bf16 (NVIDIA's performance recipes: grad_reduce_in_fp32 False)"


def _megatron_flag(training: Mapping[str, Any], name: str) -> bool:
    """Whether a Megatron-Core case turns flag `name` on: as a field of that name (Megatron's config key,
    `overlap_grad_reduce: true`, a bool once parsed), else by naming it in its `comm_overlap` text
    ("--overlap-grad-reduce")."""
    stated = training.get(name)
    if stated is not None:
        return bool(stated)
    return f"--{name.replace('_', '-')}" in str(training.get("comm_overlap") or "")


def _megatron_core(d: _Draft) -> None:
    flags = str(d.training.get("comm_overlap") or "")
    d.knobs.update(overlap_grad_reduce=_megatron_flag(d.training, "overlap_grad_reduce"),
                   overlap_param_gather=_megatron_flag(d.training, "overlap_param_gather"), grad_reduce_bytes=2)
    d.parts.append(_PERFORMANCE_REDUCE)
    d.kind = "zero1" if d.knobs["overlap_param_gather"] or _megatron_flag(d.training, "use_distributed_optimizer") \
        else "ddp"
    if d.knobs["overlap_param_gather"] and d.unnamed:
        d.parts.append("--overlap-param-gather implies the distributed optimizer: zero1")
    if d.tp > 1:
        d.spec["tp_comm_overlap"] = d.spec["sequence_parallel"] = bool(_stated_tp_overlap(d.training))
        if d.spec["sequence_parallel"]:
            d.parts.append("sequence parallelism on (--tp-comm-overlap requires --sequence-parallel)")
        elif not d.sp_stated:
            d.parts.append("sequence parallelism off")
    if d.layered:
        d.parts.append("ranks tp-dp-pp (Megatron-Core's order tp-cp-ep-dp-pp)")
    d.plain_schedule("no virtual pipeline stated")
    if d.pp > 1 and "pp overlap" in flags.lower():  # Megatron-LM's arguments.py: overlap_p2p_comm only with
        # virtual stages (schedules.py rejects it for the plain 1F1B schedule)
        if (d.training.get("vp") or 1) > 1:
            d.spec["overlap_p2p"] = True
            d.parts.append("pipeline sends overlap compute with virtual stages (PP overlap)")
        else:
            d.parts.append("PP overlap stated, but Megatron overlaps pipeline sends only under the interleaved "
                           "schedule: sends wait for their transfer")
    if d.training.get("micro_batch") is None:
        d.training["micro_batch"] = 1
        d.parts.append("micro_batch 1")


def _stated_tp_overlap(training: Mapping[str, Any]) -> bool | None:
    """Whether a case says its TP collectives overlap GEMMs: its `tp_comm_overlap`, or its `comm_overlap` or
    `techniques` naming Megatron's --tp-comm-overlap, NeMo's ub_tp_comm_overlap (userbuffers) with the value it
    is set to (`ub_tp_comm_overlap: false` says off); None: the case does not say."""
    if training.get("tp_comm_overlap") is not None:
        return bool(training["tp_comm_overlap"])
    text = f"{training.get('comm_overlap') or ''} {training.get('techniques') or ''}".lower().replace("_", "-")
    named = re.search(r"tp-comm-overlap\b\s*[:=]?\s*(true|false)?|userbuffers", text)
    if named is None:
        return None
    return named.group(1) != "false"


# Whether NeMo's pre-training performance recipe for a model turns on Transformer Engine's userbuffers TP
# overlap (MegatronCommOverlapCallback(tp_comm_overlap=...) in pretrain_performance_optimizations,
# nemo/collections/llm/recipes/<model>.py, NVIDIA/NeMo at 8cfedd7, which scripts/performance/llm/pretrain_<model>.py
# builds NVIDIA's performance tables with): on for GPT-3 175B, Llama 3 / 3.1 70B and 405B, Llama 3.1 8B, Llama 4,
# Nemotron-3/4 and Nemotron-H (and Llama 2 70B, which NeMo 2.0 has no recipe for: NeMo-Framework-Launcher's
# conf/training/llama/llama2_70b.yaml, ub_tp_comm_overlap true); off (tp_comm_overlap=False, or no setting: the
# callback's default off) for Llama 2 7B, Llama 3 8B, Llama 3.2, Mixtral, DeepSeek and Qwen. First match of the model's
# name, lower case, separators dropped.
_NEMO_RECIPE_TP_OVERLAP: tuple[tuple[str, bool], ...] = (
    (r"^llama3(?!1)\d*8b|^llama32|^llama27b|^mixtral|^deepseek|^qwen", False),
    (r"^gpt3|^llama3|^llama4|^nemotron|^llama270b", True),
)


# what a released model's name may start with besides its family: a hub owner ('meta-llama/', 'nvidia/') and Meta's
# name ('Meta-Llama-3-70B'); matched in lower case
VENDOR_PREFIX = re.compile(r"^(?:[\w.-]+/)?(?:meta[\s_-]+)?")


def _nemo_recipe_tp_overlap(model_name: str) -> bool | None:
    """NeMo's performance recipe's tp_comm_overlap for the model (_NEMO_RECIPE_TP_OVERLAP, its name without
    VENDOR_PREFIX); None: no recipe."""
    key = re.sub(r"[^a-z0-9]", "", VENDOR_PREFIX.sub("", model_name.strip().lower()))
    return next((on for pattern, on in _NEMO_RECIPE_TP_OVERLAP if re.search(pattern, key)), None)


def _nemo(d: _Draft) -> None:
    d.kind = "zero1"
    d.knobs.update(overlap_grad_reduce=True, overlap_param_gather=True, grad_reduce_bytes=2)
    d.parts.append(_PERFORMANCE_REDUCE)
    d.parts.append(f"{'distributed optimizer (zero1) ' if d.unnamed else ''}with grad-reduce and param-gather "
                   "overlap (NeMo recipes)")
    if d.tp > 1:
        d.spec["sequence_parallel"] = d.spec["tp_async_grad_reduce"] = True
        d.parts.append("sequence parallelism on with tp > 1 (NeMo llama recipes); each column-parallel layer's "
                       "backward reduce-scatter beside its weight-gradient GEMM (Transformer Engine's Linear)")
        stated, recipe = _stated_tp_overlap(d.training), _nemo_recipe_tp_overlap(d.model_name)
        d.spec["tp_comm_overlap"] = bool(stated if stated is not None else recipe)
        if stated is None:
            d.parts.append(f"TP communication {'overlapped with' if recipe else 'after'} the GEMMs ("
                           + (f"NeMo's {d.model_name} performance recipe: tp_comm_overlap {bool(recipe)}"
                              if recipe is not None else "no NeMo recipe for the model: tp_comm_overlap off")
                           + ")")
    if d.layered:
        d.parts.append("ranks tp-dp-pp (Megatron-Core)")
    d.plain_schedule("no virtual pipeline stated")
    if d.pp > 1 and (d.training.get("vp") or 1) > 1:
        d.spec["overlap_p2p"] = True
        d.parts.append("pipeline sends overlap compute with virtual stages (NeMo's MegatronCommOverlapCallback: "
                       "overlap_p2p_comm)")
    if d.training.get("micro_batch") is None:
        d.training["micro_batch"] = 1
        d.parts.append("micro_batch 1 (NeMo recipes' micro_batch_size)")


def _megatron_deepspeed(d: _Draft) -> None:
    bf16 = "bf16" in str(d.training.get("precision") or "").lower()
    d.kind = "zero1" if bf16 else "ddp"
    d.knobs.update(overlap_grad_reduce=False, fp32_grad_copy=True)  # DeepSpeed's ZeRO-1 / fp16 optimizers
    # Megatron-DeepSpeed's published runs (2022-2023) predate DeepSpeed 0.12.4's bucket all-reduce
    d.knobs.update(reduce_per_rank=True)
    named = {str(name).lower() for name in d.training.get("strategy") or []}
    zero12 = d.kind == "zero1" or bool(named & {"zero1", "zero2"}) or str(d.training.get("zero_stage")) in ("1", "2")
    if zero12 and d.dp > 1:
        d.parts.append("one reduce per rank of each gradient bucket (DeepSpeed before 0.12.4, which the runs predate: "
                       "stage_1_and_2.py average_tensor)")
    if bf16 and d.unnamed:
        d.parts.append("no strategy named: the bf16 optimizer shards optimizer states (zero1)")
    stated = f"{d.training.get('precision') or ''} {d.training.get('zero_stage') or ''}".lower()
    if "bf16 optimizer" in stated and d.kind == "zero1":
        d.knobs.update(zero_grad_all_reduce=True, grad_reduce_bytes=4, grad_accumulation_bytes=BF16_ACCUMULATION_BYTES,
                       fp32_grad_copy=False,  # its step reads the fp32 buffer itself
                       contiguous_gradients=False)  # and holds no ZeRO reduction bucket
        d.parts.append("the stated bf16 optimizer adds every micro-batch's gradients into a whole fp32 buffer and "
                       "all-reduces it (DeepSpeed BF16_Optimizer.update_hp_grads, buffered_allreduce_fallback)")
    if d.dp > 1:
        d.parts.append("gradients reduced after the last micro-batch (DeepSpeed TrainSchedule ReduceGrads)")
    if d.layered:
        d.parts.append("ranks tp-dp-pp (DeepSpeed PipeModelDataParallelTopology), no sequence parallelism")
    d.plain_schedule("DeepSpeed TrainSchedule")
    if d.pp > 1:
        d.parts.append("blocking pipeline sends of 1/tp of the activation, all-gathered by the receiving stage "
                       "(DeepSpeed PipelineEngine: is_pipe_partitioned and is_grad_partitioned with TP)")


def _torchtitan_micro_batch(training: dict[str, Any], pp: int) -> str:
    """torchtitan's local batch split into pipeline micro-batches by its default: pp of them whatever
    the stages per rank until torchtitan PR #781 (2025-01-07; pp x stages per rank since), so for the
    Dec 2024 benchmark (torchtitan 9dec370, 2024-12-26), the only torchtitan pipeline runs in the data."""
    local = training.get("micro_batch")
    if local is None:
        raise Unexpressible("local batch not stated (torchtitan splits it into pipeline micro-batches)")
    if local % pp:
        raise Unexpressible(f"local batch {local} does not split into {pp} pipeline micro-batches")
    training["micro_batch"] = local // pp
    step = ""
    if training.get("global_batch") is None and training.get("grad_accum") is None:
        training["grad_accum"] = pp  # a step is the local batch through the pipeline
        step = f"; a step is those {pp} micro-batches"
    return (f"micro_batch {local} is torchtitan's local batch: {pp} pipeline micro-batches of {local // pp} "
            f"(its default before PR #781, 2025-01-07: pipeline_parallel_degree){step}")


def _torchtitan(d: _Draft) -> None:
    if d.training.get("fsdp_mixed_precision_mode") is None:
        d.knobs["grad_reduce_bytes"] = 4
        d.parts.append("FSDP reduces gradients in fp32 (training.mixed_precision_reduce, default float32)")
    if d.tp > 1:
        d.spec["sequence_parallel"] = True
        d.spec["tp_comm_overlap"] = bool(d.training.get("async_tp")) or "asynctp" in d.case_id.lower()
        if d.spec["tp_comm_overlap"]:
            d.spec["tp_comm_overlap_backward"] = False
            d.parts.append("async TP overlaps the forward's (and recomputed forward's) TP collectives only (PyTorch's "
                           "async-TP post: 20-29% faster forward passes, ~8% faster steps)")
        d.parts.append("sequence parallelism on (TP plan: SequenceParallel norms)")
    if d.layered:
        d.parts.append("ranks tp-dp-pp (device mesh pp, dp_replicate, dp_shard, cp, tp)")
    if (d.training.get("cp") or 1) > 1:
        d.spec["cp_merge"] = "eager"
        d.parts.append("PyTorch's context_parallel ring merges its step outputs in eager fp32 ops (_SDPAMerger)")
    if d.pp == 1:
        return
    text = str(d.training.get("pp_schedule") or d.case_id).lower().replace(" ", "")
    if "interleaved" in text:
        d.spec.update(pipeline_schedule="interleaved", virtual_stages=TORCHTITAN_STAGES_PER_RANK)
        d.parts.append(f"interleaved 1F1B with {TORCHTITAN_STAGES_PER_RANK} stages per rank (torchtitan default, "
                       "generate_split_points)")
    elif "gpipe" in text:
        d.spec["pipeline_schedule"] = "gpipe"
    elif "1f1b" not in text:
        d.plain_schedule("not stated")
    d.knobs["reshard_after_forward"] = False
    d.spec["overlap_p2p"] = True
    d.parts.append("FSDP keeps parameters gathered after forward with PP (torchtitan apply_fsdp); sends overlap "
                   "compute (asynchronous isend/irecv)")
    d.parts.append(_torchtitan_micro_batch(d.training, d.pp))


def _tp_pp_dp(d: _Draft, why: str, schedule: str) -> None:
    """Ranks tp-pp-dp and no sequence parallelism (the spec's defaults), for the reason `why`; a plain 1F1B."""
    if d.layered:
        d.spec["placement"] = "tp-pp-dp"
        d.parts.append(why)
        d.plain_schedule(schedule)


def _internevo(d: _Draft) -> None:
    _tp_pp_dp(d, "ranks tp-pp-dp (process_group_initializer.py: tensor groups of consecutive ranks, data-parallel "
              "groups strided by tp x pp), no sequence parallelism (modeling_internlm.py at fa7337b builds its "
              "linears with sequence_parallel=False)", "InternEvo's PipelineScheduler")


def _unknown(d: _Draft) -> None:
    _tp_pp_dp(d, "framework not known: ranks tp-pp-dp (the spec's default), no sequence parallelism", "not stated")


_CONVENTIONS: dict[str, Callable[[_Draft], None]] = {
    "megatron-lm": _megatron_lm, "megatron-core": _megatron_core, "nemo": _nemo,
    "megatron-deepspeed": _megatron_deepspeed, "torchtitan": _torchtitan, "internevo": _internevo, "": _unknown}


def _stated_virtual_stages(training: Mapping[str, Any], pp: int) -> dict[str, Any]:
    """The schedule a stated virtual-pipeline size gives (`vp`: model chunks per pipeline rank, Megatron-Core
    --virtual-pipeline-model-parallel-size, the VP column of NeMo's performance tables): vp > 1 is the
    interleaved 1F1B schedule over vp chunks, in place of what the framework's convention chose; vp 1 (or
    none stated) leaves the convention's schedule."""
    vp = training.get("vp")
    if vp is None or vp == 1:
        return {}
    if vp < 1:
        raise Unexpressible(f"vp {vp}: the virtual pipeline size is 1 or more")
    if pp == 1:
        raise Unexpressible(f"vp {vp} with pp 1: virtual pipeline stages split a pipeline stage (pp >= 2)")
    return {"pipeline_schedule": "interleaved", "virtual_stages": vp}


# frameworks that run a pipeline whose layers do not divide over its pp x vp chunks only with the embedding and the
# loss counted as layers (Megatron-Core --account-for-embedding-in-pipeline-split and
# --account-for-loss-in-pipeline-split: transformer_block.py adds a layer for each) or with stated first and last
# stage layer counts
_MEGATRON_FAMILY = ("megatron-lm", "megatron-core", "nemo")


def _pipeline_split(training: Mapping[str, Any], fw: str, layers: int, pp: int, chunks: int,
                    defaults: list[str]) -> dict[str, Any]:
    """The pipeline split of a case: Megatron-Core's custom layout where it states one (`pipeline_layout`), or its
    uneven first / last stages (num_layers_in_first_pipeline_stage, ..._last_...) as the layout they make, else
    the split stated (`pipeline_split`, or Megatron-Core's two account-for flags, which the model takes together
    only), else, under Megatron's frameworks, embedding_and_loss where the layers do not
    divide over the `chunks` but two more do (flagged); else the default, layers."""
    if training.get("pipeline_layout") is not None:
        return {"pipeline_layout": training["pipeline_layout"]}
    first, last = training.get("num_layers_in_first_pipeline_stage"), training.get("num_layers_in_last_pipeline_stage")
    if first is not None or last is not None:
        try:
            return {"pipeline_layout": uneven_layout(layers, pp, chunks // pp, first, last)}
        except ValueError as exc:
            raise Unexpressible(f"uneven pipeline stages: {exc}") from None
    if training.get("pipeline_split") is not None:
        return {"pipeline_split": training["pipeline_split"]}
    embedding = training.get("account_for_embedding_in_pipeline_split")
    loss = training.get("account_for_loss_in_pipeline_split")
    if embedding or loss:
        if not (embedding and loss):
            raise Unexpressible("only one of account_for_embedding_in_pipeline_split and "
                                "account_for_loss_in_pipeline_split: the model counts the embedding and the loss "
                                "as layers together (pipeline_split embedding_and_loss) or neither")
        return {"pipeline_split": "embedding_and_loss"}
    if fw in _MEGATRON_FAMILY and chunks > 1 and layers % chunks and (layers + 2) % chunks == 0:
        defaults.append(f"pipeline split not stated: {layers} layers do not divide over pp x vp = {chunks} chunks, "
                        f"{layers + 2} do: the embedding and the loss counted as layers (Megatron-Core's "
                        "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split)")
        return {"pipeline_split": "embedding_and_loss"}
    return {}


def _virtual_stages_of_layers(training: dict[str, Any], model: Mapping[str, Any], pp: int,
                              defaults: list[str]) -> None:
    """A virtual-pipeline size stated as layers a model chunk holds (Megatron-LM's
    --num-layers-per-virtual-pipeline-stage N: vp = layers / (pp x N)) as `vp`, in place, flagged; a stated vp
    wins. Unexpressible without the model's layers, or where they do not divide so."""
    per_chunk = training.get("layers_per_virtual_stage")
    if per_chunk is None or training.get("vp") is not None:
        return
    layers = int(model.get("layers") or 0)
    if not layers:
        raise Unexpressible(f"layers_per_virtual_stage {per_chunk} gives the virtual pipeline size only with the "
                            "model's layers stated")
    if per_chunk < 1 or layers % (pp * per_chunk):
        raise Unexpressible(f"layers_per_virtual_stage {per_chunk}: {layers} layers do not divide into pp {pp} x "
                            f"chunks of {per_chunk}")
    training["vp"] = layers // (pp * per_chunk)
    defaults.append(f"vp not stated: {layers} layers / (pp {pp} x {per_chunk} layers a chunk) = {training['vp']}")


def lower_parallel(case_id: str, training_in: Mapping[str, Any], model_in: Mapping[str, Any], names: list[str],
                   n_gpus: int, defaults: list[str]) -> ParallelLowering:
    """The layout of a case on `n_gpus` GPUs with its framework's conventions (flags go to `defaults`).

    Raises Unexpressible where the layout does not fit the GPU count or a degree is not known.
    """
    training, model = dict(training_in), dict(model_in)
    fw = framework_of(training)
    sc21 = None
    if fw == "megatron-lm" and training.get("model_parallel_size_tp_x_pp") and training.get("tp") is None \
            and training.get("pp") is None:
        sc21 = _fill_sc21(training, model, defaults)
    stated_dp = training.get("dp") or training.get("dp_derived")
    if fw == "torchtitan" and training.get("fsdp") and ((training.get("tp") or 1) > 1 or (training.get("pp") or 1) > 1):
        stated_dp = stated_dp or training["fsdp"]  # torchtitan's fsdp degree is dp_shard (no dp_replicate here)
    tp, pp, cp, dp = _degrees(training, names, n_gpus, stated_dp)
    _virtual_stages_of_layers(training, model, pp, defaults)
    ep = _expert_degree(training, names, model, dp * cp, tp if training.get("etp") == 1 else 1)
    draft = _Draft(case_id, training, unnamed_strategy(training, names), int(model.get("layers") or 0), tp, pp, dp,
                   sc21, str(model.get("name") or ""),
                   sp_stated="sp" in names or training.get("sequence_parallel") is not None)
    _CONVENTIONS[fw](draft)
    if draft.parts:
        defaults.append(f"{fw or 'framework'} conventions, not stated in the case: {'; '.join(draft.parts)}")
    spec = {"placement": "tp-dp-pp", **draft.spec} if draft.layered else draft.spec
    spec.update(_stated_virtual_stages(training, pp))
    if pp > 1:
        spec.update(_pipeline_split(training, fw, draft.layers, pp, pp * int(spec.get("virtual_stages") or 1),
                                    defaults))
    if "sp" in names or training.get("sequence_parallel") is True:  # named or set by the case: Megatron's
        # sequence parallelism, which splits the tp group's work
        if tp == 1:  # Megatron-LM (training/arguments.py) and NeMo turn it off with a warning: nothing to split
            defaults.append("sequence parallelism named with tp 1: off, as Megatron-LM and NeMo turn it off "
                            "(arguments.py: 'Disabling sequence parallelism because tensor model parallelism is "
                            "disabled')")
        else:
            spec["sequence_parallel"] = True
    elif training.get("sequence_parallel") is False and spec.get("sequence_parallel"):
        # set off by the case, against its framework's convention; Megatron's TP overlap needs it (arguments.py:
        # tp_comm_overlap asserts sequence_parallel), so that goes off with it
        spec["sequence_parallel"] = spec["tp_comm_overlap"] = False
        defaults.append("sequence parallelism off, as the case states (and with it the TP communication overlap)")
    if ep > 1 and tp > 1 and not spec.get("sequence_parallel"):
        spec["sequence_parallel"] = True
        defaults.append("sequence parallelism on: expert parallelism with tp > 1 requires it (Megatron-Core's "
                        "argument check)")
    if ep > 1:
        spec.update(_ep_dispatcher(training.get("moe_token_dispatcher"), defaults))
    etp = training.get("etp")
    if etp is not None and etp not in (1, tp):
        raise Unexpressible(f"etp {etp}: expert tensor parallelism other than 1 or tp ({tp}) is not modelled")
    if etp is not None and ep > 1:
        spec["etp"] = int(etp)
    parallel = ParallelSpec(tp=tp, pp=pp, cp=cp, ep=ep, **spec)
    return ParallelLowering(training, model, parallel, dp, draft.kind if draft.unnamed else None, draft.knobs)
