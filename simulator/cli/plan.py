"""`clustersim plan`: search the (TP, PP, DP, micro-batch, strategy, recompute) layouts of one job."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_args

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from simulator.cli.common import (
    CapacityFactorOpt,
    MoeImbalanceOpt,
    plain,
    print_message,
    read_yaml,
    reflowed,
    table_console,
)
from simulator.cli.deadline import node_counts, show_deadline
from simulator.cli.job_args import (
    Fp8RecipeOpt,
    GlobalBatchOpt,
    GlobalBatchTokensOpt,
    ModelOpt,
    NcclEnvOpt,
    NcclSelectionOpt,
    NcclVersionOpt,
    NodesOpt,
    PrecisionOpt,
    SeqLenOpt,
    TopologyOpt,
    global_batch_of,
    with_nccl,
)
from simulator.cli.run_args import FailuresOpt, IntervalOpt, TrainTokensOpt, run_spec
from simulator.collectives.nccl_setup import NcclSetup
from simulator.core.errors import ConfigError, config_error_from
from simulator.report.json_out import layout_json
from simulator.scenario import DEFAULT_SCENARIO, complete_training, nccl_setup, scenario_from_data, scenario_specs
from simulator.training.job_warnings import job_warnings
from simulator.training.routing import describe as describe_routing
from simulator.training.search import (
    DEFAULT_KEEP,
    DEFAULT_SLACK,
    POOL_AFTER_S,
    SearchResult,
    SearchSpace,
    describe,
    search_layouts,
)
from topologies.presets import resolve_topology
from topologies.spec import TopologySpec, validate_topology_spec
from workloads.presets import resolve_model
from workloads.spec import Checkpointing, ModelSpec, StrategyKind, TrainingSpec, checkpointing_of

GIB = 1024**3
T = TypeVar("T")
DEFAULT_STRATEGIES = ("ddp", "zero1", "fsdp")

HELP = f"""Find the fastest layouts of a training job: enumerate (TP, PP, CP, DP, EP, micro-batch, strategy,
recompute, sequence parallelism) layouts that fit in memory and rank them by predicted tokens/s.

The job is --model on --nodes of --topology with --global-batch sequences a step, or a scenario
YAML (as `clustersim predict` takes) whose other training fields (precision, flash attention,
strategy knobs such as overlap_grad_reduce, rank placement) are kept for every layout.

Enumerated: TP divides the GPUs per node and the (key/value) heads; PP divides the layers and TP x PP
the GPUs; CP (context parallelism, only the --cp sizes given: long sequences) splits the sequence into 2
CP chunks; DP = GPUs / (TP x PP x CP); EP (expert parallelism of a mixture of experts: the --ep
sizes given, else every divisor of its experts) divides DP x CP; micro-batches whose
multiples of DP divide the global batch; ddp and zero1 (distributed optimizer) always, fsdp (and
zero2/zero3/hsdp if asked) only with PP = 1; recompute none, selective, full (selective not with flash
attention and none: flash attention already keeps no s x s scores); sequence parallelism on with TP > 1
(--sequence-parallel both to try off too); --interleaved adds 2 virtual stages per pipeline rank where
the layers and micro-batches allow.

Ranking: layouts over the GPU memory (the memory model) are dropped; a closed-form estimate
(compute per stage, pipeline bubble (p - 1) / (m + p - 1), TP, PP and DP ring traffic at link
rates, the CP ring beyond the attention it hides behind) drops those more than --slack (default
{DEFAULT_SLACK}) times slower than the best estimate and picks up to --keep (default {DEFAULT_KEEP})
to simulate: the best of each TP x PP x CP x EP shape, then
the second best of each, and so on. Each is simulated (as `clustersim predict` would) and the ones
that fit are ranked by tokens/s. Every number shown is the simulation's. Deep pipelines take long
to simulate (tens of seconds at PP 64 and more): when the simulations would take over
{POOL_AFTER_S:g} s they run in --workers processes.

Columns: step time (one optimizer step), tokens/s, model TFLOP/s per GPU (no recomputation), MFU =
TFLOP/s / dense peak, memory per GPU.

Examples:

  clustersim plan --model gpt3-175b --topology dgx-a100 --nodes 128 --global-batch 1536

  clustersim plan --model llama2-70b --topology dgx-h100 --nodes 16 --global-batch 512 --seq-len 4096
      --top 5 --strategy zero1 --strategy fsdp --recompute selective,full --json

  clustersim plan --model gpt3-175b --topology dgx-a100 --nodes 128 --global-batch 1536 --tp 8 --pp 4,8,16
      --interleaved --workers 8

  clustersim plan megatron-2021.yaml --strategy ddp --sequence-parallel off --top 5

  clustersim plan --model llama3-8b --topology dgx-h100 --nodes 1 --global-batch 2 --seq-len 131072
      --cp 1,2,4,8 --strategy fsdp --recompute full

  clustersim plan --model mixtral-8x7b --topology dgx-h100 --nodes 8 --global-batch 256 --seq-len 4096
      --ep 1,2,4,8

By deadline: with --train-tokens and --deadline-days, plan each node count of --node-counts (default: powers
of two up to --nodes), run its fastest layout through failures (--failures, --checkpoint-interval; Monte
Carlo as `clustersim predict --train-tokens` does) and show days and GPU-hours against GPU count, marking
the fewest GPUs that finish by the deadline at P90 and the cheapest that do:

  clustersim plan --model llama3-70b --topology dgx-h100 --global-batch 512 --seq-len 8192
      --train-tokens 15T --deadline-days 90 --node-counts 64,128,256,512 --usd-per-gpu-hour 2.5
"""


def register(app: typer.Typer) -> None:
    """Add `plan` to the app."""
    app.command("plan", help=reflowed(HELP))(plan)


def _required(value: T | None, flag: str) -> T:
    """The option's value; ConfigError naming it when it was not given (a usage error, exit code 2)."""
    if value is None:
        raise ConfigError(f"{flag} is required (see clustersim plan --help)")
    return value


def _ints(text: str | None, flag: str) -> tuple[int, ...] | None:
    """'1,2,4' -> (1, 2, 4); None stays None; ConfigError naming the flag otherwise."""
    if text is None:
        return None
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"{flag}: expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise ConfigError(f"{flag}: expected integers >= 1, got {text!r}")
    return values


def _choices(text: str, flag: str, allowed: tuple[str, ...]) -> tuple[Any, ...]:
    """'a,b' -> ('a', 'b'), each one of `allowed`; ConfigError naming the flag otherwise."""
    values = tuple(part.strip() for part in text.split(",") if part.strip())
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise ConfigError(f"{flag}: {', '.join(bad) or 'nothing given'} not among {', '.join(allowed)}")
    return values


def _space(tp: str | None, pp: str | None, micro_batch: str, strategies: str, recompute: str,
           sequence_parallel: str, interleaved: bool, cp: str = "1", ep: str | None = None) -> SearchSpace:
    sp = {"on": (True,), "off": (False,), "both": (False, True)}
    if sequence_parallel not in sp:
        raise ConfigError(f"--sequence-parallel: expected on, off or both, got {sequence_parallel!r}")
    return SearchSpace(
        tp=_ints(tp, "--tp"), pp=_ints(pp, "--pp"), micro_batches=_ints(micro_batch, "--micro-batch") or (),
        strategies=_choices(strategies, "--strategy", get_args(StrategyKind)),
        recompute=_choices(",".join(str(checkpointing_of(part)) for part in recompute.split(",")), "--recompute",
                           get_args(Checkpointing)),
        sequence_parallel=sp[sequence_parallel], interleaved=interleaved, cp=_ints(cp, "--cp") or (1,),
        ep=_ints(ep, "--ep"))


def _job(scenario: Path | None, model: str | None, topology: str | None, nodes: int | None,
         batch: tuple[str | None, str | None], seq_len: int | None, precision: str | None,
         routing: dict[str, float | None] | None = None,
         nccl: tuple[str | None, str | None, str | None] = (None, None, None), fp8_recipe: str | None = None,
         ) -> tuple[TopologySpec, TrainingSpec, ModelSpec, NcclSetup]:
    """The job to lay out and its NCCL: the scenario's (if given) with the options applied, as `predict`
    applies them (another --topology brings its own node count unless --nodes is given; `nccl`: --nccl-version,
    --nccl-selection and --nccl-env). Without a scenario, --model, --topology and --global-batch are required.
    ConfigError names the option."""
    topo: TopologySpec | None = None
    model_spec: ModelSpec | None = None
    base = TrainingSpec(model=model or "")
    spec = DEFAULT_SCENARIO
    if scenario is not None:
        spec = scenario_from_data(read_yaml(scenario, "scenario"), str(scenario))
        topo, base, model_spec = scenario_specs(spec)
    try:
        if model is not None:
            model_spec = resolve_model(model)
    except ConfigError as exc:
        raise ConfigError(f"--model: {exc}") from None
    try:
        if topology is not None:
            topo = resolve_topology(topology, nodes)
        elif topo is not None and nodes is not None:
            topo = validate_topology_spec({**topo.model_dump(), "nodes": nodes}, "--nodes")
    except ConfigError as exc:
        raise ConfigError(f"--topology/--nodes: {exc}") from None
    model_spec, topo = _required(model_spec, "--model"), _required(topo, "--topology")
    global_batch = global_batch_of(*batch, seq_len or base.seq_len or model_spec.training_context)
    options = {"global_batch": global_batch, "seq_len": seq_len, "precision": precision, "fp8_recipe": fp8_recipe}
    data = {**base.model_dump(exclude_unset=True), "model": model_spec.name, "grad_accum": None,
            **{key: value for key, value in options.items() if value is not None}}
    routing_options = {key: value for key, value in (routing or {}).items() if value is not None}
    if routing_options:
        data["routing"] = {**base.routing.model_dump(), **routing_options}
    _required(data.get("global_batch"), "--global-batch (or --global-batch-tokens"
              + (", or training.global_batch in the scenario)" if scenario else ")"))
    try:
        training = TrainingSpec.model_validate(data)
    except ValidationError as exc:
        raise config_error_from(exc, "command line") from None
    return topo, complete_training(training, model_spec, topo), model_spec, nccl_setup(with_nccl(spec, *nccl))


def _seconds(t: float) -> str:
    """Three significant digits: 18.5, 2.13, 0.0856."""
    return f"{t:.1f}" if t >= 10 else f"{t:.2f}" if t >= 1 else f"{t:.3g}"


def _table(title: str, result: SearchResult, top: int, caption: str) -> Table:
    table = Table(title=plain(title), title_justify="left", caption=caption, caption_justify="left", box=None,
                  padding=(0, 1, 0, 0), pad_edge=False, header_style="bold underline")
    context = any(r.layout.cp > 1 for r in result.ranked[:top])
    experts = any(r.layout.ep > 1 for r in result.ranked[:top])
    for header in ("#", "TP", "PP", *(("CP",) if context else ()), "DP", *(("EP",) if experts else ()),
                   "micro-\nbatch", "strategy", "recompute", "SP"):
        table.add_column(header)
    for header in ("step\ns", "tokens/s", "TFLOP/s\n/GPU", "MFU", "memory\nGiB"):
        table.add_column(header, justify="right")
    for rank, r in enumerate(result.ranked[:top], start=1):
        lay, p = r.layout, r.prediction
        pp = (f"{lay.pp}v{lay.virtual_stages}" if lay.virtual_stages > 1 else str(lay.pp)) + (
            "e" if lay.pipeline_split == "embedding_and_loss" else "")
        table.add_row(str(rank), str(lay.tp), pp, *((str(lay.cp),) if context else ()), str(lay.dp),
                      *((str(lay.ep),) if experts else ()),
                      f"{lay.micro_batch}x{lay.micro_steps}",
                      lay.strategy, lay.recompute, "on" if lay.sequence_parallel else "-", _seconds(p.step_time_s),
                      f"{p.tokens_per_s:,.0f}", f"{p.tflops_per_gpu:.1f}", f"{100 * p.mfu:.1f}%",
                      f"{p.memory_per_gpu_bytes / GIB:.1f}")
    return table


def plan(
    scenario: Annotated[Path | None, typer.Argument(
        help="Scenario YAML: the job whose layout is searched (its precision, flash attention, strategy knobs, "
        "placement are kept); the options below override it.")] = None,
    model: ModelOpt = None, topology: TopologyOpt = None, global_batch: GlobalBatchOpt = None,
    global_batch_tokens: GlobalBatchTokensOpt = None, nodes: NodesOpt = None, seq_len: SeqLenOpt = None,
    precision: PrecisionOpt = None, fp8_recipe: Fp8RecipeOpt = None, nccl_version: NcclVersionOpt = None,
    nccl_selection: NcclSelectionOpt = None, nccl_env: NcclEnvOpt = None,
    top: Annotated[int, typer.Option(help="Layouts to show.")] = 10,
    tp: Annotated[str | None, typer.Option(help="Tensor-parallel sizes to try, e.g. 4,8 (default: all valid).")]
    = None,
    pp: Annotated[str | None, typer.Option(help="Pipeline sizes to try, e.g. 1,2,4,8 (default: all valid).")] = None,
    cp: Annotated[str, typer.Option(help="Context-parallel sizes to try for long sequences, e.g. 1,2,4,8 (default: "
                                    "1, no context parallelism).")] = "1",
    ep: Annotated[str | None, typer.Option(help="Expert-parallel sizes to try for a mixture of experts, e.g. 1,8 "
                                           "(default: every divisor of its experts; 1 for a dense model).")] = None,
    moe_imbalance: MoeImbalanceOpt = None,
    capacity_factor: CapacityFactorOpt = None,
    micro_batch: Annotated[str, typer.Option(help="Micro-batch sizes to try.")] = "1,2,4,8",
    strategy: Annotated[list[str] | None, typer.Option(
        "--strategy", "--strategies", help="Data-parallel strategies to try, repeatable or comma-separated (ddp, "
        "zero1, zero2, zero3, fsdp, hsdp); sharded ones only with PP 1. Default: ddp,zero1,fsdp.")] = None,
    recompute: Annotated[str, typer.Option(help="Activation recomputation to try: none, selective, full (or "
                                           "Megatron's recompute-activations, recompute-granularity=full), op, or "
                                           "a JAX policy as MaxText names it (save_qkv_proj, minimal, ...).")]
    = "none,selective,full",
    sequence_parallel: Annotated[str, typer.Option(help="With TP > 1: on, off or both.")] = "on",
    interleaved: Annotated[bool, typer.Option(help="Also try the interleaved 1F1B schedule (2 virtual stages).")]
    = False,
    keep: Annotated[int, typer.Option(help="Layouts simulated at most, chosen by the closed-form estimate.")]
    = DEFAULT_KEEP,
    slack: Annotated[float, typer.Option(help="Simulate only layouts estimated within this factor of the best.")]
    = DEFAULT_SLACK,
    workers: Annotated[int | None, typer.Option(
        help="Processes for long searches (default: the CPU count; 1: this process only).")] = None,
    train_tokens: TrainTokensOpt = None,
    deadline_days: Annotated[float | None, typer.Option(
        help="Plan by deadline: the fewest GPUs that train --train-tokens by this many days at P90.")] = None,
    node_counts_text: Annotated[str | None, typer.Option(
        "--node-counts", help="Node counts to plan by deadline, e.g. 64,128,256 (default: powers of two up to "
        "--nodes).")] = None,
    failures: FailuresOpt = None, checkpoint_interval: IntervalOpt = None,
    usd_per_gpu_hour: Annotated[float | None, typer.Option(help="Price of one GPU-hour, for the cost.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object with the ranked layouts.")] = False,
) -> None:
    if top < 1:
        raise ConfigError(f"--top must be >= 1, got {top}")
    workers = workers if workers is not None else os.cpu_count() or 1
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    space = _space(tp, pp, micro_batch, ",".join(strategy or DEFAULT_STRATEGIES), recompute, sequence_parallel,
                   interleaved, cp, ep)
    topo, training, model_spec, nccl = _job(scenario, model, topology, nodes, (global_batch, global_batch_tokens),
                                            seq_len, precision,
                                            {"load_imbalance": moe_imbalance, "capacity_factor": capacity_factor},
                                            (nccl_version, nccl_selection, nccl_env), fp8_recipe)
    for warning in job_warnings(training, model_spec, topo):
        print_message(Console(stderr=True), "warning", "yellow", warning)
    if (train_tokens is None) != (deadline_days is None):
        raise ConfigError("--train-tokens and --deadline-days plan by deadline together: give both")
    run = run_spec(None, train_tokens, failures, checkpoint_interval)
    if run is not None and deadline_days is not None:
        show_deadline(topo, training, model_spec, space, run, deadline_days, node_counts(node_counts_text, topo.nodes),
                      keep, slack, workers, usd_per_gpu_hour, as_json, nccl)
        return
    start = time.perf_counter()
    columns = (TextColumn("plan: simulating"), BarColumn(), MofNCompleteColumn(), TextColumn("layouts"),
               TimeElapsedColumn())
    progress = Progress(*columns, console=Console(stderr=True))
    task = progress.add_task("plan", total=None, start=False)

    def started(n: int) -> None:  # shown once the layouts to simulate are known (none on an input error)
        progress.update(task, total=n)
        progress.start_task(task)
        progress.start()

    try:
        result = search_layouts(topo, training, model_spec, space, keep, slack, workers, on_start=started,
                                on_predicted=lambda: progress.advance(task), nccl=nccl)
    finally:
        if progress.tasks[0].started:  # stopping a bar never shown prints an empty line before the error
            progress.stop()
    seconds = time.perf_counter() - start
    n_gpus = topo.nodes * topo.gpus_per_node
    seq = training.seq_len or model_spec.training_context
    if as_json:
        typer.echo(json.dumps({
            "model": model_spec.name, "topology": topo.name, "nodes": topo.nodes, "n_gpus": n_gpus,
            "global_batch": training.global_batch, "seq_len": seq, "enumerated": result.enumerated,
            "ruled_out": result.ruled_out, "fit_in_memory": result.fit_in_memory, "within_slack": result.promising,
            "simulated": result.predicted,
            "refused": [{"layout": describe(lay), "error": error} for lay, error in result.failed], "search_s": seconds,
            "layouts": [layout_json(rank, r) for rank, r in enumerate(result.ranked[:top], start=1)]}, indent=2))
        return
    routing_note = f", MoE routing: {describe_routing(training.routing)}" if describe_routing(training.routing) else ""
    title = (f"{model_spec.name} on {topo.nodes} x {topo.gpus_per_node} {topo.gpu} ({topo.name or 'cluster'}), "
             f"global batch {training.global_batch} x {seq} tokens{routing_note}: best {min(top, len(result.ranked))} "
             "layouts")
    ruled_out = f", {result.ruled_out} ruled out by the scenario's settings" if result.ruled_out else ""
    caption = (f"{result.enumerated} layouts enumerated{ruled_out}, {result.fit_in_memory} fit in memory, "
               f"{result.promising} "
               f"estimated within {slack:g}x of the best, {result.predicted} simulated ({len(result.ranked)} fit), "
               f"{seconds:.1f} s. Micro-batch: sequences x micro-batches per step; PP 8v2: 8 stages of 2 virtual "
               "stages (interleaved); 16e: the embedding and the loss counted as layers (pipeline_split).")
    console = table_console()
    console.print(_table(title, result, top, caption))
