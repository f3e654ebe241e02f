"""`clustersim schema`: the JSON Schema of the input files, from the same pydantic specs that
validate them (every field with its type, default and description), for editors and scripts."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from pydantic import BaseModel

from simulator.cli.common import reflowed
from simulator.core.errors import ConfigError
from simulator.scenario import ScenarioSpec
from simulator.sweep.spec import SweepSpec
from topologies.spec import TopologySpec
from workloads.spec import ModelSpec, TrainingSpec

SPECS: dict[str, type[BaseModel]] = {
    "scenario": ScenarioSpec, "topology": TopologySpec, "training": TrainingSpec, "model": ModelSpec,
    "sweep": SweepSpec,
}

SCHEMA_HELP = f"""Print the JSON Schema of an input file: {', '.join(SPECS)} (default: scenario).

Examples:

  clustersim schema > scenario.schema.json

  clustersim schema training | jq '.$defs.ParallelSpec.properties | keys'
"""


def schema(kind: Annotated[str, typer.Argument(help=f"One of: {', '.join(SPECS)}.")] = "scenario") -> None:
    if kind not in SPECS:
        raise ConfigError(f"schema: unknown kind {kind!r}; known: {', '.join(SPECS)}")
    typer.echo(json.dumps(SPECS[kind].model_json_schema(), indent=2))


def register(app: typer.Typer) -> None:
    """Add `schema` to the app."""
    app.command("schema", help=reflowed(SCHEMA_HELP))(schema)
