"""Predicted vs published training throughput: the metric each case is judged on, the error per case,
two baselines the simulator must beat, and the summaries per source and overall.

- Metric: per case, the first published one of model TFLOP/s per GPU, MFU %, tokens/s/GPU (in that
  order, by the names of METRIC_KEYS), else the first other name its words read as one of those, as the
  cluster's tokens/s or samples/s, or as the step time (_METRIC_WORDS: "tokens_per_second_per_gpu",
  "step_time_ms"; never a total FLOP rate, a hardware-FLOP utilisation or a speedup). Where the source's
  TFLOP/s count activation recomputation (hardware FLOPs), the prediction is converted to hardware FLOPs:
  full recomputation runs the forward twice, 8 instead of 6 FLOPs per parameter and token, so x 4/3 (the
  factor of Megatron's formula: checkpoint factor 4 instead of 3); with selective recomputation the
  recomputed share is unknown and the case is skipped. Sources
  counting recomputation: the case's note says so (e.g. Megatron-DeepSpeed's "4*2 coefficient");
  Narayanan et al. 2021 (SC21, megatron-sc21-*), whose eq. 3, 96 B s l h^2 (1 + s/6h + V/16lh), is
  4 x 24 B s l h^2: it counts the recomputed forward of its full-recompute runs; the Megatron-LM
  README's 2020 scaling tables (megatron-2020-*), whose figures are that equation; and Megatron-DeepSpeed
  (BLOOM), whose throughput log is that equation with checkpoint_activations_factor 4 when recomputing.
  Where the source publishes its tokens/s per GPU beside the TFLOP/s or MFU it leads with, the prediction
  is put in the source's units through the source's own FLOPs per token (its TFLOP/s over its tokens/s):
  predicted = published x predicted tokens/s / published tokens/s; with its step time beside them, predicted =
  published x published step time / predicted step time. Otherwise a source whose FLOP counter counts half of
  causal attention's score FLOPs is compared in that count (counts_causal_half: Megatron-LM's counter from
  commit 8873b55, 2025-03-06, released in Megatron-Core 0.12; a case's training.flops_counting): the
  Megatron-MoE-ModelZoo's Qwen3-235B rows that print step times give 1.478e11 FLOPs a token, Megatron's halved
  count (1.480e11), not the full one (1.670e11). A FLOP-counting convention then cannot
  read as speed: NeMo's formulas halve causal attention's score FLOPs from August 2025
  (nemo/utils/flops_formulas.py, "Discount FLOPs in dot-product att", NVIDIA/NeMo #14424), and NeMo's
  25.02 Mixtral 8x22B row at 64K tokens and 25.07 Llama 4 Scout row count 27% and 10% fewer FLOPs a
  token than the model's own count, which read as 36% and 19% too fast in TFLOP/s where the tokens/s are
  0.4% and 7% off.
  Error = |predicted - published| / published.
- Lookup table: a case's metric predicted as the median of the same metric over the OTHER expressed
  cases with the same GPU, strategy family (fsdp / zero / ddp) and parallelism class (with or without
  tensor/pipeline parallelism); no such case, no baseline.
- Change figure: for pairs of expressed cases identical but for GPU count or inter-node bandwidth, the
  predicted ratio of the metric vs the published one, |pred ratio / pub ratio - 1|; the lookup table
  predicts every ratio to be 1.
- Coverage: expressed cases / in-scope cases (a data-parallel family understood), overall and
  separately for the cases with tensor, pipeline or context parallelism (model_parallel) and those
  without.
- Memory: where a case publishes the memory a GPU used (MEMORY_KEYS), the predicted memory per GPU (the
  stage that needs the most, with the reserve) against it, signed and absolute. Sources report different
  things (torchtitan: PyTorch's peak reserved memory; BigScience: the peak its logs print), so this is a
  check of the memory model's scale, not of the allocator.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from simulator.core.errors import ClusterSimError, ConfigError
from simulator.training.prediction import StepPrediction
from simulator.validation.training_cases import Family, MappedCase, TrainingCase, map_case, published_number
from simulator.validation.training_parallel import framework_of
from topologies.spec import TopologySpec
from workloads.model import transformer
from workloads.spec import ModelSpec, TrainingSpec

Predictor = Callable[[TopologySpec, TrainingSpec, ModelSpec], StepPrediction]
MetricKind = Literal["tokens_per_s_per_gpu", "tflops_per_gpu", "mfu_pct", "tokens_per_s", "samples_per_s",
                     "step_time_s"]

# Published metric names, in order of preference (the first one a case has is used).
METRIC_KEYS: tuple[tuple[str, MetricKind], ...] = (
    # size-normalised metrics first, so that the lookup-table baseline (the median of the same
    # metric over similar cases) compares like with like across model sizes
    ("model_TFLOP_per_GPU", "tflops_per_gpu"),
    ("model_TFLOP_per_sec_per_GPU", "tflops_per_gpu"),
    ("per_gpu_teraFLOP/s", "tflops_per_gpu"),
    ("achieved_teraFLOP/s_per_GPU", "tflops_per_gpu"),
    ("teraFLOPs_per_GPU", "tflops_per_gpu"),
    ("TFLOPs_per_GPU", "tflops_per_gpu"),
    ("TFlops_per_GPU", "tflops_per_gpu"),
    ("TFLOPS_per_GPU_with_CP", "tflops_per_gpu"),  # the run whose layout the case lists
    ("MFU_%", "mfu_pct"),
    ("MFU", "mfu_pct"),
    ("percent_of_theoretical_peak", "mfu_pct"),
    ("throughput_tokens_per_s_per_GPU", "tokens_per_s_per_gpu"),
    ("tokens_per_sec_per_GPU", "tokens_per_s_per_gpu"),
    ("tokens_per_s_per_GPU", "tokens_per_s_per_gpu"),
    # torchtitan's async-TP benchmark (June 2025) heads its column "tokens/sec" without "per GPU"; its
    # magnitudes are those of the per-GPU figures of its Dec 2024 tables (the cases' note)
    ("async_TP_tokens_per_sec", "tokens_per_s_per_gpu"),
)
# Metric names outside METRIC_KEYS, recognised by their words (the key lower-cased, split at every run of other
# characters), in this order; a key naming a total over the cluster, a FLOP count other than the model's, or a
# comparison is never read as a throughput. Each: (kind, test of the words, multiplier to the kind's unit).
_NOT_A_THROUGHPUT = re.compile(
    r"(^|_)(aggregate|cluster|global|hfu|hardware|without|speedup|scaling|ratio|est|memory)(_|$)")
_PER_S, _PER_GPU = {"s", "sec", "second", "seconds"}, {"gpu", "device", "accelerator"}


def _count_per_s(words: list[str], noun: str) -> bool:
    """`words` name the cluster's rate of `noun`: [throughput_]<noun>[s][_per]_<s|sec|second[s]>."""
    if words[-1:] and words[-1] in _PER_S and words[-2:-1] == ["per"]:
        words = words[:-2] + words[-1:]
    return words[-2:-1] in ([noun], [noun + "s"]) and words[-1] in _PER_S and words[:-2] in ([], ["throughput"])


def _time_per_step(words: list[str]) -> str | None:
    """The unit ('ms' or 's') of a key naming the time of one step: [elapsed_]time_per_<iteration|step>[_<unit>];
    None otherwise."""
    unit = words[-1] if words[-1:] and words[-1] in ("ms", "s", "sec", "seconds") else None
    core = words[:-1] if unit else words
    if core[:1] == ["elapsed"]:
        core = core[1:]
    if core in (["time", "per", "iteration"], ["time", "per", "step"], ["time", "per", "iter"]):
        return "ms" if unit == "ms" else "s"
    return None


_METRIC_WORDS: tuple[tuple[MetricKind, Callable[[list[str]], bool], float], ...] = (
    ("tokens_per_s_per_gpu", lambda w: bool({"token", "tokens", "tok"} & set(w) and _PER_S & set(w)
                                            and _PER_GPU & set(w)), 1.0),
    # torchtitan's tables head the column "TPS/GPU" (tokens per second per GPU; "WPS", words, before 2025)
    ("tokens_per_s_per_gpu", lambda w: w[:1] in (["tps"], ["wps"]) and w[-1] in _PER_GPU and w[1:-1] in ([], ["per"]),
     1.0),
    # "TGS": tokens per GPU per second, as InternEvo's and other Chinese LLM reports head the column
    ("tokens_per_s_per_gpu", lambda w: w == ["tgs"], 1.0),
    ("tflops_per_gpu", lambda w: any(x.startswith(("tflop", "teraflop")) for x in w) and bool(_PER_GPU & set(w)), 1.0),
    ("mfu_pct", lambda w: w in (["mfu"], ["mfu", "pct"], ["mfu", "percent"], ["model", "flops", "utilization"],
                                ["model", "flops", "utilisation"]), 1.0),
    ("tokens_per_s", lambda w: _count_per_s(w, "token") or _count_per_s(w, "tok"), 1.0),
    ("samples_per_s", lambda w: any(_count_per_s(w, noun) for noun in ("sample", "seq", "sequence")), 1.0),
    ("step_time_s", lambda w: w in (["iteration", "time", "ms"], ["step", "time", "ms"], ["ms", "per", "iteration"],
                                    ["ms", "per", "step"]), 1e-3),
    ("step_time_s", lambda w: w[:2] in (["iteration", "time"], ["step", "time"]) and w[2:] in ([], ["s"], ["sec"])
     or (len(w) == 3 and w[0] in _PER_S and w[1] == "per" and w[2] in ("iteration", "iter", "step")), 1.0),
    # "time per iteration (ms)", "elapsed_time_per_iteration_s", "time_per_step_s"
    ("step_time_s", lambda w: _time_per_step(w) == "ms", 1e-3),
    ("step_time_s", lambda w: _time_per_step(w) == "s", 1.0),
)
_HARDWARE_FLOPS_NOTE = re.compile(
    r"hardware TFLOP|4\s*\*\s*2 coefficient|incl(?:\.|uding) (?:activation )?recomput|count(?:s|ing) recomputation",
    re.IGNORECASE)
_RECOMPUTE_FACTOR = {"none": 1.0, "full": 4.0 / 3.0}  # hardware / model FLOPs (see module docstring)
# SC21 eq. 3 counts the recomputed forward; so do the Megatron-LM README's Sep-2020 tables (their 8B
# TP 8 row: 96 B s l h^2 (1 + s/6h + V/16lh) / 1.407 s / 8 GPUs = 52.2 TFLOP/s, as published)
_HARDWARE_FLOPS_IDS = ("megatron-sc21-", "megatron-2020-")
_HARDWARE_FLOPS_FRAMEWORKS = ("megatron-deepspeed",)  # its log: SC21 eq. 3, checkpoint_activations_factor 4
# Megatron-LM's num_floating_point_operations counts half of causal attention's score FLOPs from its commit 8873b55
# (2025-03-06, ADLR/megatron-lm!2789: "Only half of the attention matrix is non-zero"), first released in
# Megatron-Core 0.12; a Megatron-Core version written in the case's framework text
_MCORE_VERSION = re.compile(r"(?:mcore|megatron[- ]?core|core_[rv])\W{0,3}v?(\d+)\.(\d+)", re.IGNORECASE)
_MCORE_CAUSAL_HALF = (0, 12)
# Training fields the mapping reads; the others (torch_compile, fsdp_mixed_precision_mode, ...) must be
# equal for two cases to form a change pair.
_MAPPED_TRAINING_KEYS = frozenset({
    "strategy", "tp", "pp", "cp", "ep", "dp", "dp_derived", "fsdp", "model_parallel_size_tp_x_pp", "micro_batch",
    "global_batch", "global_batch_tokens", "grad_accum", "precision", "activation_checkpointing",
    "fsdp_sharding_strategy", "fsdp_mixed_precision_mode", "zero_stage", "zeropp", "pp_schedule", "async_tp",
    "comm_overlap", "tp_comm_overlap", "quantization", "recompute_layers", "recompute_num_layers"})


# published memory per GPU: the key, and its unit in bytes. torchtitan's `memory_GiB` is its logged peak
# reserved memory (torch.cuda.max_memory_reserved, GiB); BigScience's chronicles write "47GB", PyTorch's
# figures in units of 2^30 as Megatron-DeepSpeed's logs print them. A value without a number ("GB") is not stated.
MEMORY_KEYS = (("memory_GiB", 2**30), ("max_memory", 2**30))


def published_memory_bytes(case: TrainingCase) -> float | None:
    """The memory per GPU the case's source published, in bytes; None when it states none."""
    for key, unit in MEMORY_KEYS:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:GiB|GB)?\s*", str(case.metrics.get(key, "")))
        if match:
            return float(match.group(1)) * unit
    return None


@dataclass(frozen=True)
class CaseMetric:
    """The published number a case is judged on: its key in `metrics`, its kind, its value in the
    source's unit, and whether the source counts recomputation in its FLOPs."""

    key: str
    kind: MetricKind
    published: float
    hardware_flops: bool = False


def counts_recomputation(case: TrainingCase) -> bool:
    """The source's FLOP figures count activation recomputation (see the module docstring)."""
    framework = str(case.training.get("framework") or "").lower()
    return bool(_HARDWARE_FLOPS_NOTE.search(case.note)) or case.id.startswith(_HARDWARE_FLOPS_IDS) \
        or any(name in framework for name in _HARDWARE_FLOPS_FRAMEWORKS)


def choose_metric(case: TrainingCase) -> CaseMetric | None:
    """The first published metric the case has as a number ('49%' reads 49): by the names of METRIC_KEYS, else
    by the words of its own name (_METRIC_WORDS). That number
    NaN, infinite, 0 or negative is a ConfigError naming the case and the key: passing over it to the next
    metric would judge the case on a figure other than the one its source leads with."""
    for key, kind, value in _named_metrics(case):
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(f"case {case.id}: metrics.{key}: {case.metrics[key]!r} is no published throughput "
                              "(expected a positive number); correct it or remove the key")
        return CaseMetric(key, kind, value, kind in ("tflops_per_gpu", "mfu_pct") and counts_recomputation(case))
    return None


# a figure followed by its unit: '1914 tokens/s', '8.56 s', '3,500 ms per step'
_NUMBER_WITH_UNIT = re.compile(r"\s*[~≈]?\s*((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)\s*([a-z][a-z0-9/ ._-]*)\s*",
                               re.IGNORECASE)


def _number_and_unit(raw: Any) -> tuple[float | None, str]:
    """A published figure as a number and the unit written after it ('1914 tokens/s' -> 1914, 'tokens/s'); a bare
    figure (published_number) has no unit ('')."""
    value = published_number(raw)
    if value is not None or not isinstance(raw, str):
        return value, ""
    found = _NUMBER_WITH_UNIT.fullmatch(raw)
    return (float(found.group(1).replace(",", "")), found.group(2)) if found else (None, "")


def _named_metrics(case: TrainingCase) -> list[tuple[str, MetricKind, float]]:
    """(key, kind, value in the kind's unit) of every throughput the case publishes as a number: the names of
    METRIC_KEYS in their order, then the other keys, in the case's order, that _METRIC_WORDS recognises by the
    words of the key and of a unit written after the figure ('throughput_per_gpu: 1914 tokens/s')."""
    named: list[tuple[str, MetricKind, float]] = []
    for key, kind in METRIC_KEYS:
        value, _ = _number_and_unit(case.metrics.get(key))
        if value is not None:
            named.append((key, kind, value))
    known = {key for key, _ in METRIC_KEYS}
    for key, raw in case.metrics.items():
        value, unit = _number_and_unit(raw)
        words = re.sub(r"[^a-z0-9]+", "_", f"{key} {unit}".lower()).strip("_")
        if key in known or value is None or _NOT_A_THROUGHPUT.search(words):
            continue
        match = next(((kind, scale) for kind, reads, scale in _METRIC_WORDS if reads(words.split("_"))), None)
        if match is None and words in ("tps", "wps") and framework_of(case.training) == "torchtitan":
            # torchtitan logs tps (wps before 2025) per device: the rank's tokens over the time and the
            # non-data-parallel degree (torchtitan train.py, ntokens_since_last_log / (time_delta *
            # non_data_parallel_size)); elsewhere a bare "TPS" may be the cluster's, and is not read
            match = ("tokens_per_s_per_gpu", 1.0)
        if match:
            named.append((key, match[0], value * match[1]))
    # MFU written as a fraction (0.45): no training run reaches 1% MFU, so a value up to 1 is a fraction
    return [(key, kind, value * 100.0 if kind == "mfu_pct" and 0.0 < value <= 1.0 else value)
            for key, kind, value in named]


def _metric_problem(metric: CaseMetric | None, case: TrainingCase, training: TrainingSpec | None) -> str | None:
    if metric is None:
        return (f"no published throughput metric (tokens/s/GPU, TFLOP/s/GPU, MFU %, samples/s or step time) in "
                f"{sorted(case.metrics)}")
    if metric.hardware_flops and training is not None \
            and training.activation_checkpointing not in _RECOMPUTE_FACTOR:
        return (f"{metric.key} counts recomputation (hardware FLOPs); with {training.activation_checkpointing} "
                "recomputation the recomputed share is not known")
    return None


def _recompute_factor(training: TrainingSpec) -> float:
    """Hardware over model FLOPs of a job (_RECOMPUTE_FACTOR), the recomputed forward counted on the layers
    that recompute (TrainingSpec.recompute_layers of the model's)."""
    full = _RECOMPUTE_FACTOR[training.activation_checkpointing]
    if training.recompute_layers is None or not isinstance(training.model, ModelSpec):
        return full
    return 1.0 + (full - 1.0) * min(1.0, training.recompute_layers / training.model.layers)


def counts_causal_half(case: TrainingCase) -> bool:
    """The source's FLOP counter counts half of causal attention's score FLOPs: the case says so
    (training.flops_counting: causal), or it ran Megatron-Core 0.12 or later (_MCORE_CAUSAL_HALF), whose
    counter does; MaxText's does from 2025-07-27 (its PR #1988), NeMo's from August 2025 (#14424), which a
    case states as flops_counting."""
    stated = case.training.get("flops_counting")
    if stated is not None:
        return str(stated).strip().lower() == "causal"
    if framework_of(case.training) not in ("megatron-core", "megatron-lm"):
        return False
    version = _MCORE_VERSION.search(str(case.training.get("framework") or ""))
    return version is not None and (int(version.group(1)), int(version.group(2))) >= _MCORE_CAUSAL_HALF


def counted_share(case: MappedCase) -> float:
    """The source's FLOPs per token over the model's (model_flops_per_token): 1, or less where the source counts
    half of causal attention's score FLOPs (counts_causal_half)."""
    if case.model is None or case.training is None or not counts_causal_half(case.case):
        return 1.0
    model = transformer(case.model, case.training.mtp_layers)  # the job's blocks, as the prediction counts them
    seq_len = case.training.seq_len or case.model.max_seq_len
    attended = min(seq_len, case.training.packed_sample_len or seq_len)
    flops = model.model_flops_per_token(seq_len, packed_sample_len=case.training.packed_sample_len)
    scores = 3.0 * sum(n * block.attention_forward_flops(1, attended) for block, n in model.blocks)
    return (flops - scores / 2.0) / flops


def published_step_time_s(case: TrainingCase) -> float | None:
    """The source's step time, where it publishes one beside its throughput."""
    for _, kind, value in _named_metrics(case):
        if kind == "step_time_s" and math.isfinite(value) and value > 0:
            return value
    return None


def published_tokens_per_s(case: TrainingCase) -> float | None:
    """The source's tokens/s per GPU, where it publishes one (the first tokens/s-per-GPU name it has)."""
    for _, kind, value in _named_metrics(case):
        if kind == "tokens_per_s_per_gpu" and math.isfinite(value) and value > 0:
            return value
    return None


def predicted_metric(case: MappedCase, prediction: StepPrediction) -> float:
    """The prediction in the unit of the case's published metric (see the module docstring).

    tokens/s/GPU: tokens_per_s_per_gpu; the cluster's tokens/s, samples/s and step time: the step's. TFLOP/s
    per GPU or MFU % with the source's tokens/s beside it: the published figure scaled by predicted /
    published tokens/s (the source's FLOPs per token); with its step time beside it, by published / predicted
    step time. Otherwise TFLOP/s per GPU: tflops_per_gpu (model FLOPs), x 4/3 where the source counts full
    recomputation, x counted_share where it counts half of causal attention; MFU %: 100 x mfu, likewise (then
    it is the source's HFU).
    """
    metric = choose_metric(case.case)
    problem = _metric_problem(metric, case.case, case.training)
    if metric is None or problem or case.training is None:
        raise ConfigError(f"case {case.case.id}: {problem or 'not expressed'}")
    factor = _recompute_factor(case.training) if metric.hardware_flops else 1.0
    if metric.kind == "tokens_per_s_per_gpu":
        return prediction.tokens_per_s_per_gpu
    if metric.kind == "tokens_per_s":
        return prediction.tokens_per_s_per_gpu * prediction.n_gpus
    if metric.kind == "samples_per_s":
        seq_len = case.training.seq_len or (case.model.max_seq_len if case.model else 0)
        return prediction.tokens_per_step / seq_len / prediction.step_time_s
    if metric.kind == "step_time_s":
        return prediction.step_time_s
    tokens = published_tokens_per_s(case.case)
    if tokens is not None:
        return metric.published * prediction.tokens_per_s_per_gpu / tokens
    step_s = published_step_time_s(case.case)
    if step_s is not None:
        return metric.published * step_s / prediction.step_time_s
    factor *= counted_share(case)
    if metric.kind == "tflops_per_gpu":
        return prediction.tflops_per_gpu * factor
    return 100.0 * prediction.mfu * factor


def _pct_error(predicted: float | None, published: float | None) -> float | None:
    if predicted is None or not published:
        return None
    return abs(predicted - published) / published * 100.0


@dataclass(frozen=True)
class CaseResult:
    """One case: what was published, what was predicted (or why not), which defaults filled it in."""

    id: str
    source: str
    family: Family | None
    in_scope: bool
    gpu: str | None
    metric: CaseMetric | None
    predicted: float | None
    skipped: str | None
    defaults: tuple[str, ...]
    fits_in_memory: bool | None = None
    lookup_predicted: float | None = None
    model_parallel: bool = False
    attention_kernel: str | None = None  # the fused attention kernel it ran (TrainingSpec.attention_kernel)
    memory_published_bytes: float | None = None  # the source's memory per GPU (published_memory_bytes)
    memory_predicted_bytes: float | None = None

    @property
    def memory_pct_error(self) -> float | None:
        """Signed: (predicted - published) / published, in %."""
        if self.memory_published_bytes is None or self.memory_predicted_bytes is None:
            return None
        return (self.memory_predicted_bytes - self.memory_published_bytes) / self.memory_published_bytes * 100.0

    @property
    def published(self) -> float | None:
        return self.metric.published if self.metric else None

    @property
    def abs_pct_error(self) -> float | None:
        return _pct_error(self.predicted, self.published)

    @property
    def lookup_abs_pct_error(self) -> float | None:
        return _pct_error(self.lookup_predicted, self.published)


def _predict(mapped: MappedCase, predictor: Predictor) -> CaseResult:
    case = mapped.case
    try:
        metric = choose_metric(case)
    except ConfigError as exc:  # a published figure that is no throughput: that case is skipped saying so
        return CaseResult(case.id, case.source, mapped.family, mapped.in_scope, mapped.gpu, None, None,
                          mapped.skipped or str(exc), mapped.defaults, model_parallel=mapped.model_parallel)
    result = CaseResult(case.id, case.source, mapped.family, mapped.in_scope, mapped.gpu, metric, None,
                        mapped.skipped, mapped.defaults, model_parallel=mapped.model_parallel)
    skipped = mapped.skipped or _metric_problem(metric, case, mapped.training)
    if skipped or mapped.topology is None or mapped.training is None or mapped.model is None:
        return replace(result, skipped=skipped or "not expressed")
    try:
        prediction = predictor(mapped.topology, mapped.training, mapped.model)
    except ClusterSimError as exc:
        return replace(result, skipped=f"predictor: {exc}")
    return replace(result, predicted=predicted_metric(mapped, prediction), fits_in_memory=prediction.fits_in_memory,
                   attention_kernel=mapped.training.attention_kernel,
                   memory_published_bytes=published_memory_bytes(case),
                   memory_predicted_bytes=float(prediction.memory_per_gpu_bytes))


def lookup_table_predictions(entries: Sequence[tuple[Hashable, float] | None]) -> list[float | None]:
    """For each (key, value) entry, the median value of the OTHER entries with the same key (None where
    there is none, or for a None entry)."""
    out: list[float | None] = []
    for i, entry in enumerate(entries):
        others = [e[1] for j, e in enumerate(entries) if e is not None and entry is not None and j != i
                  and e[0] == entry[0]]
        out.append(float(np.median(others)) if others else None)
    return out


def _lookup_key(r: CaseResult) -> tuple[Hashable, float] | None:
    if r.predicted is None or r.metric is None:
        return None
    return (r.gpu, r.family, r.model_parallel, r.metric.kind, r.metric.hardware_flops), r.metric.published


@dataclass(frozen=True)
class ChangePair:
    """Two cases identical but for GPU count or inter-node bandwidth; ratios are second / first."""

    first: str
    second: str
    change: str
    published_ratio: float
    predicted_ratio: float

    @property
    def abs_pct_error(self) -> float:
        return abs(self.predicted_ratio / self.published_ratio - 1.0) * 100.0

    @property
    def lookup_abs_pct_error(self) -> float:
        return abs(1.0 / self.published_ratio - 1.0) * 100.0


def _scale(topo: TopologySpec) -> tuple[int, float | None]:
    """(GPUs, inter-node Gb/s per node; None on one node, where the network carries nothing)."""
    net = topo.inter_node
    bandwidth = net.nics_per_node * net.nic_gbps if net is not None and topo.nodes > 1 else None
    return topo.gpus_per_node * topo.nodes, bandwidth


def _pair_key(case: TrainingCase, topo: TopologySpec, job: TrainingSpec, model: ModelSpec) -> str:
    """Everything that must be equal for two cases to form a change pair."""
    n_dp = topo.gpus_per_node * topo.nodes // (job.parallel.tp * job.parallel.pp)
    accum = job.global_batch // (job.micro_batch * n_dp) if job.global_batch else job.grad_accum or 1
    extras = {k: v for k, v in case.training.items() if k not in _MAPPED_TRAINING_KEYS}
    try:
        metric = choose_metric(case)
    except ConfigError:  # no throughput to pair on: _predict skips the case saying why
        metric = None
    return json.dumps([
        case.source, metric.key if metric else None, model.model_dump(exclude={"source"}),
        job.model_dump(exclude={"model", "global_batch", "grad_accum"}), accum, extras, topo.gpu,
        topo.intra_node, topo.inter_node.transport if topo.inter_node else None,
    ], sort_keys=True, default=str)


def find_change_pairs(cases: Sequence[MappedCase]) -> list[tuple[int, int, str]]:
    """(i, j, change) for expressed cases i, j (i the smaller) that differ only in GPU count or
    inter-node bandwidth: same source, model, GPU, seq_len, micro-batch, precision, checkpointing, strategy."""
    groups: dict[str, list[tuple[tuple[int, float], int, tuple[int, float | None]]]] = {}
    for i, m in enumerate(cases):
        if m.skipped is None and m.topology is not None and m.training is not None and m.model is not None:
            n_gpus, bandwidth = _scale(m.topology)
            key = _pair_key(m.case, m.topology, m.training, m.model)
            groups.setdefault(key, []).append(((n_gpus, bandwidth or 0.0), i, (n_gpus, bandwidth)))
    pairs = []
    for members in groups.values():
        ordered = sorted(members)
        for a, (_, i, (n_i, bw_i)) in enumerate(ordered):
            for _, j, (n_j, bw_j) in ordered[a + 1:]:
                changes = [f"GPUs {n_i} -> {n_j}"] if n_i != n_j else []
                if bw_i is not None and bw_j is not None and bw_i != bw_j:
                    changes.append(f"inter-node {bw_i:g} -> {bw_j:g} Gb/s per node")
                if changes:
                    pairs.append((i, j, ", ".join(changes)))
    return pairs


def _median(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.median(kept)) if kept else None


@dataclass(frozen=True)
class Summary:
    """The figures of one source (or of all: source 'ALL'; of a parallelism class: 'ALL tp/pp', 'ALL dp-only')."""

    source: str
    cases: int
    in_scope: int
    expressed: int
    median_abs_pct_error: float | None
    lookup_cases: int
    lookup_median_abs_pct_error: float | None
    simulator_median_on_lookup_cases: float | None
    pairs: int
    change_median_abs_pct_error: float | None
    change_lookup_median_abs_pct_error: float | None

    @property
    def coverage(self) -> float | None:
        return self.expressed / self.in_scope if self.in_scope else None


@dataclass(frozen=True)
class TrainingReport:
    cases: tuple[CaseResult, ...]
    pairs: tuple[ChangePair, ...]

    @property
    def sources(self) -> list[str]:
        return sorted({r.source for r in self.cases})

    def summary(self, source: str | None = None, model_parallel: bool | None = None) -> Summary:
        """Figures over the cases of `source` (all cases when None); with `model_parallel`, only the cases
        with (True) or without (False) tensor/pipeline parallelism."""
        rows = [r for r in self.cases if (source is None or r.source == source)
                and (model_parallel is None or r.model_parallel == model_parallel)]
        label = (source or "ALL") + ("" if model_parallel is None else " tp/pp" if model_parallel else " dp-only")
        ids = {r.id for r in rows}
        expressed = [r for r in rows if r.predicted is not None]
        with_lookup = [r for r in expressed if r.lookup_predicted is not None]
        pairs = [p for p in self.pairs if p.first in ids]
        return Summary(
            label, len(rows), sum(r.in_scope for r in rows), len(expressed),
            _median([r.abs_pct_error for r in expressed]), len(with_lookup),
            _median([r.lookup_abs_pct_error for r in with_lookup]), _median([r.abs_pct_error for r in with_lookup]),
            len(pairs), _median([p.abs_pct_error for p in pairs]), _median([p.lookup_abs_pct_error for p in pairs]))


def evaluate(cases: Sequence[TrainingCase], predictor: Predictor) -> TrainingReport:
    """Predict every expressible case with `predictor` and compare with the published metric.

    A ClusterSimError from the predictor (e.g. a layout that cannot exist) skips that case with the
    message; anything else escaping the predictor is a bug and propagates.
    """
    mapped = [map_case(c) for c in cases]
    results = [_predict(m, predictor) for m in mapped]
    lookups = lookup_table_predictions([_lookup_key(r) for r in results])
    results = [replace(r, lookup_predicted=v) for r, v in zip(results, lookups, strict=True)]
    pairs = []
    for i, j, change in find_change_pairs(mapped):
        a, b = results[i], results[j]
        if a.predicted and b.predicted and a.published and b.published:
            pairs.append(ChangePair(a.id, b.id, change, b.published / a.published, b.predicted / a.predicted))
    return TrainingReport(tuple(results), tuple(pairs))


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def _summary_json(s: Summary) -> dict[str, Any]:
    return {
        "n_cases": s.cases, "in_scope": s.in_scope, "expressed": s.expressed, "coverage": _r(s.coverage),
        "median_abs_pct_error": _r(s.median_abs_pct_error), "lookup_cases": s.lookup_cases,
        "lookup_median_abs_pct_error": _r(s.lookup_median_abs_pct_error),
        "simulator_median_abs_pct_error_on_lookup_cases": _r(s.simulator_median_on_lookup_cases),
        "change_pairs": s.pairs, "change_median_abs_pct_error": _r(s.change_median_abs_pct_error),
        "change_lookup_median_abs_pct_error": _r(s.change_lookup_median_abs_pct_error),
    }


def memory_summary(report: TrainingReport) -> dict[str, Any]:
    """The memory check over the cases that publish memory per GPU: count, median |error| and signed median."""
    errors = [e for r in report.cases if (e := r.memory_pct_error) is not None]
    return {"cases": len(errors), "median_abs_pct_error": _r(_median([abs(e) for e in errors])),
            "median_pct_error": _r(_median(errors))}


def report_to_json(report: TrainingReport) -> dict[str, Any]:
    """The `validate-training --json` contract (DESIGN.md section 11), plus baselines and summaries: per
    source, and for the cases with tensor/pipeline parallelism (`model_parallel`) and without
    (`data_parallel_only`)."""
    cases = [{
        "id": r.id, "source": r.source, "metric": r.metric.key if r.metric else None,
        "metric_kind": r.metric.kind if r.metric else None,
        "hardware_flops": r.metric.hardware_flops if r.metric else None, "published": r.published,
        "predicted": None if r.predicted is None else round(r.predicted, 4), "abs_pct_error": _r(r.abs_pct_error),
        "skipped": r.skipped, "defaults": list(r.defaults), "family": r.family, "in_scope": r.in_scope,
        "fits_in_memory": r.fits_in_memory, "lookup_predicted": _r(r.lookup_predicted),
        "lookup_abs_pct_error": _r(r.lookup_abs_pct_error), "model_parallel": r.model_parallel,
        "memory_published_gib": _r(None if r.memory_published_bytes is None else r.memory_published_bytes / 2**30),
        "memory_predicted_gib": _r(None if r.memory_predicted_bytes is None else r.memory_predicted_bytes / 2**30),
        "memory_pct_error": _r(r.memory_pct_error),
    } for r in report.cases]
    pairs = [{"first": p.first, "second": p.second, "change": p.change, "published_ratio": round(p.published_ratio, 4),
              "predicted_ratio": round(p.predicted_ratio, 4), "abs_pct_error": _r(p.abs_pct_error),
              "lookup_abs_pct_error": _r(p.lookup_abs_pct_error)} for p in report.pairs]
    overall = _summary_json(report.summary())
    return {"cases": cases, **overall, "sources": {s: _summary_json(report.summary(s)) for s in report.sources},
            "model_parallel": _summary_json(report.summary(model_parallel=True)),
            "data_parallel_only": _summary_json(report.summary(model_parallel=False)), "pairs": pairs,
            "memory": memory_summary(report)}
