"""The cluster a command runs on: a preset, a topology YAML file, or the manifest fields as flags."""

from __future__ import annotations

from simulator.core.errors import ConfigError
from topologies.presets import resolve_topology
from topologies.spec import TopologySpec, topology_spec_from_fields


def resolve_cluster(topology: str, nodes: int | None, gpu: str | None, gpus_per_node: int | None,
                    intra_node: str | None, transport: str | None, nics_per_node: int | None,
                    nic_gbps: float | None, host_cpu: str | None = None) -> TopologySpec:
    """With --gpu, build the cluster from flags (as a manifest entry would); else from --topology."""
    flags = {"--gpus-per-node": gpus_per_node, "--intra-node": intra_node}
    if gpu is None:
        given = [name for name, value in {**flags, "--transport": transport, "--nics-per-node": nics_per_node,
                                          "--nic-gbps": nic_gbps, "--host-cpu": host_cpu}.items()
                 if value is not None]
        if given:
            raise ConfigError(f"{', '.join(given)} describe a cluster by flags and need --gpu as well")
        return resolve_topology(topology, nodes)
    if gpus_per_node is None or intra_node is None:
        missing = [name for name, value in flags.items() if value is None]
        raise ConfigError(f"--gpu describes the cluster by flags and needs {', '.join(missing)} too")
    if host_cpu is not None and transport is None:
        raise ConfigError("--host-cpu is the CPU that drives the network (NCCL's proxy thread) and needs --transport")
    inter = None
    if transport is not None:
        nics = 1 if nics_per_node is None else nics_per_node  # 0 is refused by the spec, not taken as 1
        inter = {"transport": transport, "nics_per_node": nics, "nic_gbps": nic_gbps, "host_cpu": host_cpu}
    return topology_spec_from_fields(gpu=gpu, gpus_per_node=gpus_per_node, nodes=1 if nodes is None else nodes,
                                     intra_node=intra_node, inter_node=inter, name="cluster from flags")
