"""`clustersim presets` and `clustersim topology show`: what clusters (and models) ship, and what one adds up to.

Errors are ClusterSimError subclasses (unknown preset, bad YAML field); the main app turns them into
one line and exit code 2.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from simulator.cli.common import plain, print_message, table_console
from simulator.core.errors import ConfigError
from simulator.core.units import Bps_to_GBps
from topologies.build import build
from topologies.hardware import gpu_spec, known_gpus
from topologies.presets import list_presets, load_preset, resolve_topology
from topologies.spec import TopologySpec
from topologies.summary import TopologySummary, summarize
from workloads.presets import list_models


def _network(spec: TopologySpec) -> str:
    net = spec.inter_node
    if net is None:
        return "-"
    presumed = " (presumed)" if net.nic_gbps_presumed else ""
    return f"{net.nics_per_node}x {net.nic_gbps:g}G {net.transport}{presumed}"


def _tflops(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _gpu_table() -> None:
    """The GPU table as a terminal table: what a topology's `gpu` takes and the figures a step is priced on."""
    table = Table(title="GPUs (a topology's gpu)")
    table.add_column("name", no_wrap=True)
    for header in ("generation", "memory GiB", "HBM GB/s", "bf16 TFLOP/s", "fp8 TFLOP/s", "bf16 matmul TFLOP/s",
                   "NVLink GB/s", "TDP W"):
        table.add_column(header, justify="right")
    for name in known_gpus():
        gpu = gpu_spec(name)
        table.add_row(name, gpu.arch, f"{gpu.memory_gib:g}", f"{gpu.hbm_GBps:,.0f}", _tflops(gpu.bf16_tflops),
                      _tflops(gpu.fp8_tflops),
                      _tflops(gpu.mamf_bf16_tflops) + (" (presumed)" if gpu.mamf_presumed else ""),
                      f"{gpu.nvlink_GBps_per_direction:g}" if gpu.nvlinks else "-", f"{gpu.tdp_w:g}")
    table_console().print(table)


def presets(
    models: Annotated[bool, typer.Option(
        "--models", help="List the model presets instead: parameters (active ones for a mixture of experts) "
        "and shape.")] = False,
    gpus: Annotated[bool, typer.Option(
        "--gpus", help="List the GPU table instead: generation, memory, HBM bandwidth, dense bf16 and fp8 peaks, "
        "the best-shape bf16 matmul rate measured where one is published (presumed where marked; it scales the "
        "part's GEMM rate against its generation's reference part), NVLink bandwidth per direction and TDP.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the presets as a JSON list.")] = False,
) -> None:
    """List the topology presets: GPUs per node, GPU, intra-node link, network and description.

    Examples:

      clustersim presets

      clustersim presets --models --json

      clustersim presets --gpus            # the GPUs a topology's gpu field takes, with their figures
    """
    if models and gpus:
        raise ConfigError("presets: --models and --gpus list different tables; give one")
    if gpus and as_json:
        typer.echo(json.dumps([dataclasses.asdict(gpu_spec(name)) for name in known_gpus()], indent=2))
        return
    if gpus:
        _gpu_table()
        return
    if models and as_json:
        typer.echo(json.dumps([{"name": name, "summary": summary} for name, summary in list_models()], indent=2))
        return
    if models:
        table = Table(title="model presets (--model NAME)")
        table.add_column("name", no_wrap=True)  # what to type: never cut, whatever the terminal's width
        table.add_column("parameters and shape")
        for name, summary in list_models():
            table.add_row(name, summary)
        table_console().print(table)
        return
    table = Table(title="topology presets (--topology NAME)")
    table.add_column("name", no_wrap=True)
    table.add_column("GPUs/node")
    for header in ("GPU", "intra-node", "network", "description"):
        table.add_column(header, overflow="fold")  # wrapped, not cut to an ellipsis
    specs = [(name, description, load_preset(name)) for name, description in list_presets()]
    if as_json:
        typer.echo(json.dumps([{"name": name, "description": description, **spec.model_dump(mode="json")}
                               for name, description, spec in specs], indent=2))
        return
    for name, description, spec in specs:
        table.add_row(name, str(spec.gpus_per_node), spec.gpu, spec.intra_node, _network(spec), description)
    table_console().print(table)


def _nvlink_domains(spec: TopologySpec) -> list[tuple[str, str]]:
    """A row for NVLink domains that span servers (NVL72 racks): how many, of how many GPUs each."""
    domain, n_gpus = spec.gpus_per_nvlink_domain, spec.nodes * spec.gpus_per_node
    if domain <= spec.gpus_per_node and spec.intra_node != "nvlink5-nvl72":
        return []
    return [("NVLink domains", f"{max(1, n_gpus // domain)} x {min(domain, n_gpus)} GPUs")]


def _summary_table(spec: TopologySpec, summary: TopologySummary) -> Table:
    title = f"{spec.name or 'topology'}: {summary.servers} x {summary.gpus_per_server} GPUs"
    table = Table("", "value", title=plain(title))
    rows = [
        ("GPU", summary.gpu),
        ("GPUs", str(summary.n_gpus)),
        ("intra-node", summary.intra_node),
        *_nvlink_domains(spec),
        ("network", _network(spec)),
        ("fabric", f"{summary.fabric}, {summary.routing} routing" if summary.fabric else "-"),
        ("intra-node bandwidth per GPU", f"{Bps_to_GBps(summary.intra_bandwidth_Bps):g} GB/s per direction"),
        ("NIC bandwidth per server", f"{Bps_to_GBps(summary.nic_bandwidth_per_server_Bps):g} GB/s per direction"),
        ("bisection bandwidth", f"{Bps_to_GBps(summary.bisection_bandwidth_Bps):g} GB/s per direction"),
        ("devices", ", ".join(f"{kind} {count}" for kind, count in summary.devices_by_kind.items())),
    ]
    rows += [
        (f"{kind} links", f"{totals.count} directed, {Bps_to_GBps(totals.total_bandwidth_Bps):g} GB/s total")
        for kind, totals in summary.links_by_kind.items()
    ]
    for label, value in rows:
        table.add_row(label, value)
    return table


def show(
    name: Annotated[str, typer.Argument(help="Preset name (see `clustersim presets`) or a topology YAML file.")],
    nodes: Annotated[int | None, typer.Option("--nodes", help="Servers (default: the preset's).")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the summary as one JSON object.")] = False,
) -> None:
    """Build a topology and print its summary: devices, links, per-GPU and per-server bandwidth, bisection."""
    spec = resolve_topology(name, nodes)
    if note := spec.uneven_nvlink_note:
        print_message(Console(stderr=True), "warning", "yellow", note)
    summary = summarize(build(spec))
    if json_output:
        typer.echo(json.dumps({"spec": spec.model_dump(mode="json"), **summary.to_dict()}, indent=2))
    else:
        table_console().print(_summary_table(spec, summary))


def register(app: typer.Typer) -> None:
    """Add `presets` and the `topology` group (`topology show`) to `app`."""
    app.command("presets")(presets)
    group = typer.Typer(help="Inspect cluster topologies.", no_args_is_help=True)
    group.command("show")(show)
    app.add_typer(group, name="topology")
