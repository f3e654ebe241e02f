"""`clustersim import`: a torchtitan, DeepSpeed or Megatron-LM / NeMo training config as a scenario YAML.

The importer of the format (simulator.importers) reads the job; the cluster comes from --topology and --nodes;
the scenario is validated as `predict` would read it before it is written (atomically, never over an existing
file without --force) or printed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console

from simulator.cli.common import print_message, printable, reflowed, write_text
from simulator.collectives.comm import comm_view
from simulator.core.errors import ConfigError
from simulator.core.input_file import read_input_text
from simulator.core.yaml_text import package_yaml_texts
from simulator.importers.deepspeed import import_deepspeed
from simulator.importers.megatron import import_megatron
from simulator.importers.result import ImportedJob
from simulator.importers.torchtitan import import_torchtitan
from simulator.scenario import ScenarioSpec, resolve_scenario, scenario_from_data
from simulator.training.predict import job_layout, micro_steps_of
from topologies.build import build_representative
from topologies.presets import resolve_topology
from workloads.model import transformer
from workloads.presets import resolve_model
from workloads.spec import Checkpointing, ModelSpec

Importer = Callable[[str, str, int, ModelSpec | None], ImportedJob]
IMPORTERS: dict[str, Importer] = {
    "torchtitan": import_torchtitan, "deepspeed": import_deepspeed, "megatron": import_megatron,
    "nemo": import_megatron}
MAX_CONFIG_BYTES = 256 * 2**10  # a training config is a few KB (GPT-3's Megatron script: 3 KB); bounds the work
MAX_UNKNOWN_SHOWN = 20  # keys named in the unknown-keys warning; the rest counted

IMPORT_HELP = """Turn another tool's training config into a scenario YAML for `clustersim predict`.

Formats: torchtitan (a job TOML), deepspeed (a ds_config JSON; it names no model, so --model is required),
megatron (a file of pretrain_gpt.py arguments, as a launch script writes them; NeMo's Hydra overrides
trainer.* / model.* too; nemo is the same reader). The cluster is --topology and --nodes. Settings the
config leaves out take the tool's own defaults; keys that do not change a step's time are skipped, and
any other key clustersim does not read is listed in one warning. The scenario's comments say how the
config was read (docs/importers.md).

Examples:

  clustersim import torchtitan llama3_8b.toml --topology dgx-h100 --nodes 8 -o llama3-8b.yaml

  clustersim import deepspeed ds_config.json --model llama2-13b --topology dgx-h100 --nodes 4

  clustersim import megatron gpt3_175b.sh --topology dgx-h100 --nodes 128 -o gpt3.yaml
"""


def import_config(
    kind: Annotated[str, typer.Argument(help="torchtitan, deepspeed, megatron or nemo.", show_default=False)],
    config: Annotated[Path, typer.Argument(help="The config file.", show_default=False)],
    topology: Annotated[str, typer.Option(help="Topology preset name or YAML file (see `clustersim "
                                          "presets`).")] = "dgx-h100",
    nodes: Annotated[int | None, typer.Option(min=1, help="Nodes (servers); default: the topology's.")] = None,
    model: Annotated[str | None, typer.Option(help="Model preset, model YAML or HuggingFace config.json; replaces "
                                              "the config's model (required for deepspeed).")] = None,
    recompute: Annotated[Checkpointing | None, typer.Option(
        help="Activation checkpointing, where the config cannot say (DeepSpeed: the model's code decides).")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the scenario here (default: print "
                                                "it).")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing --output file.")] = False,
) -> None:
    if kind.lower() not in IMPORTERS:
        raise ConfigError(f"import: unknown format {kind!r}; known: {', '.join(IMPORTERS)}")
    if output is not None and output.exists() and output.is_file() and not force:
        raise ConfigError(f"cannot write scenario {output}: it exists (--force overwrites it)")
    cluster = resolve_topology(topology, nodes)
    model_spec = resolve_model(model) if model is not None else None
    text = read_input_text(config, f"{kind} config")
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"cannot read {kind} config {config}: larger than {MAX_CONFIG_BYTES // 2**10} KiB "
                          "(a training config is a few KB)")
    job = IMPORTERS[kind.lower()](text, str(config), cluster.nodes * cluster.gpus_per_node, model_spec)
    scenario = _scenario(kind.lower(), config, topology, cluster.nodes, job, model, model_spec, recompute)
    try:
        _check_layout(scenario_from_data(scenario, "scenario"))
    except ConfigError as exc:
        raise ConfigError(f"{config}: as imported, {exc}") from None
    _warn(config, job)
    document = _document(kind.lower(), config, job, scenario)
    if output is None:
        typer.echo(document, nl=False)
    else:
        write_text(output, document, "scenario")


def _scenario(kind: str, config: Path, topology: str, nodes: int, job: ImportedJob, model: str | None,
              model_spec: ModelSpec | None, recompute: str | None) -> dict[str, Any]:
    """The scenario's data: preset names kept as names, a topology or model file's spec written inline."""
    topology_value: Any = topology
    if topology not in package_yaml_texts("topologies", "presets"):
        topology_value = resolve_topology(topology).model_dump(mode="json", exclude_defaults=True)
    model_value: Any = job.model
    if model_spec is not None:
        model_value = model if model in package_yaml_texts("workloads", "presets") else \
            model_spec.model_dump(mode="json", exclude_defaults=True)
    if model_value is None:
        raise ConfigError(f"{config}: a {kind} config names no model; give --model NAME|FILE")
    training = {"model": model_value, **job.training}
    if recompute is not None:  # replaces the config's recomputation, its count of recomputing layers included
        training["activation_checkpointing"] = recompute
        training.pop("recompute_layers", None)
        training.pop("recompute_modules", None)
    return {"name": f"{printable(config.name)} ({kind})", "topology": topology_value, "nodes": nodes,
            "training": training}


def _check_layout(scenario: ScenarioSpec) -> None:
    """ConfigError for a job `predict` would refuse before simulating: a layout that does not fit the cluster or
    the model, a batch that does not split into micro-batches (the checks predict makes first)."""
    topology, training, model = resolve_scenario(scenario)
    layout = job_layout(training, transformer(model, training.mtp_layers), comm_view(build_representative(topology)))
    micro_steps_of(training, layout.dp)


def _warn(config: Path, job: ImportedJob) -> None:
    """One line on stderr per warning, and one naming the keys not read."""
    err = Console(stderr=True)
    for warning in job.warnings:
        print_message(err, "warning", "yellow", f"{config}: {warning}")
    if job.unknown:
        print_message(err, "warning", "yellow", f"{config}: not read (clustersim does not know them): "
                      f"{_listed(job.unknown)}")


def _listed(keys: list[str]) -> str:
    """The first MAX_UNKNOWN_SHOWN keys, and how many more."""
    more = f" and {len(keys) - MAX_UNKNOWN_SHOWN} more" if len(keys) > MAX_UNKNOWN_SHOWN else ""
    return ", ".join(keys[:MAX_UNKNOWN_SHOWN]) + more


def _document(kind: str, config: Path, job: ImportedJob, scenario: dict[str, Any]) -> str:
    """The scenario as YAML, headed by comments saying where it came from and how the config was read."""
    lines = [f"# Imported by `clustersim import {kind}` from {printable(config)}."]
    lines += [f"# - {printable(note)}" for note in (*job.notes, *job.warnings)]
    if job.unknown:
        lines.append(f"# - not read: {printable(_listed(job.unknown))}")
    return "\n".join(lines) + "\n" + yaml.safe_dump(scenario, sort_keys=False, width=100)


def register(app: typer.Typer) -> None:
    """Add `import` to the app."""
    app.command("import", help=reflowed(IMPORT_HELP))(import_config)
