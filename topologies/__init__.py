"""What a training job runs on: GPU hardware facts, cluster specs, presets, and the device graph
(`Topology`) that `build` makes from a spec. Knows nothing of workloads or of the simulator's models.

Public API: build, TopologySpec / InterNodeSpec / FabricSpec, topology_spec_from_fields,
list_presets / load_preset / resolve_topology / spec_from_yaml_text, summarize, gpu_spec, Topology.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module that defines it; imported on first use, so that `import topologies.spec` does not
# pay for networkx and scipy (the graph builder and the summary's max-flow)
_HOME = {
    "build": "topologies.build",
    "GpuSpec": "topologies.hardware", "gpu_spec": "topologies.hardware", "known_gpus": "topologies.hardware",
    "Topology": "topologies.model",
    "list_presets": "topologies.presets", "load_preset": "topologies.presets",
    "resolve_topology": "topologies.presets", "spec_from_yaml_text": "topologies.presets",
    "FabricSpec": "topologies.spec", "InterNodeSpec": "topologies.spec", "TopologySpec": "topologies.spec",
    "topology_spec_from_fields": "topologies.spec",
    "TopologySummary": "topologies.summary", "summarize": "topologies.summary",
}


def __getattr__(name: str) -> Any:
    """The public name `name`, imported from its module on first use (PEP 562)."""
    if name not in _HOME:
        raise AttributeError(f"module 'topologies' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)


__all__ = [
    "FabricSpec",
    "GpuSpec",
    "InterNodeSpec",
    "Topology",
    "TopologySpec",
    "TopologySummary",
    "build",
    "gpu_spec",
    "known_gpus",
    "list_presets",
    "load_preset",
    "resolve_topology",
    "spec_from_yaml_text",
    "summarize",
    "topology_spec_from_fields",
]
