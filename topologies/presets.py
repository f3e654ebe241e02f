"""Topology presets (package data in topologies/presets/*.yaml, each a TopologySpec with its sources in
comments) and the resolution of a `--topology NAME|FILE` argument to a spec.

`resolve_topology` is the one function of this package that reads a user file; everything else takes
text or mappings (`spec_from_yaml_text`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulator.core.errors import ConfigError
from simulator.core.input_file import read_input_text
from simulator.core.mappings import merged
from simulator.core.yaml_text import load_yaml_text, package_yaml_texts
from topologies.spec import TopologySpec, nics_follow_gpus, validate_topology_spec

_PRESET_DIR = "presets"


def _preset_texts() -> dict[str, str]:
    return package_yaml_texts("topologies", _PRESET_DIR)


def _parse_mapping(text: str, source: str) -> dict[str, Any]:
    data = load_yaml_text(text, source)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of TopologySpec fields, got {type(data).__name__}")
    return data


def list_presets() -> list[tuple[str, str]]:
    """(name, description) of every preset, sorted by name."""
    texts = sorted(_preset_texts().items())
    return [(name, str(_parse_mapping(text, name).get("description", ""))) for name, text in texts]


def spec_from_yaml_text(text: str, source: str, nodes: int | None = None, **overrides: Any) -> TopologySpec:
    """A TopologySpec from YAML text (`source` names it in errors); `nodes` and `overrides` replace
    fields (nested mappings such as inter_node merge key by key; a smaller gpus_per_node takes the NICs of the
    GPUs used unless inter_node.nics_per_node is replaced too: nics_follow_gpus)."""
    base = _parse_mapping(text, source)
    data = nics_follow_gpus(base, merged(base, overrides), overrides)
    if nodes is not None:
        data["nodes"] = nodes
    return validate_topology_spec(data, source)


def load_preset(name: str, nodes: int | None = None, **overrides: Any) -> TopologySpec:
    """The preset `name` (see list_presets), with `nodes` and field overrides applied."""
    texts = _preset_texts()
    if name not in texts:
        raise ConfigError(f"topology preset {name!r} unknown; available: {', '.join(sorted(texts))}")
    return spec_from_yaml_text(texts[name], f"preset {name}", nodes, **overrides)


def resolve_topology(name_or_path: str, nodes: int | None = None) -> TopologySpec:
    """A preset name, or the path of a YAML file holding a TopologySpec (read here), with `nodes` applied."""
    if name_or_path in _preset_texts():
        return load_preset(name_or_path, nodes)
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return spec_from_yaml_text(read_input_text(path, "topology file"), str(path), nodes)
    return load_preset(name_or_path, nodes)
