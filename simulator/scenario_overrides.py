"""A scenario with some of its fields replaced, as `clustersim predict`'s options replace them and as the
Python API's `Scenario(...)` and `Scenario.replace(...)` do: the cluster (a preset, a topology file or
spec, its node count, GPUs per node, GPU model, link faults), the model, and the job's fields (strategy,
parallel degrees, batch, sequence, recomputation, MoE routing, any other training field).

With a model and no scenario file only the embedded scenario's cluster is kept: its job's fields
(sequence, batch, recomputation, strategy) were chosen for its model. What the job then leaves unstated is
filled in by `complete_training` (docs/scenarios.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from simulator.core.errors import config_error_from
from simulator.core.mappings import merged
from simulator.scenario import DEFAULT_SCENARIO, ScenarioSpec, complete_training, scenario_specs
from topologies.presets import load_preset, resolve_topology
from topologies.spec import TopologySpec, nics_follow_gpus, validate_topology_spec
from workloads.presets import resolve_model
from workloads.spec import ModelSpec, TrainingSpec

PARALLEL_OPTIONS = ("tp", "pp", "cp", "cp_comm", "ep", "etp", "ep_comm_overlap", "ep_dispatcher", "sequence_parallel",
                    "pipeline_schedule", "virtual_stages", "pipeline_split", "pipeline_layout", "placement")
ROUTING_OPTIONS = ("load_imbalance", "capacity_factor", "pad_to_capacity")
TOPOLOGY_OPTIONS = ("nodes", "gpus_per_node", "gpu", "link_faults")  # fields of the topology replaced in place
JOB_OPTIONS = ("micro_batch", "global_batch", "seq_len", "packed_sample_len", "lora_rank", "lora_targets",
               "recompute_layers", "recompute_modules", "mtp_layers", "precision", "fp8_recipe", "memory_fraction")


def topology_of(value: str | Mapping[str, Any] | TopologySpec, nodes: int | None) -> TopologySpec:
    """A cluster: a preset name or topology YAML file, a TopologySpec, a topology's fields, or a preset with
    some fields replaced ({preset: dgx-h100, inter_node: {nic_gbps: 200}}); `nodes` applied (None: its own)."""
    if isinstance(value, str):
        return resolve_topology(value, nodes)
    if isinstance(value, Mapping) and "preset" in value:
        overrides = {key: item for key, item in value.items() if key != "preset"}
        return load_preset(str(value["preset"]), nodes=nodes, **overrides)
    data = value.model_dump() if isinstance(value, TopologySpec) else dict(value)
    return validate_topology_spec({**data, **({"nodes": nodes} if nodes is not None else {})}, "topology")


def model_of(value: str | Mapping[str, Any] | ModelSpec) -> ModelSpec:
    """A model: a preset name, a model YAML file or HuggingFace config.json, a ModelSpec or its fields."""
    if isinstance(value, str):
        return resolve_model(value)
    if isinstance(value, ModelSpec):
        return value
    try:
        return ModelSpec.model_validate(dict(value))
    except ValidationError as exc:
        raise config_error_from(exc, "model") from None


def _given(options: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: options[key] for key in keys if options.get(key) is not None}


def apply_options(scenario: ScenarioSpec | None, options: Mapping[str, Any], source: str = "command line"
                  ) -> tuple[ScenarioSpec, TopologySpec, TrainingSpec, ModelSpec]:
    """Apply `options` (module docstring; None values leave a field as it is) to the scenario (None: the
    embedded one), validating every changed field, and fill what the job leaves unstated (complete_training).
    `strategy` is a kind (fsdp) or a strategy's fields, `shard_group_gpus` its HSDP shard group
    or ZeRO-1 optimizer group; `recompute` is
    activation_checkpointing; `training` holds any other training fields (nested mappings merge key by key).
    ConfigError names `source` and the field."""
    spec = scenario or DEFAULT_SCENARIO
    topology, training, model = scenario_specs(spec)
    if scenario is None and any(value is not None for value in options.values()):
        spec = spec.model_copy(update={"name": None})  # no longer the embedded scenario's job
    if options.get("topology") is not None:  # another cluster: its own node count unless given
        topology = topology_of(options["topology"], options.get("nodes"))
    updates = _given(options, TOPOLOGY_OPTIONS)
    if updates:
        base = topology.model_dump()
        topology = validate_topology_spec(nics_follow_gpus(base, merged(base, updates), updates), source)
    if options.get("model") is not None:
        model = model_of(options["model"])
        if scenario is None:
            training = TrainingSpec(model=model.name)
    train = merged(options.get("training") or {}, _given(options, JOB_OPTIONS))
    if options.get("recompute") is not None:  # replaces the job's recomputation, its count of layers too
        train["activation_checkpointing"] = options["recompute"]
        train.setdefault("recompute_layers", None)
        train.setdefault("recompute_modules", None)
    if options.get("framework") is not None:
        train["framework"] = options["framework"]
    strategy, shard = options.get("strategy"), options.get("shard_group_gpus")
    if strategy is not None or shard is not None:
        given = {} if strategy is None else {"kind": strategy} if isinstance(strategy, str) else dict(strategy)
        kept = training.strategy.model_dump(exclude_unset=True)
        if given.get("kind", training.strategy.kind) != training.strategy.kind:
            kept["shard_group_gpus"] = None  # the old strategy's group (HSDP's, ZeRO-1's) is not the new one's
        train["strategy"] = {**kept, **given, **({"shard_group_gpus": shard} if shard is not None else {})}
    for section, keys in (("parallel", PARALLEL_OPTIONS), ("routing", ROUTING_OPTIONS)):
        values = _given(options, keys)
        if values:
            train[section] = {**getattr(training, section).model_dump(exclude_unset=True), **train.get(section, {}),
                              **values}
    if train:
        try:
            training = TrainingSpec.model_validate({**merged(training.model_dump(exclude_unset=True), train),
                                                    "model": model.name})
        except ValidationError as exc:
            raise config_error_from(exc, f"{source}: training") from None
    return spec, topology, complete_training(training, model, topology), model

