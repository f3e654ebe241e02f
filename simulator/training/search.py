"""Layout search (`clustersim plan`): which way to split one training job over one cluster is fastest.

A layout is a tensor-parallel degree t, a pipeline depth p (data-parallel degree d = GPUs / (t p)),
a micro-batch b, a data-parallel strategy, an activation recomputation mode, sequence parallelism
and the pipeline schedule. The search runs in four phases:

1. Enumerate (`enumerate_layouts`): t divides the GPUs per node (a TP group stays on NVLink, as
   Megatron-LM places it) and the attention and key/value heads; p divides the layers and t p
   divides the GPUs; b (powers of two by default) makes the global batch a multiple of b d; ddp and
   zero1 (Megatron's distributed optimizer) always, sharded strategies (fsdp, zero2, zero3, hsdp)
   only without pipeline parallelism, and only one strategy when d = 1 (nothing to shard); sequence
   parallelism with t > 1; with `interleaved`, also 2 virtual stages per rank where the layers and
   the micro-batch count divide (Megatron's conditions). With a fused (flash) attention kernel,
   selective recomputation is left out when `none` is tried: flash attention already keeps no
   s x s scores (what selective recomputation saves), so selective would only recompute more.
2. Filter by memory: `memory_per_gpu` (arithmetic, microseconds a layout); those over the GPU's
   memory are dropped.
3. Estimate (`estimate_step_s`): a closed-form step time to choose the `keep` layouts to simulate:
   compute of the critical stage (ComputeModel) over m micro-batches plus the 1F1B pipeline bubble
   of (p - 1) / v micro-batch times, a fraction (p - 1) / (m + p - 1) with v = 1 (Narayanan et al.
   2021, section 2.2), ring-volume TP and DP communication at the link rates (2 (n - 1) / n x S per
   all-reduce, Patarasuk & Yuan 2009) with DP reduction hidden behind one micro-batch's backward,
   and the optimizer step. The kept layouts are the best of each TP x PP shape (shapes in order of
   their best estimate), then the second best of each, and so on: a shape the estimate misjudges
   is still simulated.
4. Predict: `predict_step` (the SimPy timeline) for each kept layout; those it finds out of memory
   are dropped, the rest ranked by predicted tokens/s (ties: less memory first).
The estimate only chooses what to simulate; every number reported comes from `predict_step`.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from typing import Any

from simulator.collectives.comm import INTRA_EFFICIENCY, CommView, comm_view
from simulator.core.errors import ClusterSimError, ConfigError
from simulator.training.compute import ComputeModel
from simulator.training.memory import memory_per_gpu, shard_degrees
from simulator.training.predict import predict_step
from simulator.training.prediction import StepPrediction
from topologies.build import build
from topologies.spec import TopologySpec
from workloads.model import TransformerModel, transformer
from workloads.spec import Checkpointing, ModelSpec, StrategyKind, TrainingSpec

GIB = 1024**3
NETWORK_EFFICIENCY = 0.9  # share of the NIC line rate a large NCCL transfer reaches (estimate only)
SHARDED = ("zero2", "zero3", "fsdp", "hsdp")  # shard gradients or parameters: not with pipeline parallelism
DEFAULT_KEEP = 24


@dataclass(frozen=True)
class SearchSpace:
    """The values each dimension may take; None: every valid value (see the module docstring)."""

    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    micro_batches: tuple[int, ...] = (1, 2, 4, 8)
    strategies: tuple[StrategyKind, ...] = ("ddp", "zero1", "fsdp")
    recompute: tuple[Checkpointing, ...] = ("none", "selective", "full")
    sequence_parallel: tuple[bool, ...] = (True,)  # the values tried when tp > 1
    interleaved: bool = False


@dataclass(frozen=True)
class Layout:
    """One way to run the job: parallel degrees, micro-batching, strategy, recomputation."""

    tp: int
    pp: int
    dp: int
    micro_batch: int
    micro_steps: int  # micro-batches per data-parallel rank per optimizer step
    strategy: StrategyKind
    recompute: Checkpointing
    sequence_parallel: bool = False
    virtual_stages: int = 1

    @property
    def schedule(self) -> str:
        return "interleaved" if self.virtual_stages > 1 else "1f1b"

    def training(self, base: TrainingSpec) -> TrainingSpec:
        """`base` (model, batch, precision, strategy knobs, placement) run with this layout."""
        data: dict[str, Any] = base.model_dump()
        data.update(micro_batch=self.micro_batch, grad_accum=None, activation_checkpointing=self.recompute)
        data["strategy"] = {**data["strategy"], "kind": self.strategy}
        data["parallel"] = {**data["parallel"], "tp": self.tp, "pp": self.pp,
                            "sequence_parallel": self.sequence_parallel, "pipeline_schedule": self.schedule,
                            "virtual_stages": self.virtual_stages}
        return TrainingSpec.model_validate(data)


@dataclass(frozen=True)
class RankedLayout:
    """A layout with its estimated and its predicted step."""

    layout: Layout
    estimated_step_s: float
    prediction: StepPrediction


@dataclass(frozen=True)
class SearchResult:
    """Layouts that fit, best first, and how many each phase kept."""

    ranked: tuple[RankedLayout, ...]
    enumerated: int
    fit_in_memory: int
    predicted: int
    failed: tuple[tuple[Layout, str], ...] = ()  # kept layouts predict_step refused, with its reason


def divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _checked(values: tuple[int, ...] | None, valid: list[int], flag: str, why: str) -> list[int]:
    """The valid values, or the user's (each of which must be valid)."""
    if values is None:
        return valid
    bad = [v for v in values if v not in valid]
    if bad:
        raise ConfigError(f"{flag} {','.join(map(str, bad))}: {why} (valid: {','.join(map(str, valid))})")
    return sorted(set(values))


def _strategies(space: SearchSpace, pp: int, dp: int) -> list[StrategyKind]:
    kinds = [k for k in space.strategies if pp == 1 or k not in SHARDED]
    if dp == 1 and kinds:  # one rank: every strategy is DDP without communication
        return ["ddp"] if "ddp" in kinds else kinds[:1]
    return kinds


def enumerate_layouts(model: ModelSpec, gpus_per_node: int, n_gpus: int, global_batch: int,
                      space: SearchSpace) -> list[Layout]:
    """Every layout of `space` valid for this model, cluster and global batch (module docstring,
    phase 1), in order of tp, pp, micro-batch, strategy, recompute, sequence parallelism, schedule.
    ConfigError naming the option when a user-given degree is invalid or no layout divides the batch."""
    kv = model.kv_heads or model.heads
    tps = _checked(space.tp, [t for t in divisors(gpus_per_node) if model.heads % t == 0 and kv % t == 0
                              and n_gpus % t == 0],
                   "--tp", f"must divide the GPUs per node ({gpus_per_node}), the GPUs ({n_gpus}), the heads "
                   f"({model.heads}) and the key/value heads ({kv})")
    pps = _checked(space.pp, divisors(model.layers), "--pp", f"must divide the layers ({model.layers})")
    shapes = [(t, p) for t in tps for p in pps if n_gpus % (t * p) == 0]
    if not shapes:
        raise ConfigError(f"--tp/--pp: no tp x pp among {tps} x {pps} divides the {n_gpus} GPUs")
    layouts = []
    for t, p in shapes:
        d = n_gpus // (t * p)
        for b in sorted(set(space.micro_batches)):
            if global_batch % (b * d):
                continue
            m = global_batch // (b * d)
            chunks = [1, 2] if space.interleaved and p > 1 and model.layers % (2 * p) == 0 and m % p == 0 else [1]
            for kind in _strategies(space, p, d):
                for recompute in space.recompute:
                    for sp in (sorted(set(space.sequence_parallel)) if t > 1 else [False]):
                        layouts += [Layout(t, p, d, b, m, kind, recompute, sp, v) for v in chunks]
    if not layouts:
        dps = sorted({n_gpus // (t * p) for t, p in shapes})
        raise ConfigError(f"--global-batch {global_batch}: no layout divides it into micro-batch x data-parallel "
                          f"ranks (micro-batches {sorted(set(space.micro_batches))}, data-parallel degrees {dps})")
    return layouts


def layout_memory_bytes(layout: Layout, training: TrainingSpec, model: TransformerModel, seq_len: int,
                        gpus_per_node: int) -> float:
    """Bytes per GPU by the memory model alone (phase 2), with predict_step's arguments."""
    return memory_per_gpu(model, training, seq_len, layout.dp, gpus_per_node,
                          units_in_flight=training.strategy.limit_all_gathers + 1).total_bytes


def _ring_s(size_bytes: float, ranks: int, bandwidth_Bps: float, volume: float = 2.0) -> float:
    """A ring collective moving volume x (n - 1) / n x S per rank (2 for all-reduce, 1 for
    reduce-scatter or all-gather) at `bandwidth_Bps`; nothing for one rank."""
    return 0.0 if ranks <= 1 else volume * (ranks - 1) / ranks * size_bytes / bandwidth_Bps


def _group_Bps(v: CommView, ranks_apart: int, group_ranks: int) -> float:
    """Bandwidth per rank of a group whose neighbours are `ranks_apart` ranks apart (tp-pp-dp
    placement): NVLink when the group fits in a node, else the node's NICs shared by the groups
    that cross them at the same time (one per GPU at most)."""
    intra = v.intra_Bps * INTRA_EFFICIENCY.get(v.intra_kind, 0.8)
    if ranks_apart * group_ranks <= v.ranks_per_node or v.net_Bps <= 0.0:
        return intra
    sharing = min(ranks_apart, v.ranks_per_node)
    return min(intra, v.net_Bps * NETWORK_EFFICIENCY / sharing)


def estimate_step_s(layout: Layout, training: TrainingSpec, model: TransformerModel, compute: ComputeModel,
                    v: CommView, seq_len: int) -> float:
    """Closed-form step time (module docstring, phase 3): only for choosing what to simulate."""
    t, p, d, b, m = layout.tp, layout.pp, layout.dp, layout.micro_batch, layout.micro_steps
    layers = model.spec.layers / p
    times = compute.layer(model, b, seq_len, layout.recompute, t, layout.sequence_parallel)
    head_f, head_b = compute.head(model, b, seq_len, t)
    activation = 2.0 * b * seq_len * model.spec.hidden
    tp_collectives = 4 + (2 if layout.recompute == "full" else 0)  # 2 forward, 2 backward (+ recomputed forward)
    tp_s = layers * tp_collectives * _ring_s(activation, t, _group_Bps(v, 1, t))
    stage_s = layers * (times.forward_s + times.recompute_s + times.backward_s) + head_f + head_b + tp_s
    p2p_bytes = activation / (t if layout.sequence_parallel else 1)
    p2p_s = 0.0 if p == 1 else 2.0 * layout.virtual_stages * p2p_bytes / _group_Bps(v, t, 2)
    pipeline_s = (m + (p - 1) / layout.virtual_stages) * (stage_s + p2p_s)
    local_params = model.total_params / (t * p)
    grads = local_params * training.strategy.grad_reduce_bytes
    dp_Bps = _group_Bps(v, t * p, d)
    window = layers * times.backward_s  # the last micro-batch's backward hides the first reductions
    kind = layout.strategy
    if kind in ("zero3", "fsdp", "hsdp"):  # gather twice and reduce-scatter every micro-step, beside compute
        per_micro = _ring_s(2.0 * local_params, d, dp_Bps, 2.0) + _ring_s(grads, d, dp_Bps, 1.0)
        dp_s = m * max(0.0, per_micro - stage_s)
    elif kind == "ddp":
        dp_s = max(0.0, _ring_s(grads, d, dp_Bps) - window)
    else:  # zero1/zero2: reduce-scatter behind backward, all-gather of updated parameters after the optimizer
        dp_s = max(0.0, _ring_s(grads, d, dp_Bps, 1.0) - window) + _ring_s(2.0 * local_params, d, dp_Bps, 1.0)
    optimizer_shard = shard_degrees(training, d, v.ranks_per_node)[2]
    return pipeline_s + dp_s + compute.optimizer(local_params / optimizer_shard, training.optimizer)


def _broad(candidates: list[tuple[float, float, Layout, TrainingSpec]],
           keep: int) -> list[tuple[float, float, Layout, TrainingSpec]]:
    """The `keep` candidates to simulate, from candidates sorted by estimate: the best of each
    TP x PP shape (shapes in order of their best estimate), then the second best of each, and so on,
    so that a misjudged shape is still simulated."""
    shapes: dict[tuple[int, int], list[tuple[float, float, Layout, TrainingSpec]]] = {}
    for candidate in candidates:
        shapes.setdefault((candidate[2].tp, candidate[2].pp), []).append(candidate)
    rounds = max(len(group) for group in shapes.values())
    ordered = [group[i] for i in range(rounds) for group in shapes.values() if i < len(group)]
    return ordered[:keep]


def _predict(topology: TopologySpec, training: TrainingSpec, model: ModelSpec) -> StepPrediction | str:
    """predict_step without its spans (they are not needed and are large to send between
    processes); a ClusterSimError becomes its message."""
    try:
        return replace(predict_step(topology, training, model), spans=())
    except ClusterSimError as exc:
        return str(exc)


def _predictions(jobs: Sequence[tuple[TopologySpec, TrainingSpec, ModelSpec]],
                 workers: int) -> Iterator[tuple[int, StepPrediction | str]]:
    """(index, prediction or error) for each job, in completion order; a process pool of `workers`
    (spawned, not forked: the caller may run threads, such as a progress bar) when above 1."""
    if workers <= 1 or len(jobs) <= 1:
        for index, job in enumerate(jobs):
            yield index, _predict(*job)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context) as pool:
        futures = {pool.submit(_predict, *job): index for index, job in enumerate(jobs)}
        for future in as_completed(futures):
            yield futures[future], future.result()


def search_layouts(topology: TopologySpec, base: TrainingSpec, model_spec: ModelSpec, space: SearchSpace,
                   keep: int = DEFAULT_KEEP, workers: int = 1,
                   on_start: Callable[[int], None] | None = None,
                   on_predicted: Callable[[], None] | None = None) -> SearchResult:
    """Rank the layouts of `space` for `base` (its model, global batch, sequence, precision and
    strategy knobs) on `topology` (module docstring). `on_start(n)` is told how many layouts will be
    simulated and `on_predicted()` is called after each. ConfigError when no layout is valid, none
    fits in memory, or predict_step refuses every one."""
    if base.global_batch is None:
        raise ConfigError("--global-batch is required: the layouts divide it")
    if keep < 1:
        raise ConfigError(f"--keep must be >= 1, got {keep}")
    cluster = build(topology)
    v = comm_view(cluster)
    model = transformer(model_spec)
    seq_len = base.seq_len or model_spec.max_seq_len
    if base.flash_attention and "none" in space.recompute:  # selective keeps what flash keeps, recomputing more
        space = replace(space, recompute=tuple(r for r in space.recompute if r != "selective"))
    layouts = enumerate_layouts(model_spec, topology.gpus_per_node, v.n_ranks, base.global_batch, space)
    capacity = cluster.gpu.memory_gib * GIB
    compute = ComputeModel(cluster.gpu, base.precision)
    candidates, smallest = [], None
    for layout in layouts:
        training = layout.training(base)
        memory = layout_memory_bytes(layout, training, model, seq_len, topology.gpus_per_node)
        if smallest is None or memory < smallest[0]:
            smallest = (memory, layout)
        if memory <= capacity:
            estimate = estimate_step_s(layout, training, model, compute, v, seq_len)
            candidates.append((estimate, memory, layout, training))
    if not candidates:
        need, layout = smallest or (0.0, layouts[0])
        raise ConfigError(f"no layout fits in {capacity / GIB:.0f} GiB per GPU: the smallest, {describe(layout)}, "
                          f"needs {need / GIB:.1f} GiB; try more --nodes, a smaller --global-batch or --micro-batch, "
                          "or --recompute full")
    candidates.sort(key=lambda c: (c[0], c[1]))
    kept = _broad(candidates, keep)
    if on_start is not None:
        on_start(len(kept))
    ranked, failed = [], []
    for index, outcome in _predictions([(topology, training, model_spec) for _, _, _, training in kept], workers):
        estimate, _, layout, _ = kept[index]
        if isinstance(outcome, str):
            failed.append((layout, outcome))
        elif outcome.fits_in_memory:
            ranked.append(RankedLayout(layout, estimate, outcome))
        if on_predicted is not None:
            on_predicted()
    if not ranked:
        reason = f"predict_step refused them ({failed[0][1]})" if failed else "the simulator finds all out of memory"
        raise ConfigError(f"none of the {len(kept)} most promising layouts can run: {reason}")
    ranked.sort(key=lambda r: (-r.prediction.tokens_per_s, r.prediction.memory_per_gpu_bytes,
                               layouts.index(r.layout)))
    return SearchResult(tuple(ranked), len(layouts), len(candidates), len(kept), tuple(failed))


def describe(layout: Layout) -> str:
    """E.g. 'TP8 PP8 DP24, micro-batch 1, zero1, recompute full, SP, interleaved x2'."""
    extras = (", SP" if layout.sequence_parallel else "") + (
        f", interleaved x{layout.virtual_stages}" if layout.virtual_stages > 1 else "")
    return (f"TP{layout.tp} PP{layout.pp} DP{layout.dp}, micro-batch {layout.micro_batch}, {layout.strategy}, "
            f"recompute {layout.recompute}{extras}")
