"""The built topology: a frozen networkx graph of devices and directed links, plus lookups.

The graph holds the whole cluster (topologies.build.build) or, for a prediction, one server of each group
the faults leave alike with what their rates depend on (build_representative: `servers_built` names them);
the cluster's sizes (`n_servers`, `n_gpus`) are the spec's either way.

Graph nodes are device ids (strings). Every node has attributes:
  kind    one of `DEVICE_KINDS`
  server  index of the server (node) it sits in, or -1 for fabric switches
  local   index among devices of its kind in that server (GPU 3 -> 3), or its index in the fabric
  role    the symmetric name of the device, without the server index ("gpu3", "nic1", "nvswitch",
          "pcie0", "cpu0", "leaf", "spine"); identical devices in different servers share a role.
Every directed edge (one per direction) has attributes:
  kind          one of `LINK_KINDS`
  bandwidth_Bps bytes per second in that direction
  latency_s     one-way latency of the hop (wire + switch/port), seconds
  group         the symmetry class of the link: f"{kind}:{role_u}->{role_v}". Links that are the
                same in every server (or every leaf) share a group, so symmetric traffic can be
                simulated once per group instead of once per link (see simulator.network).
Routing (`Topology.path`) follows topologies.routing: never through a GPU or NIC that is not an end,
NVLink before PCIe inside a server, a GPU's own NIC between servers.
The properties below (`intra_bandwidth_Bps`, `nic_bandwidth_Bps`, `p2p`, `nvls`, ...) are what the
collective model reads; they are computed from the spec, the GPU table and the graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import networkx as nx

from simulator.core.errors import TopologyError
from simulator.core.units import gbps_to_Bps
from topologies.faults import ServerGroup, server_groups
from topologies.hardware import GpuSpec, IntraNodePlatform, intra_node_platform
from topologies.layout import device_id, nics_of_gpu
from topologies.routing import Edge, Router

if TYPE_CHECKING:
    from topologies.spec import TopologySpec

DEVICE_KINDS = ("gpu", "nvswitch", "pcie_switch", "cpu", "nic", "leaf", "spine", "core")
LINK_KINDS = ("nvlink", "pcie", "smp", "ib", "roce", "efa", "slingshot", "ethernet", "tcp")


@dataclass(frozen=True, eq=False)
class Topology:
    """A cluster: its spec, its GPU hardware and its device graph (treat the graph as read-only)."""

    spec: TopologySpec
    gpu: GpuSpec
    graph: nx.DiGraph = field(repr=False)
    # each faulty device (spec.link_faults, a role expanded to its devices) and the factor its links run
    # at: the product of the faults naming it, 0 for a failed device
    fault_factors: dict[str, float] = field(default_factory=dict, repr=False)
    # the faulty devices (role or fabric id, factor) in or next to each server they touch (topologies.faults)
    servers_touched: dict[int, list[tuple[str, float]]] = field(default_factory=dict, repr=False)
    # the servers whose devices the graph holds (None: all of them; see topologies.build.build_representative)
    servers_built: frozenset[int] | None = field(default=None, repr=False)

    @cached_property
    def server_groups(self) -> tuple[ServerGroup, ...]:
        """The servers grouped by the faults that touch them, the untouched ones first (topologies.faults)."""
        return server_groups(self.servers_touched, self.n_servers)

    @property
    def n_servers(self) -> int:
        return self.spec.nodes

    @property
    def gpus_per_server(self) -> int:
        return self.spec.gpus_per_node

    @property
    def n_gpus(self) -> int:
        return self.spec.nodes * self.spec.gpus_per_node

    def gpu_id(self, server: int, local: int) -> str:
        """Device id of GPU `local` of server `server`."""
        return device_id(server, f"gpu{local}")

    def nic_id(self, server: int, local: int) -> str:
        """Device id of NIC `local` of server `server`."""
        return device_id(server, f"nic{local}")

    def nics_of_gpu(self, server: int, local: int) -> list[str]:
        """Ids of the NICs GPU `local` of `server` uses (its PCIe-switch neighbours; the first is the
        one its routes to other servers take). Empty when the servers have no network."""
        return [self.nic_id(server, k) for k in nics_of_gpu(local, self.gpus_per_server, self.nics_per_server)]

    @cached_property
    def platform(self) -> IntraNodePlatform:
        """The intra-node platform of the servers (layout, P2P, host PCIe generation)."""
        return intra_node_platform(self.spec.intra_node)

    @cached_property
    def intra_bandwidth_Bps(self) -> float:
        """Per-GPU bandwidth to the rest of its server (or NVLink domain), one direction: the sum of
        its NVLinks, or its PCIe link when it has none."""
        gpu0 = self.gpu_id(0, 0)
        out = self.graph.out_edges(gpu0, data=True)
        nvlink = sum(float(attrs["bandwidth_Bps"]) for _, _, attrs in out if attrs["kind"] == "nvlink")
        if nvlink:
            return nvlink
        return max(float(attrs["bandwidth_Bps"]) for _, _, attrs in out if attrs["kind"] == "pcie")

    @property
    def nic_bandwidth_Bps(self) -> float:
        """Line rate of one NIC, one direction, bytes/s (0.0 without a network)."""
        net = self.spec.inter_node
        return gbps_to_Bps(net.nic_gbps) if net else 0.0

    @property
    def nics_per_server(self) -> int:
        """NICs per server used for GPU traffic (0 without a network)."""
        net = self.spec.inter_node
        return net.nics_per_node if net else 0

    @property
    def transport(self) -> str | None:
        """NCCL network transport (spec.Transport: "ib", "roce", "efa", "slingshot", ...) or None."""
        net = self.spec.inter_node
        return net.transport if net else None

    @property
    def p2p(self) -> bool:
        """GPU peer-to-peer inside a server allowed (False: NCCL stages through host memory)."""
        return self.platform.p2p

    @property
    def nvls(self) -> bool:
        """NVLink SHARP available: the GPU supports it and its NVLinks end on an NVSwitch."""
        return self.gpu.nvls and self.platform.layout in ("nvswitch", "nvl72")

    @property
    def sharp(self) -> bool:
        """InfiniBand SHARP in-network reduction on."""
        net = self.spec.inter_node
        return bool(net and net.sharp)

    @property
    def ecmp(self) -> bool:
        """Each flow between leaves is pinned to one uplink by a hash (TopologySpec.routing), not spread."""
        return self.spec.routing == "ecmp"

    @property
    def gpudirect_rdma(self) -> bool:
        """NICs access GPU memory directly (False without a network, or when traffic stages via the CPU)."""
        net = self.spec.inter_node
        return bool(net and net.gpudirect_rdma)

    @property
    def gpu_nic_path(self) -> str:
        """How a GPU reaches its NIC (InterNodeSpec.gpu_nic_path): as stated, else c2c for a Grace superchip's GPU,
        else pxb."""
        net = self.spec.inter_node
        stated = net.gpu_nic_path if net else None
        return stated or ("c2c" if self.gpu.grace else "pxb")

    @property
    def host_cpu(self) -> str:
        """The servers' CPU vendor (InterNodeSpec.host_cpu): as stated, else arm for a Grace superchip's GPU, else
        intel."""
        net = self.spec.inter_node
        stated = net.host_cpu if net else None
        return stated or ("arm" if self.gpu.grace else "intel")

    @property
    def gpus_per_nvlink_domain(self) -> int:
        """GPUs that share one NVLink fabric: gpus_per_node, or nvlink_domain_gpus for NVL72."""
        return self.spec.gpus_per_nvlink_domain

    @cached_property
    def _group_sizes(self) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for _, _, group in self.graph.edges(data="group"):
            sizes[group] = sizes.get(group, 0) + 1
        return sizes

    def group_size(self, group: str) -> int:
        """Number of directed links in a symmetry group."""
        return self._group_sizes[group]

    def link(self, u: str, v: str) -> dict[str, object]:
        """Attributes of the directed link u -> v."""
        try:
            return dict(self.graph.edges[u, v])
        except KeyError:
            raise TopologyError(f"no link {u} -> {v}") from None

    @cached_property
    def _router(self) -> Router:
        return Router(self.graph, self.gpus_per_server, self.nics_per_server, self.p2p, self.gpudirect_rdma)

    def path(self, src: str, dst: str) -> list[Edge]:
        """Route from src to dst as a list of directed links (topologies.routing): never through a GPU
        or NIC that is not an end; deterministic, memoised. With P2P or GPUDirect RDMA off, the route
        stages through a CPU and may use a PCIe link in both directions."""
        return self._router.path(src, dst)
