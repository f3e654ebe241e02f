"""`build`: the one entry point from a TopologySpec to a Topology. It composes the builders of
topologies.node (one server, replicated) and topologies.fabric (NVLink domains, network fabric)
and freezes the result."""

from __future__ import annotations

import networkx as nx

from topologies.fabric import build_fabric, nvlink_domains
from topologies.hardware import gpu_spec, intra_node_platform
from topologies.model import Topology
from topologies.node import build_server, replicate_server
from topologies.spec import TopologySpec


def build(spec: TopologySpec) -> Topology:
    """The cluster of `spec` as a frozen device graph (see topologies.model for its attributes)."""
    gpu = gpu_spec(spec.gpu)
    graph = replicate_server(build_server(spec, gpu), spec.nodes)
    if intra_node_platform(spec.intra_node).layout == "nvl72":
        graph.update(nvlink_domains(spec.nodes, spec.gpus_per_node, spec.gpus_per_nvlink_domain, gpu))
    graph.update(build_fabric(spec))
    return Topology(spec=spec, gpu=gpu, graph=nx.freeze(graph))
