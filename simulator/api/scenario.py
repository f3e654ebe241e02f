"""`Scenario`: a training job on a cluster, as the Python API takes it.

A scenario is the embedded default (`Scenario()`), a scenario file (`Scenario.from_yaml`) or its data
(`Scenario.from_dict`), with options applied exactly as `clustersim predict`'s options apply to a file
(simulator.scenario_overrides): `Scenario(model="llama2-70b", nodes=16, tp=8)` is
`clustersim predict --model llama2-70b --nodes 16 --tp 8`, and `Scenario.from_yaml("x.yaml").replace(nodes=16)`
is `clustersim predict x.yaml --nodes 16`. It is immutable; `replace` returns a new one. What the job
leaves unstated is filled in as the CLI fills it (docs/scenarios.md); `to_dict()` shows the result.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simulator.core.errors import config_error_from
from simulator.core.input_file import read_input_text
from simulator.core.mappings import merged
from simulator.core.yaml_text import load_yaml_text
from simulator.scenario import ScenarioSpec, StragglerSpec, scenario_echo, scenario_from_data
from simulator.scenario_overrides import apply_options
from topologies.spec import TopologySpec
from workloads.spec import ModelSpec, TrainingSpec

# replaced on the scenario itself
SCENARIO_FIELDS = ("name", "stragglers", "jitter", "nccl_env", "nccl_version", "nccl_selection", "run")
Resolved = tuple[ScenarioSpec, TopologySpec, TrainingSpec, ModelSpec]


def _straggler(data: object, index: int) -> StragglerSpec:
    try:
        return StragglerSpec.model_validate(data)
    except ValidationError as exc:
        raise config_error_from(exc, f"scenario: stragglers[{index}]") from None


class Scenario:
    """A training job on a cluster (keyword arguments as `clustersim predict`'s options; None: unchanged).

    Cluster: `topology` (a preset name such as "dgx-h100", a topology YAML path, a TopologySpec, a
    topology's fields, or {"preset": "dgx-h100", "inter_node": {...}} for a preset with fields replaced),
    `nodes`, `gpus_per_node`, `gpu` (a GPU preset such as "H200-SXM-141GB"), `link_faults`
    ([{"device": "s3/nic2", "factor": 0.5}], replacing the topology's).
    Model: a preset name ("llama2-7b"), a model YAML or HuggingFace config.json path, a ModelSpec or its
    fields. Given without a scenario file, only the embedded scenario's cluster is kept.
    Job: `strategy` (a kind such as "fsdp", or the strategy's fields), `shard_group_gpus` (HSDP's shard group, ZeRO-1's
    optimizer group),
    `tp`, `pp`, `cp`, `cp_comm`, `ep`, `etp` (the experts' tensor-parallel degree: 1 or tp),
    `ep_comm_overlap`, `ep_dispatcher` ("alltoall" or "deepep"), `sequence_parallel`, `pipeline_schedule`,
    `virtual_stages`, `pipeline_split`, `pipeline_layout` (Megatron-Core's custom layout, "Et|(tt|)*30L"),
    `placement`, `micro_batch`, `global_batch`, `seq_len`, `recompute` (activation checkpointing: none,
    selective, full, op, or a JAX policy such as save_qkv_proj), `recompute_modules` (with selective: Megatron-Core's
    --recompute-modules, e.g. ["moe_act", "layernorm"]), `mtp_layers` (multi-token prediction modules),
    `framework` (whose defaults fill what the job leaves unstated), `memory_fraction` (the share of each GPU's
    memory the allocator may take), MoE routing (`load_imbalance`, `capacity_factor`, `pad_to_capacity`) and `training`
    (any other training fields, e.g. {"precision": "fp8"}; nested mappings merge key by key).
    Scenario fields: `name`, `stragglers` ([{"slowdown": 1.2, "device": "s3/gpu2"}]), `jitter`
    ({"cv": 0.02}), `nccl_env` ({"NCCL_ALGO": "Ring"}), `nccl_version` (the NCCL release the job runs, "2.21"),
    `nccl_selection` ("model" or "nccl": whose choice of algorithm and protocol) and `run`
    ({"train_tokens": 2e12, "failures": "llama3"}: time to train through failures), each replacing the
    scenario's.
    """

    _base: ScenarioSpec | None
    _options: dict[str, Any]

    def __init__(self, *, name: str | None = None, model: str | Mapping[str, Any] | ModelSpec | None = None,
                 topology: str | Mapping[str, Any] | TopologySpec | None = None, nodes: int | None = None,
                 gpus_per_node: int | None = None, gpu: str | None = None,
                 link_faults: Sequence[Mapping[str, Any]] | None = None,
                 strategy: str | Mapping[str, Any] | None = None, shard_group_gpus: int | None = None,
                 tp: int | None = None, pp: int | None = None,
                 cp: int | None = None, cp_comm: str | None = None, ep: int | None = None, etp: int | None = None,
                 ep_comm_overlap: bool | None = None, ep_dispatcher: str | None = None,
                 sequence_parallel: bool | None = None,
                 pipeline_schedule: str | None = None, virtual_stages: int | None = None,
                 pipeline_split: str | None = None, pipeline_layout: str | None = None, placement: str | None = None,
                 micro_batch: int | None = None,
                 global_batch: int | None = None, seq_len: int | None = None, recompute: str | None = None,
                 recompute_modules: str | Sequence[str] | None = None, mtp_layers: int | None = None,
                 framework: str | None = None,
                 memory_fraction: float | None = None,
                 load_imbalance: float | None = None,
                 capacity_factor: float | None = None, pad_to_capacity: bool | None = None,
                 training: Mapping[str, Any] | None = None,
                 stragglers: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None = None,
                 jitter: Mapping[str, Any] | None = None, nccl_env: Mapping[str, str] | None = None,
                 nccl_version: str | None = None, nccl_selection: str | None = None,
                 run: Mapping[str, Any] | None = None) -> None:
        options = {key: value for key, value in locals().items() if key != "self" and value is not None}
        object.__setattr__(self, "_base", None)
        object.__setattr__(self, "_options", options)

    @classmethod
    def _of(cls, base: ScenarioSpec | None, options: Mapping[str, Any]) -> Scenario:
        scenario = cls.__new__(cls)
        object.__setattr__(scenario, "_base", base)
        object.__setattr__(scenario, "_options", dict(options))
        return scenario

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "scenario") -> Scenario:
        """A scenario from its data, as a scenario YAML file holds it (topology, nodes, training, ...);
        ConfigError names `source` and the field."""
        return cls._of(scenario_from_data(dict(data), source), {})

    @classmethod
    def from_yaml(cls, path: str | Path) -> Scenario:
        """A scenario file (as `clustersim predict FILE` reads it)."""
        path = Path(path)
        return cls.from_dict(load_yaml_text(read_input_text(path, "scenario"), str(path)), str(path))

    def replace(self, **changes: Any) -> Scenario:
        """A new scenario with these options changed (the keyword arguments of `Scenario`); mappings merge
        into those given before key by key."""
        code = Scenario.__init__.__code__
        unknown = sorted(set(changes) - set(code.co_varnames[1:1 + code.co_kwonlyargcount]))
        if unknown:
            raise TypeError(f"Scenario.replace: unknown option(s) {', '.join(unknown)}")
        given = {key: value for key, value in changes.items() if value is not None}
        return Scenario._of(self._base, merged(self._options, given))

    @cached_property
    def _resolved(self) -> Resolved:
        """The scenario as predicted: presets expanded, options applied, the job's defaults filled in."""
        options = {key: value for key, value in self._options.items() if key not in SCENARIO_FIELDS}
        spec, topology, training, model = apply_options(self._base, options, "scenario")
        fields = {key: value for key, value in self._options.items() if key in SCENARIO_FIELDS}
        if isinstance(fields.get("stragglers"), Sequence):  # each checked alone: an error names its index
            fields["stragglers"] = tuple(_straggler(item, i) for i, item in enumerate(fields["stragglers"]))
        if fields:
            try:
                spec = ScenarioSpec.model_validate({**dict(spec), **fields})
            except ValidationError as exc:
                raise config_error_from(exc, "scenario") from None
        return spec, topology, training, model

    def resolve(self) -> Scenario:
        """This scenario, checked now (a ConfigError names the bad field) rather than when predicted."""
        _ = self._resolved
        return self

    @property
    def name(self) -> str | None:
        """The scenario's label (None when options changed the embedded one's job and none was given)."""
        return self._resolved[0].name

    @property
    def topology(self) -> TopologySpec:
        """The cluster, presets expanded, with its node count."""
        return self._resolved[1]

    @property
    def training(self) -> TrainingSpec:
        """The job as predicted (every field filled in)."""
        return self._resolved[2]

    @property
    def model(self) -> ModelSpec:
        """The model trained."""
        return self._resolved[3]

    @property
    def nodes(self) -> int:
        return self.topology.nodes

    @property
    def n_gpus(self) -> int:
        return self.topology.nodes * self.topology.gpus_per_node

    def to_dict(self) -> dict[str, Any]:
        """The scenario as predicted, every field given (presets expanded, defaults filled in): itself a valid
        scenario (`Scenario.from_dict`) that predicts the same step; `predict(...).scenario` echoes it."""
        return scenario_echo(*self._resolved)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Scenario) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(self.to_json(indent=None))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Scenario is immutable: use replace({name}=...)")

    def __repr__(self) -> str:
        base = f"from {self._base.name!r}" if self._base is not None and self._base.name else (
            "from a scenario" if self._base is not None else "")
        shown = ", ".join([*([base] if base else []), *(f"{key}={value!r}" for key, value in self._options.items())])
        return f"Scenario({shown})"


ScenarioLike = Scenario | Mapping[str, Any] | str | Path


def as_scenario(value: ScenarioLike | None) -> Scenario:
    """A Scenario as given, its data (a mapping), or a scenario YAML path; None: the embedded default."""
    if value is None:
        return Scenario()
    if isinstance(value, Scenario):
        return value
    if isinstance(value, Mapping):
        return Scenario.from_dict(value)
    return Scenario.from_yaml(value)
