"""What a training job runs on: GPU hardware facts, cluster specs, presets, and the device graph
(`Topology`) that `build` makes from a spec. Knows nothing of workloads or of the simulator's models.

Public API: build, TopologySpec / InterNodeSpec / FabricSpec, topology_spec_from_fields,
list_presets / load_preset / resolve_topology / spec_from_yaml_text, summarize, gpu_spec, Topology.
"""

from topologies.build import build
from topologies.hardware import GpuSpec, gpu_spec, known_gpus
from topologies.model import Topology
from topologies.presets import list_presets, load_preset, resolve_topology, spec_from_yaml_text
from topologies.spec import FabricSpec, InterNodeSpec, TopologySpec, topology_spec_from_fields
from topologies.summary import TopologySummary, summarize

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
