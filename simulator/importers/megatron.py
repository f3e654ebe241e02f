"""A Megatron-LM (pretrain_gpt.py) argument list, or a NeMo command line, as a clustersim training job.

Flag names and defaults are Megatron-LM's (megatron/training/arguments.py):

- The model: --num-layers, --hidden-size, --num-attention-heads (required without --model), --ffn-hidden-size
  (default 4 x hidden; with --swiglu int(4 x hidden x 2/3 / 64) x 64), --group-query-attention with
  --num-query-groups (1), --max-position-embeddings (default --seq-length), --position-embedding-type
  (learned_absolute; rope), --disable-bias-linear, --untie-embeddings-and-output-weights, --num-experts,
  --moe-router-topk (2), --moe-ffn-hidden-size, --moe-layer-freq (1: every block a mixture; a pattern such as
  "([0]*3+[1]*58)": its leading dense blocks; other interleavings are refused), --kv-channels (a head's width,
  default hidden / heads), --multi-latent-attention with --q-lora-rank (None), --kv-lora-rank (32), --qk-head-dim
  (128), --qk-pos-emb-head-dim (64), --v-head-dim (128). The vocabulary is --vocab-size, or GPT-2's 50,257 BPE tokens
  with --vocab-file / --tokenizer-type GPT2BPETokenizer, padded to a multiple of --make-vocab-size-divisible-by
  (128) x tensor-parallel size (Megatron's _vocab_size_with_padding). --model replaces all of it.
- Parallelism: --tensor-model-parallel-size, --pipeline-model-parallel-size, --context-parallel-size,
  --expert-model-parallel-size (all 1), --expert-tensor-parallel-size (default the tensor-parallel size; 1 or
  that size are modelled), --sequence-parallel (dropped with tp 1, as Megatron does),
  --tp-comm-overlap; interleaving from --num-layers-per-virtual-pipeline-stage (layers / (pp x that) stages
  per rank) or --num-virtual-stages-per-pipeline-rank, whose pipeline sends overlap compute unless
  --no-overlap-p2p-communication (Megatron's overlap_p2p_comm: on by default, and off without virtual
  stages, where schedules.py rejects it). Ranks tp-dp-pp (Megatron-Core's order tp-cp-ep-dp-pp).
- Data parallelism: ddp, or zero1 with --use-distributed-optimizer (in groups of data-parallel ranks / k with
  --num-distributed-optimizer-instances k); --overlap-grad-reduce and
  --overlap-param-gather (the latter needs the distributed optimizer); gradients reduced in 16 bits unless
  --accumulate-allreduce-grads-in-fp32; fp32 master weights and gradient copies for the step.
- --micro-batch-size (1 here when absent), --global-batch-size (default micro-batch x data-parallel GPUs),
  --seq-length, --bf16 / --fp16 (else fp32), --fp8-format (fp8) with --fp8-recipe (delayed, tensorwise, mxfp8,
  blockwise; default delayed).
- Recomputation: --recompute-activations (selective), --recompute-granularity full|selective,
  --checkpoint-activations (full; its name before 2022); --recompute-method block with --recompute-num-layers N
  recomputes N blocks of each model chunk: recompute_layers N x the chunks (pipeline stages x virtual stages).
- Attention: Transformer Engine (--transformer-impl transformer_engine, the default) runs cuDNN's fused
  attention; --transformer-impl local fuses it only with --use-flash-attn.
- NeMo overrides (model.tensor_model_parallel_size=8, model.sequence_parallel=true, trainer.precision=bf16-mixed,
  model.optim.name=distributed_fused_adam, model.bias=false, model.activation=fast-swiglu,
  model.share_embeddings_and_output_weights=false, ...) read as the flags of the same meaning.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any, get_args

from simulator.core.errors import ConfigError
from simulator.importers.megatron_args import parse_arguments
from simulator.importers.result import ImportedJob, Settings
from workloads.spec import Fp8Recipe, ModelSpec

GPT2_VOCAB = 50257  # GPT-2 BPE vocabulary (Radford et al. 2019), Megatron's GPT2BPETokenizer
VOCAB_MULTIPLE = 128  # --make-vocab-size-divisible-by default
_PRECISIONS = {"bf16": "bf16", "bf16-mixed": "bf16", "16": "fp16", "16-mixed": "fp16", "fp16": "fp16",
               "32": "fp32", "fp32": "fp32", "32-true": "fp32"}
# Flags that do not change a step's time or memory: learning rate, data, logging, checkpoints, launcher.
_IRRELEVANT = (
    "lr", "min-lr", "lr-decay-style", "lr-decay-iters", "lr-decay-samples", "lr-warmup-fraction", "lr-warmup-iters",
    "lr-warmup-samples", "lr-warmup-init", "train-iters", "train-samples", "weight-decay", "clip-grad", "adam-beta1",
    "adam-beta2", "adam-eps", "init-method-std", "hidden-dropout", "attention-dropout", "log-interval",
    "log-throughput", "log-params-norm", "log-num-zeros-in-grad", "log-timers-to-tensorboard",
    "log-validation-ppl-to-tensorboard", "log-memory-to-tensorboard", "eval-iters", "eval-interval", "save", "load",
    "save-interval", "data-path", "split", "merge-file", "tokenizer-model", "data-cache-path", "tensorboard-dir",
    "wandb-project", "wandb-exp-name", "wandb-save-dir", "seed", "distributed-backend", "distributed-timeout-minutes",
    "normalization", "norm-epsilon", "use-mcore-models", "use-legacy-models", "rotary-base", "rotary-percent",
    "use-rotary-position-embeddings", "no-position-embedding", "attention-softmax-in-fp32", "no-masked-softmax-fusion",
    "no-bias-gelu-fusion", "no-bias-dropout-fusion", "no-gradient-accumulation-fusion", "exit-duration-in-mins",
    "exit-interval", "ckpt-format", "async-save", "no-load-optim", "no-load-rng", "finetune", "mock-data",
    "num-workers", "timing-log-level", "rampup-batch-size", "tensorboard-queue-size", "nproc_per_node",
    "nproc-per-node", "nnodes", "node_rank", "node-rank", "master_addr", "master-addr", "master_port", "master-port",
    "rdzv_id", "rdzv_backend", "rdzv_endpoint", "rdzv-id", "rdzv-backend", "rdzv-endpoint", "standalone",
    "qk-layernorm", "moe-aux-loss-coeff", "moe-router-load-balancing-type",
    "moe-grouped-gemm", "mcore-gpt", "moe-token-dispatcher-type", "manual-gc", "manual-gc-interval",
    "cross-entropy-loss-fusion", "config-path", "config-name")

# The model's shape, which --model replaces.
_SHAPE_FLAGS = ("num-layers", "hidden-size", "num-attention-heads", "kv-channels", "ffn-hidden-size",
                "num-query-groups", "nemo-query-groups", "group-query-attention", "max-position-embeddings",
                "position-embedding-type",
                "disable-bias-linear", "nemo-bias", "untie-embeddings-and-output-weights", "nemo-tied-embeddings",
                "swiglu", "nemo-activation", "num-experts", "moe-router-topk", "moe-ffn-hidden-size", "moe-layer-freq",
                "multi-latent-attention", "q-lora-rank", "kv-lora-rank", "qk-head-dim", "qk-pos-emb-head-dim",
                "v-head-dim", "vocab-size",
                "vocab-file", "tokenizer-type", "make-vocab-size-divisible-by")


def import_megatron(text: str, source: str, gpus: int, model: ModelSpec | None) -> ImportedJob:
    """The job of a Megatron-LM argument list or NeMo command line on `gpus` GPUs (module docstring); `model`,
    when given, replaces the shape the flags describe (the job's model is then left None)."""
    s = Settings(parse_arguments(text, source), source, text_values=True)
    notes: list[str] = []
    tp = s.integer("tensor-model-parallel-size", 1)
    pp = s.integer("pipeline-model-parallel-size", 1)
    spec = None if model is not None else _model(s, tp)
    layers = model.layers if model is not None else int(spec["layers"]) if spec else 1
    _check_launch(s, gpus)
    parallel: dict[str, Any] = {"tp": tp, "pp": pp, "cp": s.integer("context-parallel-size", 1),
                                "ep": s.integer("expert-model-parallel-size", 1)}
    etp = s.integer("expert-tensor-parallel-size", tp)
    if etp != tp:
        parallel["etp"] = etp
    if max(tp, pp, parallel["cp"]) > 1:
        parallel["placement"] = "tp-dp-pp"
        notes.append("ranks tp-dp-pp (Megatron-Core's order tp-cp-ep-dp-pp)")
    if s.boolean("sequence-parallel"):
        if tp > 1:
            parallel["sequence_parallel"] = True
        else:
            notes.append("--sequence-parallel with tensor-parallel size 1: off (Megatron turns it off)")
    if s.boolean("tp-comm-overlap") and tp > 1:
        parallel["tp_comm_overlap"] = True
    parallel.update(_interleaving(s, pp, layers))
    interleaved = parallel.get("pipeline_schedule") == "interleaved"
    if interleaved and not s.boolean("no-overlap-p2p-communication"):
        parallel["overlap_p2p"] = True
    elif pp > 1 and not interleaved:
        notes.append("pipeline sends wait for their transfer: Megatron-LM overlaps them only under the interleaved "
                     "schedule (arguments.py turns overlap_p2p_comm off without virtual stages)")
    nemo = any(key.startswith("nemo-") for key in s.data)
    training: dict[str, Any] = {"precision": _precision(s), "micro_batch": s.integer("micro-batch-size", 1),
                                "framework": "nemo" if nemo else "megatron-core"}
    if training["precision"] == "fp8":  # Megatron-Core's --fp8-recipe (transformer_config.py; default delayed)
        training["fp8_recipe"] = s.text("fp8-recipe", "delayed", get_args(Fp8Recipe))
    if not s.has("micro-batch-size"):
        notes.append("--micro-batch-size not given: 1")
    if s.has("global-batch-size"):
        training["global_batch"] = s.integer("global-batch-size", 1)
    if s.has("seq-length"):
        training["seq_len"] = s.integer("seq-length", 1)
    training.update(_checkpointing(s, pp * parallel.get("virtual_stages", 1), layers))
    training.update(_attention(s, notes))
    training["strategy"] = _strategy(s, training["precision"])
    training["strategy"].update(_optimizer_instances(s, gpus // (tp * pp * parallel["cp"])))
    training["parallel"] = parallel
    replaced = _SHAPE_FLAGS if model is not None else ()  # --model replaces them
    return ImportedJob(training=training, model=spec, notes=notes, warnings=s.warnings,
                       unknown=s.unknown((*_IRRELEVANT, *replaced)))


def _check_launch(s: Settings, gpus: int) -> None:
    """A warning when the launcher's nodes x processes per node (torchrun --nnodes / --nproc_per_node, NeMo
    trainer.num_nodes / trainer.devices), where both are plain numbers, are not the cluster's GPUs."""
    launch = {"nodes": ("nnodes", "nemo-nodes"), "per node": ("nproc_per_node", "nproc-per-node", "nemo-devices")}
    found = {what: next((str(s.value(k)) for k in keys if s.has(k)), "") for what, keys in launch.items()}
    if all(value.isdigit() for value in found.values()) and int(found["nodes"]) * int(found["per node"]) != gpus:
        s.warnings.append(f"launched on {found['nodes']} nodes x {found['per node']} GPUs; the cluster (--topology, "
                          f"--nodes) has {gpus} GPUs, which the scenario takes")


def _model(s: Settings, tp: int) -> dict[str, Any]:
    """ModelSpec fields from the shape flags; ConfigError naming the missing ones."""
    missing = [f"--{flag}" for flag in ("num-layers", "hidden-size", "num-attention-heads") if not s.has(flag)]
    if missing:
        raise ConfigError(f"{s.source}: {', '.join(missing)} not given: the model's shape needs them (or --model)")
    hidden, heads = s.integer("hidden-size", 1), s.integer("num-attention-heads", 1)
    swiglu = s.boolean("swiglu") or "glu" in s.text("nemo-activation", "gelu")  # NeMo: swiglu, fast-swiglu, geglu
    ffn = s.integer("ffn-hidden-size", int((4 * hidden * 2 / 3) / 64) * 64 if swiglu else 4 * hidden)
    seq = s.integer("seq-length", 2048)
    groups = s.integer("num-query-groups", s.integer("nemo-query-groups", 1))
    gqa = s.boolean("group-query-attention") or s.has("nemo-query-groups")  # NeMo: the key alone turns it on
    if s.has("num-query-groups") and not gqa:
        s.warnings.append("--num-query-groups without --group-query-attention: Megatron ignores it")
    positions = s.text("position-embedding-type", "learned_absolute", ("learned_absolute", "rope", "none"))
    spec: dict[str, Any] = {
        "name": Path(s.source).stem, "layers": s.integer("num-layers", 1), "hidden": hidden, "heads": heads,
        "kv_heads": groups if gqa else heads, "ffn_hidden": ffn, "gated_mlp": swiglu, "vocab": _vocab(s, tp),
        "max_seq_len": s.integer("max-position-embeddings", seq),
        "tied_embeddings": not s.boolean("untie-embeddings-and-output-weights")
        and s.boolean("nemo-tied-embeddings", True),
        "learned_positions": positions == "learned_absolute",
        "bias": not s.boolean("disable-bias-linear") and s.boolean("nemo-bias", True),
        "source": f"{s.source} (Megatron-LM arguments)"}
    if s.has("kv-channels") and str(s.value("kv-channels")).strip().lower() not in ("null", "none"):
        spec["head_dim"] = s.integer("kv-channels", 1)  # a head's width; Megatron's default hidden / heads
    if s.boolean("multi-latent-attention"):  # every head its own latent keys and values: no query groups
        if spec["bias"]:
            raise ConfigError(f"{s.source}: --multi-latent-attention without --disable-bias-linear: biased "
                              "latent-attention projections are not modelled")
        for key in ("kv_heads", "head_dim"):
            spec.pop(key, None)
        spec["mla"] = {"q_lora_rank": s.integer("q-lora-rank", 1) if s.has("q-lora-rank") else None,
                       "kv_lora_rank": s.integer("kv-lora-rank", 32), "qk_nope_head_dim": s.integer("qk-head-dim", 128),
                       "qk_rope_head_dim": s.integer("qk-pos-emb-head-dim", 64, least=0),
                       "v_head_dim": s.integer("v-head-dim", 128)}
    experts = s.integer("num-experts", 1)
    if experts > 1:
        spec.update(experts=experts, experts_per_token=s.integer("moe-router-topk", 2))
        if s.has("moe-ffn-hidden-size"):
            spec["expert_ffn_hidden"] = s.integer("moe-ffn-hidden-size", 1)
        if s.has("moe-layer-freq"):
            spec["dense_layers"] = _leading_dense_layers(s, spec["layers"])
    return spec


_LAYER_PATTERN = re.compile(r"[\d\[\]()+*,\s]+")  # what Megatron's _eval_pattern lets through


def _layer_pattern(node: ast.AST) -> list[int] | int:
    """A --moe-layer-freq list expression ("([0]*3+[1]*58)") evaluated without eval: lists of 0 / 1, whole
    numbers, + and *."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.List):
        items = [item for item in map(_layer_pattern, node.elts) if isinstance(item, int) and item in (0, 1)]
        if len(items) != len(node.elts):
            raise ValueError("list items other than 0 and 1")
        return items
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _layer_pattern(node.left), _layer_pattern(node.right)
        if isinstance(node.op, ast.Add) and isinstance(left, list) and isinstance(right, list):
            return left + right
        if isinstance(node.op, ast.Mult) and isinstance(left, list) != isinstance(right, list):
            return left * right  # type: ignore[operator]
    raise ValueError("not a list expression of 0 / 1 items, + and *")


def _leading_dense_layers(s: Settings, layers: int) -> int:
    """The dense blocks before the first MoE block that --moe-layer-freq gives (Megatron-LM's moe_freq_type: an
    integer N puts one MoE block in every N, a list expression marks each block 1 for MoE, 0 for dense); only
    leading dense blocks are modelled (ModelSpec.dense_layers), another pattern is a ConfigError saying so."""
    text = str(s.value("moe-layer-freq")).strip().strip("'\"")
    if text.isdigit():
        pattern: list[int] | int = [1] * layers if int(text) == 1 else int(text)
    elif _LAYER_PATTERN.fullmatch(text):
        try:
            pattern = _layer_pattern(ast.parse(text, mode="eval").body)
        except (SyntaxError, ValueError) as exc:
            raise s.error("moe-layer-freq", "an integer or a list expression such as ([0]*3+[1]*58)", text) from exc
    else:
        raise s.error("moe-layer-freq", "an integer or a list expression such as ([0]*3+[1]*58)", text)
    if not isinstance(pattern, list):
        raise ConfigError(f"{s.source}: --moe-layer-freq {text}: one MoE block in every {pattern} interleaves dense "
                          "blocks, which is not modelled (only dense blocks before the first MoE block)")
    if len(pattern) != layers:
        raise ConfigError(f"{s.source}: --moe-layer-freq {text}: {len(pattern)} blocks where --num-layers is {layers}")
    dense = pattern.index(1) if 1 in pattern else layers
    if 0 in pattern[dense:]:
        raise ConfigError(f"{s.source}: --moe-layer-freq {text}: dense blocks after the first MoE block are not "
                          "modelled (only dense blocks before it)")
    return dense


def _vocab(s: Settings, tp: int) -> int:
    """--vocab-size, or GPT-2's with its vocabulary file or tokenizer, padded as Megatron pads it."""
    tokenizer = s.text("tokenizer-type", "")
    if s.has("vocab-size"):
        vocab = s.integer("vocab-size", 1)
    elif tokenizer == "GPT2BPETokenizer" or (s.has("vocab-file") and not tokenizer):
        vocab = GPT2_VOCAB
    else:
        raise ConfigError(f"{s.source}: the vocabulary size is not in the arguments (tokenizer "
                          f"{tokenizer or 'not given'}): add --vocab-size N, or give --model")
    multiple = s.integer("make-vocab-size-divisible-by", VOCAB_MULTIPLE) * tp
    return -(-vocab // multiple) * multiple


def _precision(s: Settings) -> str:
    """fp8 with --fp8-format, else --bf16 / --fp16 / NeMo's trainer.precision, else fp32."""
    if s.has("fp8-format"):
        return "fp8"
    if s.has("nemo-precision"):
        text = str(s.value("nemo-precision")).strip().lower()
        if text not in _PRECISIONS:
            raise s.error("trainer.precision", f"one of {', '.join(_PRECISIONS)}", text)
        return _PRECISIONS[text]
    if s.boolean("bf16") and s.boolean("fp16"):
        raise ConfigError(f"{s.source}: --bf16 and --fp16: Megatron takes one of them, not both")
    return "bf16" if s.boolean("bf16") else "fp16" if s.boolean("fp16") else "fp32"


def _interleaving(s: Settings, pp: int, layers: int) -> dict[str, Any]:
    """The interleaved schedule's stages per rank, from either flag."""
    if s.has("num-layers-per-virtual-pipeline-stage"):
        per_stage = s.integer("num-layers-per-virtual-pipeline-stage", 1)
        if layers % (pp * per_stage):
            raise ConfigError(f"{s.source}: --num-layers-per-virtual-pipeline-stage {per_stage}: {layers} layers do "
                              f"not split into {pp} stages of chunks of {per_stage}")
        stages = layers // (pp * per_stage)
    else:
        stages = s.integer("num-virtual-stages-per-pipeline-rank", 1)
    return {"pipeline_schedule": "interleaved", "virtual_stages": stages} if stages > 1 and pp > 1 else {}


def _checkpointing(s: Settings, chunks: int, layers: int) -> dict[str, Any]:
    """The recomputation flags as activation_checkpointing (and recompute_layers)."""
    granularity = s.text("recompute-granularity", "", ("full", "selective", "null", ""))
    if s.boolean("checkpoint-activations"):
        granularity = "full"
    elif s.boolean("recompute-activations") and granularity in ("", "null"):
        granularity = "selective"
    method = s.text("recompute-method", "uniform", ("uniform", "block", "null"))
    checkpointing = {"activation_checkpointing": granularity if granularity in ("full", "selective") else "none"}
    per_chunk = s.integer("recompute-num-layers", layers, least=0)
    if granularity == "full" and method == "block" and per_chunk * chunks < layers:
        return {**checkpointing, "recompute_layers": per_chunk * chunks}  # the first N of each model chunk
    return checkpointing


def _attention(s: Settings, notes: list[str]) -> dict[str, Any]:
    """The attention kernel of the transformer implementation (and of --attention-backend, where given)."""
    backend = s.text("attention-backend", "auto", ("auto", "flash", "fused", "unfused", "local"))
    if backend == "flash":
        notes.append("--attention-backend flash: FlashAttention-2")
        return {}
    if backend == "unfused":
        return {"flash_attention": False}
    if s.text("transformer-impl", "transformer_engine", ("transformer_engine", "local")) == "local":
        if s.boolean("use-flash-attn"):
            return {}
        notes.append("--transformer-impl local without --use-flash-attn: attention scores through HBM")
        return {"flash_attention": False}
    notes.append("Transformer Engine attention: cuDNN's fused kernel")
    return {"attention_kernel": "cudnn"}


def _optimizer_instances(s: Settings, dp: int) -> dict[str, Any]:
    """--num-distributed-optimizer-instances k (Megatron-Core, distributed optimizer): the optimizer states shard
    within each of k groups of dp / k data-parallel ranks (ZeRO-1's shard_group_gpus)."""
    instances = s.integer("num-distributed-optimizer-instances", 1)
    if instances == 1:
        return {}
    if not s.boolean("use-distributed-optimizer"):
        raise ConfigError(f"{s.source}: --num-distributed-optimizer-instances {instances} needs "
                          "--use-distributed-optimizer (as in Megatron)")
    if dp % instances:
        raise ConfigError(f"{s.source}: --num-distributed-optimizer-instances {instances} must divide the "
                          f"{dp} data-parallel ranks")
    return {"shard_group_gpus": dp // instances}


def _strategy(s: Settings, precision: str) -> dict[str, Any]:
    """ddp or zero1 (the distributed optimizer) with Megatron's overlap flags."""
    distributed = s.boolean("use-distributed-optimizer") or s.text("nemo-optimizer", "") == "distributed_fused_adam"
    overlap_gather = s.boolean("overlap-param-gather")
    if overlap_gather and not distributed:
        raise ConfigError(f"{s.source}: --overlap-param-gather needs --use-distributed-optimizer (as in Megatron)")
    # megatron/training/arguments.py: a bf16 job accumulates and reduces gradients in fp32 unless
    # --grad-reduce-in-bf16; 16-bit gradients are copied to fp32 main gradients for the step
    fp32_reduce = precision == "fp32" or s.boolean("accumulate-allreduce-grads-in-fp32") or (
        precision == "bf16" and not s.boolean("grad-reduce-in-bf16"))
    return {"kind": "zero1" if distributed else "ddp", "overlap_grad_reduce": s.boolean("overlap-grad-reduce"),
            "overlap_param_gather": overlap_gather, "grad_reduce_bytes": 4 if fp32_reduce else 2,
            "fp32_grad_copy": precision != "fp32" and not fp32_reduce}
