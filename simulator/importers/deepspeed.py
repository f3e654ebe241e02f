"""A DeepSpeed config (ds_config JSON) as a clustersim training job.

Key names and defaults are DeepSpeed's (deepspeed/runtime/config.py and constants.py for the batch and
precision keys, deepspeed/runtime/zero/config.py DeepSpeedZeroConfig for zero_optimization):

- train_batch_size = train_micro_batch_size_per_gpu x gradient_accumulation_steps x data-parallel GPUs; given
  two, DeepSpeed derives the third, given one it takes no accumulation, given none it refuses. A DeepSpeed
  config has no model parallelism: every GPU is data parallel.
- bf16.enabled / fp16.enabled (both false: fp32; both true is refused, as DeepSpeed does). Its mixed-precision
  optimizers keep fp32 master weights and step on fp32 gradient copies (fp32_grad_copy); gradients are reduced
  in the model's precision unless communication_data_type says otherwise.
- zero_optimization.stage (0): 0 is data parallelism with gradients all-reduced after the backward in buckets of
  5e8 elements (engine.py MEMORY_OPT_ALLREDUCE_SIZE), 1 / 2 / 3 are zero1 / zero2 / zero3. bf16 without ZeRO
  runs the BF16_Optimizer (engine.py _configure_bf16_optimizer; bf16_optimizer.py): optimizer states sharded,
  gradients accumulated into an fp32 buffer and all-reduced (the convention the training validation uses). overlap_comm
  (default: true at stage 3, false below) overlaps the reductions with the backward; reduce_bucket_size and
  allgather_bucket_size (5e8 elements) size the buckets (clustersim has one size: reduce_bucket_size's).
  At stages 1 and 2 each bucket is all-reduced and each rank keeps its slice (use_multi_rank_bucket_allreduce,
  default true since 0.12.4; reduce_scatter false all-reduces it too); with use_multi_rank_bucket_allreduce
  false, one reduce per rank (reduce_per_rank).
  stage3_prefetch_bucket_size 0 turns prefetching off; contiguous_gradients (default true) keeps the
  reduce_bucket_size bucket in memory; stage3_param_persistence_threshold and stage3_max_live_parameters shape
  memory and are not modelled.
- offload_optimizer / offload_param (and the older cpu_offload keys) are refused: clustersim does not model
  CPU or NVMe offload.
- "auto" (the HuggingFace Trainer fills it in from its own arguments) is read as not given, with a warning.
- The model is not in the config (--model); activation checkpointing is the model code's choice (--recompute).
"""

from __future__ import annotations

import json
from typing import Any

from simulator.core.errors import ConfigError
from simulator.core.json_text import load_json_text
from simulator.importers.result import ImportedJob, Settings
from simulator.validation.training_parallel import BF16_ACCUMULATION_BYTES
from workloads.spec import ModelSpec

BUCKET_ELEMENTS = 500_000_000  # reduce/allgather_bucket_size default; engine.py MEMORY_OPT_ALLREDUCE_SIZE
_STAGES = {0: "ddp", 1: "zero1", 2: "zero2", 3: "zero3"}
_OPTIMIZERS = {"adam": "adam", "adamw": "adamw", "fusedadam": "adam", "cpuadam": "adam"}
_COMM_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
# Keys that do not change a step's time or memory (logging, learning rate, loss scaling, checkpoints).
_IRRELEVANT = ("optimizer.params", "scheduler", "gradient_clipping", "steps_per_print", "wall_clock_breakdown",
               "prescale_gradients", "gradient_predivide_factor", "fp16.loss_scale", "fp16.initial_scale_power",
               "fp16.loss_scale_window", "fp16.hysteresis", "fp16.consecutive_hysteresis", "fp16.min_loss_scale",
               "fp16.auto_cast", "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer",
               "zero_optimization.load_from_fp32_weights",
               "zero_optimization.stage3_gather_16bit_weights_on_model_save",
               "zero_optimization.stage3_gather_fp16_weights_on_model_save",
               "zero_optimization.ignore_unused_parameters",
               "zero_optimization.elastic_checkpoint", "zero_optimization.round_robin_gradients",
               "zero_optimization.sub_group_size", "zero_optimization.stage3_max_reuse_distance",
               "zero_optimization.allgather_partitions",
               "tensorboard", "wandb", "csv_monitor", "comms_logger", "flops_profiler", "activation_checkpointing",
               "checkpoint", "data_efficiency", "elasticity", "aio", "dump_state", "memory_breakdown",
               "sparse_gradients", "train_batch_size_auto", "autotuning")


def parse_json(text: str, source: str) -> dict[str, Any]:
    """JSON text that must be an object; ConfigError naming the source and line otherwise."""
    try:
        data = load_json_text(text, source)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: not valid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a JSON object of DeepSpeed settings, got {type(data).__name__}")
    return data


def import_deepspeed(text: str, source: str, gpus: int, model: ModelSpec | None) -> ImportedJob:
    """The job of a DeepSpeed config on `gpus` GPUs (module docstring); `model` is required (the config names
    none) and left for the caller to write."""
    s = Settings(parse_json(text, source), source, auto=True)
    if model is None:
        raise ConfigError(f"{source}: a DeepSpeed config names no model; give --model NAME|FILE (a preset such as "
                          "llama2-13b, a model YAML or a HuggingFace config.json)")
    _refuse_offload(s)
    precision = _precision(s)
    notes: list[str] = [f"every one of the {gpus} GPUs data parallel (a DeepSpeed config has no model parallelism)"]
    training: dict[str, Any] = {"precision": precision, **_batches(s, gpus), "activation_checkpointing": "none",
                                "framework": "deepspeed"}
    notes.append("activation checkpointing is the model code's choice, not the config's: none (--recompute sets it)")
    optimizer = s.text("optimizer.type", "AdamW").lower()
    training["optimizer"] = _OPTIMIZERS.get(optimizer, "adamw")
    if optimizer not in _OPTIMIZERS:
        s.warnings.append(f"optimizer.type {s.value('optimizer.type')}: modelled as AdamW (two fp32 moments)")
    training["strategy"] = _strategy(s, precision, notes)
    return ImportedJob(training=training, model=None, notes=notes, warnings=s.warnings,
                       unknown=s.unknown(_IRRELEVANT))


def _refuse_offload(s: Settings) -> None:
    """ConfigError for any offload to CPU or NVMe (a device other than none)."""
    for key in ("zero_optimization.offload_optimizer", "zero_optimization.offload_param"):
        section = s.value(key)
        device = section.get("device", "cpu") if isinstance(section, dict) else section
        if section is not None and device != "none":
            raise ConfigError(f"{s.source}: {key} (device {device}): clustersim does not model CPU or NVMe offload "
                              "(optimizer states or parameters moved off the GPU and the step run on the CPU); "
                              "remove it or set device none")
    for key in ("zero_optimization.cpu_offload", "zero_optimization.cpu_offload_param"):
        if s.boolean(key):
            raise ConfigError(f"{s.source}: {key}: clustersim does not model CPU offload; set it false")


def _precision(s: Settings) -> str:
    """bf16, fp16 or fp32 from bf16.enabled (or the older bfloat16.enabled) and fp16.enabled."""
    bf16 = s.boolean("bf16.enabled") or s.boolean("bfloat16.enabled")
    fp16 = s.boolean("fp16.enabled")
    if bf16 and fp16:
        raise ConfigError(f"{s.source}: bf16.enabled and fp16.enabled: DeepSpeed takes one of them, not both")
    return "bf16" if bf16 else "fp16" if fp16 else "fp32"


def _batches(s: Settings, gpus: int) -> dict[str, int]:
    """micro_batch and global_batch from the three batch keys (DeepSpeed's _set_batch_related_parameters)."""
    micro = s.integer("train_micro_batch_size_per_gpu", 0)
    accum = s.integer("gradient_accumulation_steps", 0)
    batch = s.integer("train_batch_size", 0)
    if not micro and not batch:
        if any(s.value(k) == "auto" for k in ("train_micro_batch_size_per_gpu", "train_batch_size")):
            s.warnings.append("no batch size but 'auto': 1 sequence per GPU taken")
            micro = 1
        else:
            raise ConfigError(f"{s.source}: train_batch_size or train_micro_batch_size_per_gpu: DeepSpeed needs one "
                              "of them")
    if micro and batch:
        if batch % (micro * gpus) or (accum and batch != micro * accum * gpus):
            raise ConfigError(f"{s.source}: train_batch_size {batch}: must be train_micro_batch_size_per_gpu {micro} "
                              f"x gradient_accumulation_steps {accum or 'n'} x {gpus} GPUs")
        return {"micro_batch": micro, "global_batch": batch}
    if batch:
        per_gpu = accum or 1
        if batch % (per_gpu * gpus):
            raise ConfigError(f"{s.source}: train_batch_size {batch}: must divide into gradient_accumulation_steps "
                              f"{per_gpu} x {gpus} GPUs")
        return {"micro_batch": batch // (per_gpu * gpus), "global_batch": batch}
    return {"micro_batch": micro, "global_batch": micro * (accum or 1) * gpus}


def _strategy(s: Settings, precision: str, notes: list[str]) -> dict[str, Any]:
    """The ZeRO stage and its knobs as a StrategySpec's fields."""
    if isinstance(s.data.get("zero_optimization"), bool):  # the older form, `"zero_optimization": true`: stage 1
        stage = int(s.boolean("zero_optimization"))
    else:
        stage = s.integer("zero_optimization.stage", 0, least=0)
    if stage not in _STAGES:
        raise s.error("zero_optimization.stage", "0, 1, 2 or 3", stage)
    kind = _STAGES[stage]
    reduce_bucket = s.integer("zero_optimization.reduce_bucket_size", BUCKET_ELEMENTS)
    gather_bucket = s.integer("zero_optimization.allgather_bucket_size", BUCKET_ELEMENTS)
    comm = s.text("communication_data_type", "", ("fp32", "fp16", "bf16", ""))
    reduce_bytes = _COMM_BYTES.get(comm, 4 if precision == "fp32" else 2)
    strategy: dict[str, Any] = {"kind": kind, "grad_reduce_bytes": reduce_bytes,
                                "fp32_grad_copy": precision != "fp32"}
    if kind == "ddp" and precision == "bf16":
        strategy.update(kind="zero1", zero_grad_all_reduce=True, grad_reduce_bytes=4, fp32_grad_copy=False,
                        grad_accumulation_bytes=BF16_ACCUMULATION_BYTES, overlap_grad_reduce=False,
                        contiguous_gradients=False)  # no ZeRO reduction bucket: the fp32 buffer is all-reduced
        notes.append("bf16 without ZeRO runs DeepSpeed's BF16_Optimizer: fp32 master weights and optimizer states "
                     "sharded (zero1), each micro-batch's gradients added into an fp32 buffer that is all-reduced")
        return strategy
    if kind == "ddp":
        strategy.update(bucket_bytes=BUCKET_ELEMENTS * reduce_bytes, first_bucket_bytes=BUCKET_ELEMENTS * reduce_bytes,
                        overlap_grad_reduce=False)
        notes.append("ZeRO stage 0: gradients all-reduced after the backward in buckets of 5e8 elements")
        return strategy
    strategy["zero_bucket_elements"] = reduce_bucket
    if gather_bucket != reduce_bucket:
        s.warnings.append(f"zero_optimization.allgather_bucket_size {gather_bucket:g}: modelled at reduce_bucket_size "
                          f"{reduce_bucket:g}")
    strategy["overlap_grad_reduce"] = s.boolean("zero_optimization.overlap_comm", stage == 3)
    strategy["contiguous_gradients"] = s.boolean("zero_optimization.contiguous_gradients", True)
    if stage in (1, 2):
        scatter = s.boolean("zero_optimization.reduce_scatter", True)
        multi_rank = s.boolean("zero_optimization.use_multi_rank_bucket_allreduce", True)
        strategy["bucket_all_reduce"] = not scatter or multi_rank
        strategy["reduce_per_rank"] = scatter and not multi_rank
    if stage == 3:
        if s.integer("zero_optimization.stage3_prefetch_bucket_size", 50_000_000, least=0) == 0:
            strategy["backward_prefetch"] = False
        s.integer("zero_optimization.stage3_param_persistence_threshold", 100_000, least=0)
        s.integer("zero_optimization.stage3_max_live_parameters", 1_000_000_000, least=0)
        notes.append("ZeRO-3: each weight matrix gathered before its forward and its backward (submodule by "
                     "submodule), the next ahead; stage3_param_persistence_threshold and stage3_max_live_parameters "
                     "not modelled")
        # ZeRO++ (Wang et al. 2023): zero_quantized_weights (qwZ), zero_hpz_partition_size > 1 (hpZ),
        # zero_quantized_gradients (qgZ); hpZ's partition is modelled as the node
        zeropp = {"zeropp_quantized_weights": s.boolean("zero_optimization.zero_quantized_weights", False),
                  "zeropp_hierarchical_partition": s.integer("zero_optimization.zero_hpz_partition_size", 1,
                                                             least=1) > 1,
                  "zeropp_quantized_gradients": s.boolean("zero_optimization.zero_quantized_gradients", False)}
        strategy.update({name: True for name, on in zeropp.items() if on})
    return strategy
