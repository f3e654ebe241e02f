"""What one scenario changes of another: each resolved (presets expanded, overrides applied) and compared
field by field, as `clustersim compare` and the Python API's `compare` show it."""

from __future__ import annotations

from simulator.scenario import ScenarioSpec, stragglers_of
from topologies.spec import TopologySpec
from workloads.spec import ModelSpec, TrainingSpec


def resolved_view(spec: ScenarioSpec, topology: TopologySpec, training: TrainingSpec,
                  model: ModelSpec, selection: str | None = None) -> dict[str, object]:
    """The scenario as predicted, as compared: topology, training, model, stragglers, jitter, NCCL environment,
    release and selection (`selection`: the one the prediction ran, else the scenario's, else 'model'), and run."""
    return {"topology": topology.model_dump(), "training": training.model_dump(exclude={"model"}),
            "model": model.model_dump(), "stragglers": _stragglers_dump(spec),
            "jitter": spec.jitter and spec.jitter.model_dump(), "nccl_env": spec.nccl_env,
            "nccl_version": spec.nccl_version, "nccl_selection": selection or spec.nccl_selection or "model",
            "run": spec.run and spec.run.model_dump()}


def _leaves(data: object, prefix: str = "") -> dict[str, object]:
    """A nested mapping flattened to dotted paths (lists and scalars are leaves)."""
    if not isinstance(data, dict):
        return {prefix: data}
    flat: dict[str, object] = {}
    for key, value in data.items():
        flat.update(_leaves(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def _stragglers_dump(spec: ScenarioSpec) -> object:
    """The scenario's stragglers as compared: one spec's fields, a list of them, or None."""
    stragglers = [straggler.model_dump() for straggler in stragglers_of(spec)]
    return stragglers[0] if len(stragglers) == 1 else stragglers or None


def _shown(value: object) -> str:
    """A resolved field's value as a reader writes it: none, 0.5, 's17/nic3 x0.5' for a link fault, key=value
    pairs for the other mappings."""
    if value is None or value == () or value == []:
        return "none"
    if isinstance(value, list | tuple):
        return "; ".join(_shown(item) for item in value)
    if isinstance(value, dict):
        if set(value) == {"device", "factor"}:
            return f"{value['device']} x{value['factor']:g}"
        return ", ".join(f"{key}={_shown(item)}" for key, item in value.items() if item is not None)
    return f"{value:g}" if isinstance(value, float) else str(value)


def differences(base: dict[str, object], other: dict[str, object], most: int = 6) -> list[str]:
    """What `other` changes of `base` (resolved scenarios: presets expanded), as 'path: old -> new', the
    first `most` and a count of the rest; names, descriptions and sources left out."""
    a, b = _leaves(base), _leaves(other)
    changed = [f"{path}: {_shown(a.get(path))} -> {_shown(b.get(path))}" for path in dict.fromkeys([*a, *b])
               if a.get(path) != b.get(path) and path.rsplit(".", 1)[-1] not in ("name", "description", "source")]
    return changed[:most] + ([f"(+{len(changed) - most} more)"] if len(changed) > most else [])
