"""Faults and stragglers the short way: `--link-fault DEVICE=FACTOR` and `--straggler GPU=SLOWDOWN`,
shared by predict, scale, compare and collective. They add to what the scenario or topology says."""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import ValidationError

from simulator.core.errors import ConfigError, config_error_from
from simulator.scenario import ScenarioSpec, StragglerSpec, stragglers_of
from topologies.spec import TopologySpec, validate_topology_spec

LinkFaultOpt = Annotated[list[str] | None, typer.Option(
    "--link-fault", metavar="DEVICE=FACTOR",
    help="Run every link of DEVICE at FACTOR of its rate (0 = failed; repeatable): s3/nic2=0.5 (one NIC), "
    "nic3=0.5 (rail 3 on every server), s5/gpu1=0.5, leaf0=0.5, spine0=0.")]
StragglerOpt = Annotated[list[str] | None, typer.Option(
    "--straggler", metavar="GPU=SLOWDOWN",
    help="A GPU computing SLOWDOWN times slower (repeatable): s3/gpu2=1.2 (one GPU), s3=1.1 (every GPU of "
    "server 3), 17=1.15 (rank 17).")]


def _pairs(values: list[str] | None, flag: str, example: str) -> list[tuple[str, float]]:
    """`NAME=NUMBER` strings as (name, number); ConfigError naming the flag otherwise."""
    pairs = []
    for value in values or []:
        name, sep, number = value.rpartition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            pairs.append((name.strip(), float(number)))
        except ValueError:
            raise ConfigError(f"{flag} {value!r}: expected {example}") from None
    return pairs


def with_link_faults(topology: TopologySpec, values: list[str] | None) -> TopologySpec:
    """`topology` with the --link-fault values added to its link_faults."""
    faults = [{"device": device, "factor": factor}
              for device, factor in _pairs(values, "--link-fault", "DEVICE=FACTOR, e.g. s3/nic2=0.5")]
    if not faults:
        return topology
    data = topology.model_dump()
    return validate_topology_spec({**data, "link_faults": [*data["link_faults"], *faults]}, "--link-fault")


def with_stragglers(scenario: ScenarioSpec, values: list[str] | None) -> ScenarioSpec:
    """`scenario` with the --straggler values added to its stragglers (each one GPU, server or rank)."""
    added = []
    for device, slowdown in _pairs(values, "--straggler", "GPU=SLOWDOWN, e.g. s3/gpu2=1.2"):
        try:
            added.append(StragglerSpec(device=device, slowdown=slowdown))
        except ValidationError as exc:
            raise config_error_from(exc, f"--straggler {device}={slowdown:g}") from None
    if not added:
        return scenario
    return scenario.model_copy(update={"stragglers": (*stragglers_of(scenario), *added)})
