"""The cluster a command runs on: a preset, a topology YAML file, or the manifest fields as flags."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Annotated

import typer

from simulator.cli.common import gbps_option
from simulator.core.errors import ConfigError
from topologies.presets import resolve_topology
from topologies.spec import TopologySpec, topology_spec_from_fields

# The cluster as flags, the fields of a manifest entry (resolve_cluster); the commands that take a cluster share them.
GpuOpt = Annotated[str | None, typer.Option(help="Cluster as flags: GPU model (e.g. H100-SXM5-80GB).")]
GpusPerNodeOpt = Annotated[int | None, typer.Option(help="Cluster as flags: GPUs per node.")]
IntraNodeOpt = Annotated[str | None, typer.Option(help="Cluster as flags: e.g. nvswitch-nvlink4, pcie4.")]
TransportOpt = Annotated[
    str | None, typer.Option(help="Cluster as flags: ib, roce, efa, slingshot, tcpxo, tcpx, sockets, ethernet.")]
NicsPerNodeOpt = Annotated[int | None, typer.Option(help="Cluster as flags: NICs per node.")]
NicGbpsOpt = Annotated[str | None, typer.Option(
    metavar="SPEED", help="Cluster as flags: speed of one NIC, in Gbit/s (400, 400G, 400Gbps) or bytes (50GB/s).")]
HostCpuOpt = Annotated[str | None, typer.Option(
    help="Cluster as flags: the hosts' CPU, intel, amd or arm (or its name, e.g. 'AMD EPYC 7763'); NCCL's proxy "
    "pays 2 us a network launch on AMD, 1 us on the others. Default: arm for Grace GPUs, else intel.")]


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


@dataclass(frozen=True)
class ClusterFlags:
    """The cluster as flags, as a command received them (the Opt aliases above)."""

    gpu: str | None = None
    gpus_per_node: int | None = None
    intra_node: str | None = None
    transport: str | None = None
    nics_per_node: int | None = None
    nic_gbps: str | None = None
    host_cpu: str | None = None

    def given(self) -> list[str]:
        """The flags given, as typed (--gpu, --nic-gbps, ...)."""
        return ["--" + f.name.replace("_", "-") for f in fields(self) if getattr(self, f.name) is not None]

    def resolve(self, topology: str, nodes: int | None) -> TopologySpec:
        """The cluster: from these flags with --gpu, else the preset or YAML `topology` (resolve_cluster)."""
        return resolve_cluster(topology, nodes, self.gpu, self.gpus_per_node, self.intra_node, self.transport,
                               self.nics_per_node, gbps_option(self.nic_gbps, "--nic-gbps"), self.host_cpu)
