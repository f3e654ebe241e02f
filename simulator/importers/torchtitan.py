"""A torchtitan job config (TOML) as a clustersim training job.

Key names and defaults are torchtitan's (torchtitan/config/job_config.py, JobConfig and its sections; the
example configs torchtitan/models/llama3/train_configs/llama3_8b.toml and friends):

- [model] name / flavor: llama3 8B, 70B, 405B and llama2 7B, 13B, 70B are the presets of the same shape
  (torchtitan/models/llama3 and llama2 flavors); converters = ["float8"] trains the linear layers in fp8
  (older releases: [float8] enable_float8_linear), ["mx"] in MXFP8 (read as fp8).
- [training] local_batch_size (older releases: batch_size; default 8) sequences per GPU, global_batch_size (-1:
  local x data-parallel degree; larger: gradient accumulation), seq_len (2048), mixed_precision_param
  (bfloat16) and mixed_precision_reduce (float32: FSDP reduces gradients in fp32), compile (older releases;
  [compile] enable since), enable_cpu_offload (refused: offload is not modelled).
- [parallelism] data_parallel_replicate_degree (1) x data_parallel_shard_degree (-1: the GPUs left over) x
  tensor / pipeline / context / expert degrees must be the cluster's GPUs (torchtitan's ParallelDims checks
  it). Replicate and shard both > 1 is HSDP, shard alone FSDP, replicate alone DDP.
- Tensor parallelism shards the norms too (its TP plan's SequenceParallel): sequence_parallel;
  enable_async_tensor_parallel overlaps the forward's TP collectives, only with compile (the key's own note).
- Ranks follow the device mesh (pp, dp_replicate, dp_shard, cp, tp): tp-dp-pp. Context parallelism merges
  its ring steps in eager fp32 ops (PyTorch's context_parallel). With pipeline parallelism FSDP keeps
  parameters gathered after forward (fsdp_reshard_after_forward "default") and sends overlap compute.
- pipeline_parallel_schedule (1F1B): GPipe, 1F1B, Interleaved1F1B (and the other multi-stage schedules, read
  as interleaved) with pipeline_parallel_microbatch_size (1) sequences per micro-batch; stages per rank from
  pipeline_parallel_layers_per_stage or split points, else 2. Older releases (batch_size) split the local
  batch into pp micro-batches.
- [activation_checkpoint] mode (selective) none / selective / full; selective_ac_option "op" is torchtitan's
  per-op policy, an integer n recomputes every n-th block whole: full with recompute_layers layers / n (1: every
  block).
- torchtitan runs its blocks as eager PyTorch ops without compile: fused_elementwise false. Its loss is
  F.cross_entropy on fp32 logits, compiled with the model where [compile] components (["model", "loss"])
  name it: cross_entropy fused, else eager (components/loss.py).
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

from simulator.core.errors import ConfigError
from simulator.core.input_file import MAX_DEPTH
from simulator.importers.result import ImportedJob, Settings
from workloads.presets import load_model
from workloads.spec import ModelSpec

# (model.name, model.flavor) -> preset of the same shape (torchtitan/models/{llama3,llama2}/__init__.py flavors)
FLAVORS = {("llama3", "8B"): "llama3-8b", ("llama3", "70B"): "llama3-70b", ("llama3", "405B"): "llama3-405b",
           ("llama2", "7B"): "llama2-7b", ("llama2", "13B"): "llama2-13b", ("llama2", "70B"): "llama2-70b"}
_SINGLE_STAGE = {"1f1b": "1f1b", "gpipe": "gpipe"}
_KEY_PART = r"""(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')"""
_DEEP_KEY = re.compile(rf"(?:{_KEY_PART}[ \t]*\.[ \t]*){{{MAX_DEPTH},}}")
DEFAULT_STAGES_PER_RANK = 2  # torchtitan generate_split_points: multi-stage schedules without split points
# Keys that do not change a step's time or memory (logging, data, checkpoints, learning rate, timeouts).
_IRRELEVANT = ("job", "profiling", "metrics", "lr_scheduler", "checkpoint", "comm", "memory_estimation",
               "fault_tolerance", "experimental", "validation", "mx", "optimizer.lr", "optimizer.beta1",
               "optimizer.beta2", "optimizer.eps", "optimizer.weight_decay", "optimizer.implementation",
               "optimizer.early_step_in_backward", "model.tokenizer_path", "model.hf_assets_path",
               "model.print_after_conversion", "training.dataset", "training.dataset_path", "training.max_norm",
               "training.steps", "training.warmup_steps", "training.gc_freq", "training.gc_debug", "training.seed",
               "training.deterministic", "parallelism.disable_loss_parallel", "parallelism.enable_compiled_autograd",
               "parallelism.pipeline_parallel_schedule_csv", "parallelism.context_parallel_rotate_method",
               "activation_checkpoint.per_op_sac_force_recompute_mm_shapes_by_fqns",
               "float8.precompute_float8_dynamic_scale_for_fsdp", "float8.force_recompute_fp8_weight_in_bwd",
               "float8.recipe_name", "float8.filter_fqns", "float8.emulate", "float8.moe_fqns_prototype")


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """TOML text as a mapping; ConfigError naming the source and line when it is not TOML, or nests deeper than
    MAX_DEPTH levels (tomllib's time and memory grow with the square of a dotted key's length, and it recurses
    into inline tables and arrays)."""
    deep = _DEEP_KEY.search(text)
    if deep is not None:
        line = text.count("\n", 0, deep.start()) + 1
        raise ConfigError(f"{source}: line {line}: a key of more than {MAX_DEPTH} dotted parts")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{source}: nested too deeply (inline tables or arrays)") from None


def import_torchtitan(text: str, source: str, gpus: int, model: ModelSpec | None) -> ImportedJob:
    """The job of a torchtitan TOML on `gpus` GPUs (module docstring); `model`, when given, replaces the
    config's [model] (the job's model is then left None for the caller to fill in)."""
    s = Settings(parse_toml(text, source), source)
    notes: list[str] = []
    preset = None if model is not None else _preset(s)
    layers = (model or load_model(str(preset))).layers
    if s.boolean("training.enable_cpu_offload"):
        raise ConfigError(f"{source}: training.enable_cpu_offload: clustersim does not model CPU offload "
                          "(parameters, gradients and optimizer states moved over PCIe); set it false")
    rep = s.integer("parallelism.data_parallel_replicate_degree", 1)
    tp = s.integer("parallelism.tensor_parallel_degree", 1)
    pp = s.integer("parallelism.pipeline_parallel_degree", 1)
    cp = s.integer("parallelism.context_parallel_degree", 1)
    ep = s.integer("parallelism.expert_parallel_degree", 1)
    shard = _shard_degree(s, gpus, rep * tp * pp * cp)
    compiled = s.boolean("compile.enable", s.boolean("training.compile"))
    training: dict[str, Any] = {
        "seq_len": s.integer("training.seq_len", 2048), "precision": _precision(s), "fused_elementwise": compiled,
        "optimizer": s.text("optimizer.name", "AdamW", ("AdamW", "Adam")).lower(), "framework": "fsdp2"}
    if not compiled:
        notes.append("no compile: norms, rotary and activations run as eager PyTorch ops (fused_elementwise false)")
    components = s.value("compile.components")
    if components is not None and not (isinstance(components, list) and all(isinstance(c, str) for c in components)):
        raise s.error("compile.components", "a list of names (model, loss)", components)
    training["cross_entropy"] = "fused" if compiled and "loss" in (components or ["loss"]) else "eager"
    training["micro_batch"], training["global_batch"] = _batches(s, pp, rep * shard, notes)
    training.update(_checkpointing(s, layers))
    training["strategy"] = _strategy(s, rep, shard * cp, pp)
    parallel: dict[str, Any] = {"tp": tp, "pp": pp, "cp": cp, "ep": ep}
    if tp > 1 or pp > 1 or cp > 1:
        parallel["placement"] = "tp-dp-pp"
        notes.append("ranks tp-dp-pp (torchtitan's device mesh: pp, dp_replicate, dp_shard, cp, tp)")
    if tp > 1:
        parallel["sequence_parallel"] = True
        notes.append("tensor parallelism shards the norms too (torchtitan's TP plan): sequence_parallel")
        if s.boolean("parallelism.enable_async_tensor_parallel"):
            if compiled:
                parallel.update(tp_comm_overlap=True, tp_comm_overlap_backward=False)
            else:
                s.warnings.append("parallelism.enable_async_tensor_parallel takes effect only with compile "
                                  "(torchtitan): TP communication is not overlapped")
    if cp > 1:
        parallel["cp_merge"] = "eager"
    if pp > 1:
        parallel.update(_schedule(s, pp, layers), overlap_p2p=True)
    training["parallel"] = parallel
    replaced = ("model.name", "model.flavor") if model is not None else ()  # --model replaces them
    return ImportedJob(training=training, model=preset, notes=notes, warnings=s.warnings,
                       unknown=s.unknown((*_IRRELEVANT, *replaced)))


def _precision(s: Settings) -> str:
    """fp8 with the float8 converter, else the parameters' mixed precision (bfloat16 or float32)."""
    converters = s.value("model.converters") or []
    names = converters.split(",") if isinstance(converters, str) else converters
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise s.error("model.converters", "a list of converter names", converters)
    gather_fp8 = s.boolean("float8.enable_fsdp_float8_all_gather")
    names = [name.strip() for name in names]
    if "mx" in names:
        s.warnings.append("model.converters mx (MXFP8 linear layers): modelled as fp8")
    if "float8" in names or "mx" in names or s.boolean("float8.enable_float8_linear"):
        if gather_fp8:
            s.warnings.append("float8.enable_fsdp_float8_all_gather: FSDP all-gathers are modelled at 16 bits")
        return "fp8"
    param = s.text("training.mixed_precision_param", "bfloat16", ("bfloat16", "float32"))
    return "bf16" if param == "bfloat16" else "fp32"


def _strategy(s: Settings, rep: int, shard: int, pp: int) -> dict[str, Any]:
    """HSDP with both data-parallel degrees > 1, FSDP with shard alone, DDP otherwise, `shard` being FSDP's
    mesh: data_parallel_shard_degree x context_parallel_degree (torchtitan's dp_shard_cp, which FSDP shards over
    whenever either is above 1; parallelize.py); FSDP reduces in mixed_precision_reduce and, with PP, keeps
    parameters gathered after forward (torchtitan apply_fsdp)."""
    kind = "hsdp" if rep > 1 and shard > 1 else "fsdp" if shard > 1 else "ddp"
    strategy: dict[str, Any] = {"kind": kind}
    if kind == "ddp":
        return strategy
    if kind == "hsdp":
        strategy["shard_group_gpus"] = shard
    reduce = s.text("training.mixed_precision_reduce", "float32", ("float32", "bfloat16"))
    strategy["grad_reduce_bytes"] = 4 if reduce == "float32" else 2
    reshard = s.text("parallelism.fsdp_reshard_after_forward", "default", ("default", "always", "never"))
    if reshard != "default" or pp > 1:
        strategy["reshard_after_forward"] = reshard == "always"
    return strategy


def _preset(s: Settings) -> str:
    """The preset of [model] name and flavor; ConfigError naming them and what is known otherwise."""
    name, flavor = s.text("model.name", "llama3"), s.text("model.flavor", "debugmodel")
    preset = FLAVORS.get((str(name), str(flavor)))
    if preset is None:
        known = ", ".join(f"{n} {f}" for n, f in FLAVORS)
        raise ConfigError(f"{s.source}: model {name} flavor {flavor}: no preset of that shape (known: {known}); "
                          "give --model NAME|FILE")
    return preset


def _shard_degree(s: Settings, gpus: int, others: int) -> int:
    """data_parallel_shard_degree, -1 meaning the GPUs the other degrees leave; ConfigError when the degrees do
    not make up the cluster (torchtitan ParallelDims: their product is the world size)."""
    shard = s.integer("parallelism.data_parallel_shard_degree", -1, least=-1)
    if shard in (-1, 0):
        if gpus % others:
            raise ConfigError(f"{s.source}: parallelism: replicate x tensor x pipeline x context degrees ({others}) "
                              f"do not divide the cluster's {gpus} GPUs (--topology, --nodes)")
        return gpus // others
    if shard * others != gpus:
        raise ConfigError(f"{s.source}: parallelism: the degrees multiply to {shard * others} GPUs, the cluster has "
                          f"{gpus} (--topology, --nodes); data_parallel_shard_degree = -1 takes the rest")
    return shard


def _batches(s: Settings, pp: int, dp: int, notes: list[str]) -> tuple[int, int]:
    """(sequences per micro-batch, sequences per step) from the local and global batch sizes."""
    older = s.has("training.batch_size") and not s.has("training.local_batch_size")
    local = s.integer("training.batch_size" if older else "training.local_batch_size", 8)
    step = s.integer("training.global_batch_size", -1, least=-1)
    if step in (-1, 0):
        step = local * dp
    elif step % (local * dp):
        raise ConfigError(f"{s.source}: training.global_batch_size {step}: must be a multiple of the local batch "
                          f"{local} x the data-parallel degree {dp} = {local * dp}")
    if pp == 1:
        return local, step
    if older and not s.has("parallelism.pipeline_parallel_microbatch_size"):
        if local % pp:
            raise ConfigError(f"{s.source}: training.batch_size {local}: must split into {pp} pipeline micro-batches")
        notes.append(f"batch_size {local} split into {pp} pipeline micro-batches (releases with training.batch_size)")
        return local // pp, step
    micro = s.integer("parallelism.pipeline_parallel_microbatch_size", 1)
    if local % micro:
        raise ConfigError(f"{s.source}: parallelism.pipeline_parallel_microbatch_size {micro}: must divide the "
                          f"local batch size {local}")
    return micro, step


def _schedule(s: Settings, pp: int, layers: int) -> dict[str, Any]:
    """pipeline_schedule and virtual_stages of pipeline_parallel_schedule."""
    name = s.text("parallelism.pipeline_parallel_schedule", "1F1B")
    per_stage = s.integer("parallelism.pipeline_parallel_layers_per_stage", 0, least=0)
    splits = s.value("parallelism.pipeline_parallel_split_points")
    if name.lower() in _SINGLE_STAGE:
        return {"pipeline_schedule": _SINGLE_STAGE[name.lower()]}
    if name.lower() != "interleaved1f1b":
        s.warnings.append(f"parallelism.pipeline_parallel_schedule {name}: modelled as interleaved 1F1B")
    stages = DEFAULT_STAGES_PER_RANK
    if per_stage:
        stages = max(2, -(-layers // per_stage) // pp)
    elif isinstance(splits, list | str) and splits:
        stages = max(2, (len(splits.split(",") if isinstance(splits, str) else splits) + 1) // pp)
    return {"pipeline_schedule": "interleaved", "virtual_stages": stages}


def _checkpointing(s: Settings, layers: int) -> dict[str, Any]:
    """activation_checkpointing (and recompute_layers) of [activation_checkpoint] mode and selective_ac_option."""
    mode = s.text("activation_checkpoint.mode", "selective", ("none", "selective", "full"))
    if mode != "selective":
        return {"activation_checkpointing": mode}
    option = str(s.value("activation_checkpoint.selective_ac_option") or "2").strip()
    if option == "op":
        return {"activation_checkpointing": "op"}
    if not option.isdigit() or int(option) < 1:
        raise s.error("activation_checkpoint.selective_ac_option", "'op' or a positive integer", option)
    if int(option) == 1:
        return {"activation_checkpointing": "full"}
    return {"activation_checkpointing": "full", "recompute_layers": layers // int(option)}
