"""A sweep: one base scenario and the axes along which it varies (DESIGN.md section 12).

`expand` turns a `SweepSpec` into fully-resolved `Scenario`s, each with a stable content hash that
names it in result files (resume skips the hashes already written). Axis paths are dotted field
paths of the scenario (`nodes`, `topology`, `training.strategy.kind`, ...) or of its topology
(`inter_node.transport`, `gpus_per_node`, ...), which apply to the topology preset as overrides.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from simulator.collectives.nccl_setup import DEFAULT_NCCL, NcclSetup
from simulator.core.errors import ClusterSimError, ConfigError, config_error_from
from simulator.scenario import ScenarioSpec, nccl_setup, pace_of, resolve_scenario, scenario_from_data
from simulator.training.pace import NOMINAL, Pace
from topologies.presets import load_preset
from topologies.spec import TopologySpec
from workloads.spec import ModelSpec, TrainingSpec

# Topology fields a sweep may not vary through overrides: `name`/`nodes` are scenario fields, the
# description is a label.
_TOPOLOGY_LABELS = ("name", "nodes", "description")


class SweepSpec(BaseModel):
    """A base scenario and the values to try: a product (or zip) of axes, or an explicit list."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    base: ScenarioSpec = Field(description="The scenario every point starts from (a `clustersim predict` scenario).")
    axes: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="Dotted field path -> values to try, e.g. nodes: [1, 2, 4], training.strategy.kind: [fsdp, ddp], "
        "inter_node.transport: [ib, roce] (topology fields override the preset).")
    mode: Literal["product", "zip"] = Field(
        default="product", description="product: every combination of the axes; zip: the lists taken together.")
    scenarios: list[dict[str, Any]] | None = Field(
        default=None, description="An explicit list of {dotted path: value} overrides, instead of axes.")

    @model_validator(mode="after")
    def _check(self) -> SweepSpec:
        if self.scenarios is not None and self.axes:
            raise ValueError("give axes or scenarios, not both")
        for path, values in self.axes.items():
            if not values:
                raise ValueError(f"axes.{path}: give at least one value")
        if self.mode == "zip" and len({len(values) for values in self.axes.values()}) > 1:
            lengths = ", ".join(f"{path}: {len(values)}" for path, values in self.axes.items())
            raise ValueError(f"mode zip needs axes of equal length ({lengths})")
        return self


@dataclass(frozen=True)
class Scenario:
    """One point of a sweep: its axis values and the resolved specs (or why they could not be resolved)."""

    scenario_hash: str
    axes: dict[str, Any]
    topology: TopologySpec | None
    training: TrainingSpec | None
    model: ModelSpec | None
    pace: Pace = NOMINAL  # the GPUs' compute factors (stragglers, jitter)
    error: str | None = None
    nccl: NcclSetup = DEFAULT_NCCL  # the job's NCCL: environment, release, selection


def sweep_from_data(data: object, source: str) -> SweepSpec:
    """Validate sweep YAML data; ConfigError names the field path."""
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise config_error_from(exc, source) from None


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside a field annotation (`StrategySpec`, `StragglerSpec | None`), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, UnionType):
        for arg in get_args(annotation):
            found = _submodel(arg)
            if found is not None:
                return found
    return None


def _walk(model: type[BaseModel], parts: list[str], path: str) -> None:
    """ConfigError unless `parts` names a field of `model` (through nested models)."""
    for depth, part in enumerate(parts):
        if part not in model.model_fields:
            valid = ", ".join(sorted(model.model_fields))
            where = ".".join(parts[:depth]) or "the scenario"
            raise ConfigError(f"axis {path!r}: {where} has no field {part!r} (valid: {valid})")
        inner = _submodel(model.model_fields[part].annotation)
        if depth + 1 < len(parts) and inner is None:
            raise ConfigError(f"axis {path!r}: {'.'.join(parts[:depth + 1])} has no sub-fields")
        if inner is not None:
            model = inner


def check_axis_path(path: str) -> None:
    """ConfigError naming `path` unless it is a scenario field or a topology override."""
    parts = path.split(".")
    if parts[0] == "topology" and len(parts) > 1:
        raise ConfigError(f"axis {path!r}: vary topology fields directly (e.g. inter_node.transport), "
                          "or `topology` as a whole (preset names)")
    if parts[0] in ScenarioSpec.model_fields:
        _walk(ScenarioSpec, parts, path)
    elif parts[0] in TopologySpec.model_fields and parts[0] not in _TOPOLOGY_LABELS:
        _walk(TopologySpec, parts, path)
    else:
        valid = sorted({*ScenarioSpec.model_fields, *TopologySpec.model_fields} - {"description"})
        raise ConfigError(f"axis {path!r}: unknown field {parts[0]!r}; a path starts with one of {', '.join(valid)}")


def _set(data: dict[str, Any], parts: list[str], value: Any, path: str) -> None:
    """Set data[a][b]... = value, creating mappings on the way."""
    for part in parts[:-1]:
        inner = data.setdefault(part, {})
        if not isinstance(inner, dict):
            raise ConfigError(f"axis {path!r}: the base's {part} is {inner!r}, not a mapping of fields")
        data = inner
    data[parts[-1]] = value


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


def _digest(data: Any) -> str:
    return hashlib.sha256(_canonical(data).encode()).hexdigest()[:16]


def _resolve(base: dict[str, Any], overrides: dict[str, Any]) -> Scenario:
    """Apply `overrides` to the base scenario data and resolve presets into specs."""
    data = json.loads(json.dumps(base))  # a deep copy of plain data
    topology_overrides: dict[str, Any] = {}
    for path, value in overrides.items():
        parts = path.split(".")
        target = data if parts[0] in ScenarioSpec.model_fields else topology_overrides
        _set(target, parts, value, path)
    try:
        if topology_overrides and isinstance(data.get("topology"), dict):
            for key, value in topology_overrides.items():  # nested mappings merge key by key
                inner = data["topology"].get(key)
                data["topology"][key] = {**inner, **value} if isinstance(inner, dict) and isinstance(value, dict) \
                    else value
            topology_overrides = {}
        spec = scenario_from_data(data, "sweep scenario")
        topology, training, model = resolve_scenario(spec)
        if topology_overrides:
            name = spec.topology if isinstance(spec.topology, str) else ""
            topology = load_preset(name, nodes=spec.nodes, **topology_overrides)
    except ClusterSimError as exc:
        return Scenario(_digest({"unresolved": data, "topology_overrides": topology_overrides}), overrides,
                        None, None, None, error=str(exc))
    try:
        pace = pace_of(spec, topology.nodes, topology.gpus_per_node)  # stragglers and jitter
    except ClusterSimError as exc:
        return Scenario(_digest({"unresolved": data, "topology_overrides": topology_overrides}), overrides,
                        None, None, None, error=str(exc))
    resolved = {"topology": topology.model_dump(mode="json"),
                "training": {**training.model_dump(mode="json"), "model": model.model_dump(mode="json")},
                "straggler_slowdown": pace.slowdown, "nccl_env": dict(sorted(spec.nccl_env.items()))}
    if pace.slow_ranks:  # placed stragglers (scenarios without keep their hash)
        resolved["slow_ranks"] = [list(item) for item in pace.slow_ranks]
    if spec.nccl_version is not None or spec.nccl_selection not in (None, "model"):  # (those without keep theirs)
        resolved["nccl"] = {"version": spec.nccl_version, "selection": spec.nccl_selection}
    return Scenario(_digest(resolved), overrides, topology, training, model, pace, nccl=nccl_setup(spec))


def _points(spec: SweepSpec) -> Iterator[dict[str, Any]]:
    if spec.scenarios is not None:
        yield from (dict(point) for point in spec.scenarios)
        return
    if not spec.axes:
        yield {}
        return
    paths, values = list(spec.axes), list(spec.axes.values())
    combos = zip(*values, strict=True) if spec.mode == "zip" else itertools.product(*values)
    yield from (dict(zip(paths, combo, strict=True)) for combo in combos)


def count_points(spec: SweepSpec) -> int:
    """How many axis points the sweep has (before identical scenarios merge), without resolving any."""
    if spec.scenarios is not None:
        return len(spec.scenarios)
    lengths = [len(values) for values in spec.axes.values()]
    if spec.mode == "zip":
        return lengths[0] if lengths else 1
    return math.prod(lengths)


def point_at(spec: SweepSpec, index: int) -> dict[str, Any]:
    """The `index`-th axis point, in expansion order (the last axis varies fastest), without enumerating."""
    if spec.scenarios is not None:
        return dict(spec.scenarios[index])
    if spec.mode == "zip":
        return {path: values[index] for path, values in spec.axes.items()}
    point: dict[str, Any] = {}
    for path, values in reversed(spec.axes.items()):
        index, digit = divmod(index, len(values))
        point[path] = values[digit]
    return dict(reversed(point.items()))


def axis_paths(spec: SweepSpec) -> list[str]:
    """The dotted paths the sweep varies, in the order they first appear."""
    if spec.scenarios is None:
        return list(spec.axes)
    return list(dict.fromkeys(path for point in spec.scenarios for path in point))


def check_axis_paths(spec: SweepSpec) -> None:
    """ConfigError naming the first axis path that is not a scenario field or a topology override."""
    for path in axis_paths(spec):
        check_axis_path(path)


def resolve_point(spec: SweepSpec, point: dict[str, Any]) -> Scenario:
    """One axis point of the sweep as a resolved scenario (or one carrying why it does not resolve)."""
    return _resolve(spec.base.model_dump(mode="json", exclude_unset=True), point)  # defaults re-apply


def iter_scenarios(spec: SweepSpec) -> Iterator[Scenario]:
    """The sweep's scenarios, resolved one at a time in axis order (the last axis varies fastest), each
    hash once; a bad axis path is a ConfigError before the first.

    `scenario_hash` is the first 16 hex digits of the SHA-256 of the canonical JSON (sorted keys)
    of the resolved topology, training job (model inline) and pace slowdown (stragglers, jitter): labels such as
    the scenario name do not change it, and two axis points resolving to the same job share it
    (the first is kept). A point that does not resolve (an unknown model preset, an invalid value)
    comes with its `error`, to be reported, not run."""
    check_axis_paths(spec)
    base = spec.base.model_dump(mode="json", exclude_unset=True)  # what the user wrote: defaults re-apply
    seen: set[str] = set()
    for point in _points(spec):
        scenario = _resolve(base, point)
        if scenario.scenario_hash not in seen:
            seen.add(scenario.scenario_hash)
            yield scenario


def expand(spec: SweepSpec) -> list[Scenario]:
    """Every scenario of the sweep (iter_scenarios, all at once)."""
    return list(iter_scenarios(spec))
