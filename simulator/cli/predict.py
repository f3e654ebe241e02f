"""`clustersim predict` and `clustersim scale`: one training step, and how it scales with nodes."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from simulator.calibration.apply import predict_calibrated as _run
from simulator.cli.calibration_args import CALIBRATION_HELP, FORCE_HELP, load_profile, warn_of_other_selection
from simulator.cli.common import (
    CapacityFactorOpt,
    MoeImbalanceOpt,
    check_writable,
    plain,
    print_message,
    reflowed,
    table_console,
    write_text,
)
from simulator.cli.fault_args import LinkFaultOpt, StragglerOpt, with_link_faults, with_stragglers
from simulator.cli.job_args import (
    CpCommOpt,
    CpOpt,
    EpDispatcherOpt,
    EpOpt,
    EpOverlapOpt,
    EtpOpt,
    Fp8RecipeOpt,
    FrameworkOpt,
    GlobalBatchOpt,
    GlobalBatchTokensOpt,
    GpusOpt,
    LoraRankOpt,
    LoraTargetsOpt,
    MemoryFractionOpt,
    MicroBatchOpt,
    ModelOpt,
    MtpLayersOpt,
    NcclEnvOpt,
    NcclSelectionOpt,
    NcclVersionOpt,
    NodesOpt,
    PackedSampleLenOpt,
    PadToCapacityOpt,
    PipelineLayoutOpt,
    PipelineSplitOpt,
    PlacementOpt,
    PpOpt,
    PrecisionOpt,
    RecomputeLayersOpt,
    RecomputeModulesOpt,
    RecomputeOpt,
    ScenarioArg,
    ScheduleOpt,
    SeqLenOpt,
    SequenceParallelOpt,
    ShardGroupOpt,
    StrategyOpt,
    TopologyOpt,
    TpOpt,
    VirtualStagesOpt,
    job_options,
    load_scenario,
    override,
    with_nccl,
)
from simulator.cli.run_args import (
    FailuresOpt,
    IntervalOpt,
    TrainTokensOpt,
    check_run,
    predict_run_shown,
    run_rows,
    run_spec,
)
from simulator.core.errors import ConfigError
from simulator.report.json_out import prediction_json, scale_row_json
from simulator.report.trace import trace_events
from simulator.run.summary import RunPrediction
from simulator.scaling import ScaledJob, weak_scaling
from simulator.scenario import (
    DEFAULT_SCENARIO,
    ScenarioSpec,
    nccl_setup,
    pace_of,
    scenario_echo,
)
from simulator.training.job_warnings import job_warnings
from simulator.training.predict import micro_steps_of
from simulator.training.prediction import StepPrediction
from simulator.training.routing import dropped_fraction, routed_loads
from workloads.spec import RoutingSpec, TrainingSpec

GIB = 1024**3

PREDICT_HELP = f"""Predict one training step: time, throughput, MFU, GPU idle time, memory.

With no arguments: {DEFAULT_SCENARIO.name}. A scenario YAML (topology, nodes, training) or the
options below change it; options override the file. With --model and no scenario file only the
embedded cluster is kept: what the job leaves unstated comes from the model and the layout (its
training sequence length; micro-batch 1; no gradient accumulation; recompute none; fsdp, or ddp
with --tp/--pp; docs/scenarios.md). The table's header and --json's `scenario` show the job as
resolved.

Metrics: step_time_s = wall time of one optimizer step (all micro-batches);
compute_s = busy time of the compute stream of the critical GPU (with pipeline parallelism the
stage with the most compute); gpu_idle_s = the step minus each GPU's own compute, averaged over
all the job's GPUs (step_time_s - compute_s when they compute alike; a straggler's wait counts on
the GPUs that wait; gpu_idle_by_class per class) and gpu_idle_fraction = gpu_idle_s / step_time_s;
exposed_comm_s = time compute waits on communication (by collective,
incl. tensor-parallel and pipeline transfers); the pipeline bubble is reported apart;
tokens_per_s; tflops_per_gpu = model FLOPs (6N + attention, no recomputation) per second per
GPU; mfu = tflops_per_gpu / dense peak; memory_per_gpu_bytes and fits_in_memory (OOM is a result, not an error).

Examples:

  clustersim predict

  clustersim predict --model llama2-70b --nodes 16 --strategy fsdp --micro-batch 1 --global-batch 512

  clustersim predict scenario.yaml --topology dgx-a100 --json

  clustersim predict --model path/to/config.json --strategy zero2 --seq-len 2048

  clustersim predict --model gpt3-175b --topology dgx-a100 --nodes 128 --tp 8 --pp 8 --strategy zero1
      --sequence-parallel --micro-batch 1 --global-batch 1536

  clustersim predict --model llama3-8b --topology dgx-h100 --nodes 4 --cp 8 --seq-len 131072
      --strategy fsdp --recompute full --global-batch 8

  clustersim predict --model mixtral-8x7b --topology dgx-h100 --nodes 8 --ep 8 --strategy zero1
      --seq-len 4096 --global-batch 256

With --train-tokens (or a scenario's run: section) the time to train runs through failures, checkpoints and
restarts (Monte Carlo over seeds; docs/time-to-train.md): P10/P50/P90 days, interruptions, goodput, GPU-hours:

  clustersim predict --model llama3-70b --nodes 64 --tp 8 --pp 4 --sequence-parallel --strategy zero1
      --seq-len 8192 --global-batch 512 --train-tokens 15T --failures llama3 --checkpoint-interval optimal
"""

SCALE_HELP = """Scaling-efficiency curve: predict the same job (same per-GPU micro-batch and
accumulation) at several node counts. scaling_efficiency(N) = per-GPU throughput at N / per-GPU
throughput at the first node count given.

Examples:

  clustersim scale --model llama2-7b --nodes 1,2,4,8,16

  clustersim scale --model llama2-70b --nodes 2,4,8 --tp 8 --pp 2 --sequence-parallel --strategy zero1
      --global-batch-tokens 1Mi --recompute selective
"""


def register(app: typer.Typer) -> None:
    """Add `predict` and `scale` to the app."""
    app.command("predict", help=reflowed(PREDICT_HELP))(predict)
    app.command("scale", help=reflowed(SCALE_HELP))(scale)


def _strategy_text(training: TrainingSpec) -> str:
    """'hsdp (shard groups of 8)', 'zero1 (optimizer groups of 8)' where a group is stated; else the kind."""
    s = training.strategy
    if s.shard_group_gpus is None or not s.hybrid:
        return s.kind
    return f"{s.kind} ({'optimizer' if s.kind == 'zero1' else 'shard'} groups of {s.shard_group_gpus})"


def _layout_text(training: TrainingSpec) -> str:
    """', TP8 PP4 (interleaved x2) CP2 EP8, SP' for a model-parallel job; '' otherwise."""
    par = training.parallel
    if par.tp == 1 and par.pp == 1 and par.cp == 1 and par.ep == 1:
        return ""
    layout = f", layout {par.pipeline_layout}" if par.pipeline_layout else ""
    schedule = f" ({par.pipeline_schedule}{f' x{par.virtual_stages}' if par.virtual_stages > 1 else ''}{layout})" \
        if par.pp > 1 else ""
    context = f" CP{par.cp}" if par.cp > 1 else ""
    experts = f" EP{par.ep}" if par.ep > 1 else ""
    return f", TP{par.tp} PP{par.pp}{schedule}{context}{experts}{', SP' if par.sequence_parallel else ''}"


def _routing_text(training: TrainingSpec) -> str:
    """', busiest expert rank 1.30x its share (8% of its tokens dropped)' for unbalanced or capacity-bound
    routing; '' for the default (balanced, dropless)."""
    if training.routing == RoutingSpec():
        return ""
    busiest, mean = routed_loads(training.routing, training.parallel.ep)
    dropped = dropped_fraction(training.routing, training.parallel.ep)
    load = f"busiest expert rank {busiest:.2f}x its share" if busiest != mean else f"experts at {busiest:.2f}x"
    return f", {load}{f' ({100 * dropped:.0f}% of its tokens dropped)' if dropped > 0.0 else ''}"


def _ranks(text: str | None, n_gpus: int) -> tuple[int, ...]:
    """--trace-gpus: comma-separated global ranks within the job; ConfigError otherwise."""
    if not text:
        return ()
    try:
        ranks = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise ConfigError(f"--trace-gpus: expected comma-separated GPU ranks, got {text!r}") from None
    if not ranks or ranks[0] < 0 or ranks[-1] >= n_gpus:
        raise ConfigError(f"--trace-gpus: ranks must be within 0..{n_gpus - 1}, got {text!r}")
    return ranks


def _nccl_text(spec: ScenarioSpec) -> str:
    """The job's NCCL for a table's header where the scenario sets it: ', NCCL 2.18, NCCL's tuner's choices,
    NCCL_NVLS_ENABLE=0'."""
    release = f", NCCL {spec.nccl_version}" if spec.nccl_version is not None else ""
    chosen = ", NCCL's tuner's choices" if spec.nccl_selection == "nccl" else ""
    return release + chosen + "".join(f", {name}={value}" for name, value in sorted(spec.nccl_env.items()))


def job_text(training: TrainingSpec, micro_steps: int) -> str:
    """The job as resolved, for a table's header: 'sequence 2,048, micro-batch 1 x 96, global batch 1,536,
    recompute none, bf16' (micro-batch: sequences per GPU x micro-batches a step; packed samples' length if
    set)."""
    steps = f" x {micro_steps}" if micro_steps > 1 else ""
    batch = f", global batch {training.global_batch:,}" if training.global_batch is not None else ""
    packed = f" (packed samples of {training.packed_sample_len:,})" if training.packed_sample_len else ""
    targets = f" on {', '.join(training.lora_targets)}" if training.lora_targets else ""
    lora = f", LoRA rank {training.lora_rank}{targets}" if training.lora_rank is not None else ""
    lora += f", {training.mtp_layers} MTP" if training.mtp_layers else ""
    recomputing = f" ({training.recompute_layers} layers)" if training.recompute_layers is not None else (
        f" ({', '.join(training.recompute_modules)})" if training.recompute_modules else "")
    recipe = f" ({training.fp8_recipe} scaling)" if training.precision == "fp8" else ""
    return (f"sequence {training.seq_len:,}{packed}, micro-batch {training.micro_batch}{steps}{batch}, "
            f"recompute {training.activation_checkpointing}{recomputing}, {training.precision}{recipe}{lora}")


def _table(title: str, p: StepPrediction, train_tokens: float, usd_per_gpu_hour: float | None,
           run: RunPrediction | None = None) -> Table:
    # the title's lines (the job, then how it is resolved) each shown as plain text
    table = Table("metric", "value", title=Text("\n").join(plain(line) for line in title.split("\n")),
                  title_justify="left")
    verdict = "fits" if p.fits_in_memory else "[bold red]OUT OF MEMORY[/]"
    rows = [
        ("step time", f"{p.step_time_s:.3f} s"),
        ("throughput", f"{p.tokens_per_s:,.0f} tokens/s ({p.tokens_per_s_per_gpu:,.0f} per GPU)"),
        ("model TFLOP/s per GPU", f"{p.tflops_per_gpu:.1f}  (MFU {100 * p.mfu:.1f}%)"),
        ("GPU idle (all GPUs' average)", f"{p.gpu_idle_s:.3f} s ({100 * p.gpu_idle_fraction:.1f}% of the step)"),
        *((f"  {name}: {c['gpus']:,.0f} GPUs", f"{c['idle_s']:.3f} s ({100 * c['idle_fraction']:.1f}%)")
          for name, c in p.gpu_idle_by_class.items() if len(p.gpu_idle_by_class) > 1),
        ("exposed communication", f"{p.exposed_comm_s:.3f} s"),
        ("memory per GPU", f"{p.memory_per_gpu_bytes / GIB:.1f} GiB of {p.memory_capacity_bytes / GIB:.3g} GiB: "
                           f"{verdict}"),
    ]
    for label, value in rows:
        table.add_row(label, value)
    table.add_section()
    table.add_row("[bold]where the critical GPU's time went[/]", "")
    table.add_row("  compute (incl. recompute, optimizer)", f"{p.compute_s:.3f} s")
    for name, seconds in sorted(p.comm_by_collective_s.items()):
        table.add_row(f"  waiting on {name}", f"{seconds:.3f} s")
    bubble = p.idle_breakdown_s.get("pipeline_bubble", 0.0)
    if bubble > 0.0:
        table.add_row("  pipeline bubble (waiting on other stages)", f"{bubble:.3f} s")
    other = p.critical_idle_s - p.exposed_comm_s - bubble
    if other > 1e-9:
        table.add_row("  other idle (optimizer waits)", f"{other:.3f} s")
    straggler = p.idle_breakdown_s.get("straggler_wait", 0.0)
    if straggler > 0.0:
        table.add_row("  the other GPUs wait on the straggler", f"{straggler:.3f} s")
    routing = p.idle_breakdown_s.get("routing_wait", 0.0)
    if routing > 0.0:
        table.add_row("  the other GPUs wait on the busiest expert rank", f"{routing:.3f} s")
    table.add_section()
    cost = f", ${p.gpu_hours(train_tokens) * usd_per_gpu_hour:,.0f}" if usd_per_gpu_hour is not None else ""
    table.add_row(f"to train on {train_tokens:.3g} tokens",
                  f"{p.time_to_train_s(train_tokens) / 86400:,.1f} days, {p.gpu_hours(train_tokens):,.0f} GPU-hours"
                  f"{cost}, {p.energy_kwh(train_tokens) / 1000:,.1f} MWh (GPUs)"
                  + (" without failures" if run is not None else ""))
    for label, value in run_rows(run, usd_per_gpu_hour) if run is not None else ():
        table.add_row(label, value)
    table.add_section()
    m = p.memory
    parts = (("parameters", m.parameters_bytes), ("gradients", m.gradients_bytes),
             ("optimizer states", m.optimizer_bytes), ("activations", m.activations_bytes),
             ("buffers", m.buffers_bytes), ("reserve", m.reserve_bytes))
    for part, size in parts:
        table.add_row(f"  memory: {part}", f"{size / GIB:.1f} GiB")
    return table


ReportOpt = Annotated[Path | None, typer.Option(
    help="Write an HTML report (plotly charts, self-contained: opens offline in a browser).")]


def predict(
    scenario: ScenarioArg = None, topology: TopologyOpt = None, nodes: NodesOpt = None, gpus_per_node: GpusOpt = None,
    model: ModelOpt = None, strategy: StrategyOpt = None, shard_group_gpus: ShardGroupOpt = None, tp: TpOpt = None,
    pp: PpOpt = None, cp: CpOpt = None,
    cp_comm: CpCommOpt = None, ep: EpOpt = None, etp: EtpOpt = None, ep_overlap: EpOverlapOpt = None,
    ep_dispatcher: EpDispatcherOpt = None, moe_imbalance: MoeImbalanceOpt = None,
    capacity_factor: CapacityFactorOpt = None,
    pad_to_capacity: PadToCapacityOpt = None, sequence_parallel: SequenceParallelOpt = None,
    schedule: ScheduleOpt = None, virtual_stages: VirtualStagesOpt = None, pipeline_split: PipelineSplitOpt = None,
    pipeline_layout: PipelineLayoutOpt = None, placement: PlacementOpt = None, micro_batch: MicroBatchOpt = None,
    global_batch: GlobalBatchOpt = None,
    global_batch_tokens: GlobalBatchTokensOpt = None, seq_len: SeqLenOpt = None,
    packed_sample_len: PackedSampleLenOpt = None, lora_rank: LoraRankOpt = None, lora_targets: LoraTargetsOpt = None,
    recompute: RecomputeOpt = None,
    recompute_layers: RecomputeLayersOpt = None, recompute_modules: RecomputeModulesOpt = None,
    mtp_layers: MtpLayersOpt = None,
    precision: PrecisionOpt = None, fp8_recipe: Fp8RecipeOpt = None, framework: FrameworkOpt = None,
    memory_fraction: MemoryFractionOpt = None, nccl_version: NcclVersionOpt = None,
    nccl_selection: NcclSelectionOpt = None, nccl_env: NcclEnvOpt = None,
    calibration: Annotated[Path | None, typer.Option(help=CALIBRATION_HELP)] = None,
    force_calibration: Annotated[bool, typer.Option(help=FORCE_HELP)] = False,
    measured_tokens_per_s_per_gpu: Annotated[float | None, typer.Option(
        help="Measured single-GPU tokens/s of this job (same model, micro-batch, sequence): scales compute.")] = None,
    train_tokens: TrainTokensOpt = None, failures: FailuresOpt = None, checkpoint_interval: IntervalOpt = None,
    usd_per_gpu_hour: Annotated[float | None, typer.Option(help="Price of one GPU-hour, for the cost.")] = None,
    trace: Annotated[Path | None, typer.Option(
        help="Write the step's timeline as Chrome Trace Event JSON (open in ui.perfetto.dev).")] = None,
    trace_gpus: Annotated[str | None, typer.Option(
        help="Expand the folded trace to these global GPU ranks, e.g. 0,1,8 (one process per node).")] = None,
    report: ReportOpt = None,
    link_fault: LinkFaultOpt = None,
    straggler: StragglerOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object with the metrics.")] = False,
) -> None:
    options = job_options(locals())
    if usd_per_gpu_hour is not None and not 0 <= usd_per_gpu_hour < math.inf:
        raise ConfigError(f"--usd-per-gpu-hour must be a finite number >= 0, got {usd_per_gpu_hour}")
    if trace_gpus is not None and trace is None:
        raise ConfigError("--trace-gpus picks the GPUs of --trace: give --trace FILE too")
    check_writable(trace, "trace")
    check_writable(report, "report")
    spec, topo, training, model_spec = override(load_scenario(scenario), options, global_batch, global_batch_tokens)
    spec = with_nccl(with_stragglers(spec, straggler), nccl_version, nccl_selection, nccl_env)
    topo = with_link_faults(topo, link_fault)
    for warning in job_warnings(training, model_spec, topo):
        print_message(Console(stderr=True), "warning", "yellow", warning)
    warn_of_other_selection(load_profile(calibration), spec.nccl_selection, "the job's nccl_selection")
    run = run_spec(spec.run, train_tokens, failures, checkpoint_interval)
    if run is not None:
        check_run(run, topo, training, model_spec)
    p = _run(topo, training, model_spec, calibration, force_calibration, measured_tokens_per_s_per_gpu,
             pace_of(spec, topo.nodes, topo.gpus_per_node), nccl_setup(spec))
    tokens = run.train_tokens if run is not None else 1e12  # the failure-free planning figures' token count
    outcome = predict_run_shown(run, topo, training, model_spec, p) if run is not None else None
    title = (f"{model_spec.name}, {_strategy_text(training)}{_layout_text(training)}{_routing_text(training)}, "
             f"{topo.nodes} x {topo.gpus_per_node} {topo.gpu} ({topo.name or 'cluster'}), "
             f"{training.framework or 'no framework'}{_nccl_text(spec)}")  # whose defaults filled the job
    par = training.parallel
    job = job_text(training, micro_steps_of(training, p.n_gpus // (par.tp * par.pp * par.cp)))
    header = f"{title}\n{job}"
    if trace is not None:
        ranks = _ranks(trace_gpus, p.n_gpus)
        if ranks and training.parallel.pp > 1:
            raise ConfigError("--trace-gpus: not available with pipeline parallelism (ranks of different stages "
                              "run different timelines); the folded trace shows one GPU per stage")
        label = title if ranks else f"{title}: one data-parallel GPU"
        drawn = max((span.end_s for span in p.spans), default=0.0)
        if drawn < p.step_time_s * (1.0 - 1e-9):  # steady-state micro-steps repeat: simulated once, added to the step
            label += (f" (the micro-steps simulated, to {drawn:.3f} s; the others repeat them: the step is "
                      f"{p.step_time_s:.3f} s)")
        write_text(trace, json.dumps(trace_events(p.spans, label, ranks, topo.gpus_per_node)), "trace")
    if report is not None:
        from simulator.report.html import step_report_html  # plotly: imported only when a report is asked for

        try:
            write_text(report, step_report_html(title, p, outcome, job, (tokens, usd_per_gpu_hour)), "report")
        except ConfigError:
            if trace is not None:  # the command's files come whole, or none of them
                trace.unlink(missing_ok=True)
            raise
    if as_json:
        echo = scenario_echo(spec, topo, training, model_spec, p.nccl_selection)
        out = prediction_json(p, tokens, usd_per_gpu_hour, echo)
        if outcome is not None:
            out["run"] = outcome.to_json(usd_per_gpu_hour)
        typer.echo(json.dumps(out, indent=2))
        return
    table_console().print(_table(header, p, tokens, usd_per_gpu_hour, outcome))


def scale(
    scenario: ScenarioArg = None, topology: TopologyOpt = None,
    nodes: Annotated[str, typer.Option(help="Comma-separated node counts, e.g. 1,2,4,8.")] = "1,2,4,8",
    gpus_per_node: GpusOpt = None, model: ModelOpt = None, strategy: StrategyOpt = None,
    shard_group_gpus: ShardGroupOpt = None, tp: TpOpt = None,
    pp: PpOpt = None, cp: CpOpt = None, cp_comm: CpCommOpt = None, ep: EpOpt = None, etp: EtpOpt = None,
    ep_overlap: EpOverlapOpt = None, ep_dispatcher: EpDispatcherOpt = None,
    moe_imbalance: MoeImbalanceOpt = None, capacity_factor: CapacityFactorOpt = None,
    pad_to_capacity: PadToCapacityOpt = None, sequence_parallel: SequenceParallelOpt = None,
    schedule: ScheduleOpt = None, virtual_stages: VirtualStagesOpt = None, pipeline_split: PipelineSplitOpt = None,
    pipeline_layout: PipelineLayoutOpt = None, placement: PlacementOpt = None, micro_batch: MicroBatchOpt = None,
    global_batch: Annotated[str | None, typer.Option(
        metavar="COUNT", help="Sequences per optimizer step at the first node count (4K: powers of 1000): it fixes "
        "the accumulation the other counts keep.")] = None,
    global_batch_tokens: GlobalBatchTokensOpt = None,
    grad_accum: Annotated[int | None, typer.Option(
        help="Micro-steps per optimizer step, at every node count. Default: the scenario's (its grad_accum, or "
        "its global batch over the first node count's data-parallel ranks), else 1.")] = None,
    seq_len: SeqLenOpt = None, packed_sample_len: PackedSampleLenOpt = None, lora_rank: LoraRankOpt = None,
    lora_targets: LoraTargetsOpt = None,
    recompute: RecomputeOpt = None, recompute_layers: RecomputeLayersOpt = None,
    recompute_modules: RecomputeModulesOpt = None, mtp_layers: MtpLayersOpt = None, precision: PrecisionOpt = None,
    fp8_recipe: Fp8RecipeOpt = None, framework: FrameworkOpt = None,
    memory_fraction: MemoryFractionOpt = None, nccl_version: NcclVersionOpt = None,
    nccl_selection: NcclSelectionOpt = None, nccl_env: NcclEnvOpt = None,
    calibration: Annotated[Path | None, typer.Option(help=CALIBRATION_HELP)] = None,
    force_calibration: Annotated[bool, typer.Option(help=FORCE_HELP)] = False,
    report: ReportOpt = None,
    link_fault: LinkFaultOpt = None,
    straggler: StragglerOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON rows.")] = False,
) -> None:
    options = job_options(locals())
    try:
        counts = [int(part) for part in nodes.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"--nodes: expected comma-separated integers, got {nodes!r}") from None
    if not counts or min(counts) < 1:
        raise ConfigError(f"--nodes: node counts must be >= 1, got {nodes!r}")
    if grad_accum is not None and (global_batch is not None or global_batch_tokens is not None):
        raise ConfigError("--grad-accum and --global-batch (or --global-batch-tokens) both set the accumulation: "
                          "give one of them")
    loaded = load_scenario(scenario)
    jobs: list[ScaledJob] = []
    for count in counts:
        first = not jobs  # the global batch is the first count's; the others keep its accumulation
        spec, topo, training, model_spec = override(loaded, {**options, "nodes": count},
                                                    global_batch if first else None,
                                                    global_batch_tokens if first else None)
        jobs.append((count, with_nccl(with_stragglers(spec, straggler), nccl_version, nccl_selection, nccl_env),
                     with_link_faults(topo, link_fault), training, model_spec))
    rows = [(job[0], p) for job, p in weak_scaling(jobs, grad_accum, calibration, force_calibration)]
    base = rows[0][1].tokens_per_s_per_gpu
    if report is not None:
        title = (f"{model_spec.name}, {training.strategy.kind}, {nodes} nodes x {topo.gpus_per_node} {topo.gpu} "
                 f"({topo.name or 'cluster'}): scaling")
        from simulator.report.html import scale_report_html  # plotly: imported only when a report is asked for

        write_text(report, scale_report_html(title, rows), "report")
    if as_json:
        typer.echo(json.dumps({"rows": [scale_row_json(n, p, rows[0][1]) for n, p in rows]}, indent=2))
        return
    table = Table("nodes", "GPUs", "step s", "tokens/s", "tokens/s/GPU", "MFU", "idle", "scaling eff.",
                  title="Scaling efficiency (per-GPU throughput vs the first row)")
    for n, p in rows:
        table.add_row(str(n), str(p.n_gpus), f"{p.step_time_s:.3f}", f"{p.tokens_per_s:,.0f}",
                      f"{p.tokens_per_s_per_gpu:,.0f}", f"{100 * p.mfu:.1f}%", f"{100 * p.gpu_idle_fraction:.1f}%",
                      f"{100 * p.tokens_per_s_per_gpu / base:.1f}%")
    table_console().print(table)
