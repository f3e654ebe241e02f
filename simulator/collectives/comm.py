"""What a collective sees of the cluster: ranks, nodes and the bandwidths that bound it.

`CommView` is derived once from a `Topology` (all ranks of the cluster, one rank per GPU) and is
all the collective model needs; symmetric ranks make a handful of numbers enough, so the cost of a
prediction does not grow with the GPU count.

A "node" here is what the network joins: a server, or a multi-server NVLink domain (NVL72).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from topologies.fabric import LEAF_DOWNLINK_PORTS, spec_leaves
from topologies.layout import nics_of_gpu
from topologies.model import Topology

# Achievable fraction of the raw intra-node link rate for NCCL's copy kernels. Facts from
# published single-node nccl-tests all_reduce (ring) bus bandwidth: DGX A100 ~230 GB/s of
# 300 GB/s NVLink3 per direction (NVIDIA DGX A100 user guide; NCCL caps A100 at 235 in its tuner);
# DGX H100 ~370 GB/s of 450 (NVIDIA nccl-tests issue #309 reports 368.8 with NVLS off); PCIe P2P
# reaches ~80% of the x16 rate through a switch (NVIDIA nccl-tests PCIe reports).
INTRA_EFFICIENCY = {"nvlink": 0.80, "pcie": 0.78, "shm": 0.55}

# NVLink SHARP (NVLS) reduces in the NVSwitch: its copy engine reaches less of the NVLink rate
# than a ring, per NVSwitch generation. With NVLS' per-GPU traffic of (1 + 1/G) x S, 8 GPUs, and the
# all_reduce pipeline's fill of two steps of all channels x heads operations at the 4 GiB these reports
# quote (simulator.collectives.cost: 16 MiB steps on Hopper's 16 channels, 24 MiB on the 24 that NCCL 2.27+
# gives one Blackwell domain):
# - Hopper (NVLink4): 480 GB/s busbw with NVLS against 369 ring (nccl-tests issue #309), algbw 275,
#   309 GB/s a GPU of 450, x (1 + 32 MiB / 4 GiB): 0.69. The same rate a GPU holds at 5-8 GPUs
#   (NVIDIA/nccl #1455: busbw 420, 440, 460, 480) and on H800's 200 GB/s (#1374: 215 busbw).
# - Blackwell (NVLink5, B300, NCCL 2.30.4; NVIDIA/nccl #2140): 845 GB/s busbw with NVLS against 695
#   ring, algbw 483, 543 GB/s a GPU of 900, x (1 + 48 MiB / 4 GiB): 0.61.
NVLS_EFFICIENCY = {"hopper": 0.69, "blackwell": 0.61}

# Ports of a spine switch: the 64-port switch whose half the fabric's leaves give their servers
# (topologies.fabric: NVIDIA Quantum-2 QM9700, 64 x 400G). Two tiers of k-port switches join at most
# k leaves (a spine port each); beyond, a third tier of core switches joins pods of k/2 leaves (the
# k-ary fat tree: Al-Fares, Loukissas and Vahdat, SIGCOMM 2008).
SPINE_PORTS = 2 * LEAF_DOWNLINK_PORTS


@dataclass(frozen=True)
class CommView:
    """The numbers a collective over `n_ranks` GPUs depends on (bandwidths are line rates)."""

    n_ranks: int
    n_nodes: int
    ranks_per_node: int
    arch: str
    intra_kind: str  # "nvlink", "pcie" (P2P over PCIe) or "shm" (staged through host memory)
    intra_Bps: float  # per GPU, one direction, to the rest of its node
    net_Bps: float  # per node, one direction, all NICs together (0 for one node)
    nics_per_node: int
    transport: str | None
    nvls: bool
    sharp: bool
    gpudirect_rdma: bool
    # crossing leaf switches: a node's share of its leaves' uplinks (inf with one switch or one leaf
    # group) and how many nodes one leaf group holds
    spine_Bps: float = math.inf
    nodes_per_leaf_group: int = 1 << 30
    leaf_groups: int = 0  # leaf groups the communicator's nodes span; 0: its nodes are consecutive
    # one-way latency a network hop adds when it crosses leaf groups (leaf -> spine -> leaf) and, in a
    # three-tier fabric, when it crosses pods (spine -> core -> spine), us; leaf groups a pod holds
    cross_leaf_hop_us: float = 0.0
    cross_pod_hop_us: float = 0.0
    leaf_groups_per_pod: int = 1 << 30
    # how a GPU reaches its NICs, in NCCL's path classes: pxb (PCIe switches), phb (the CPU's host bridge), c2c
    # (a Grace CPU over NVLink-C2C, as in NVLink domains of many servers)
    gpu_nic_path: str = "pxb"
    # the host CPU's vendor (intel, amd, arm), whose cores run NCCL's proxy thread (nccl_constants.NET_OVERHEAD_US)
    host_cpu: str = "intel"
    # static hashing of flows onto a leaf's uplinks (ECMP, simulator.collectives.ecmp): on or off, the
    # uplinks of one leaf and the rate of one, and the flows NCCL opens per connection (QPs or sockets)
    ecmp: bool = False
    uplinks_per_leaf: int = 0
    uplink_Bps: float = 0.0
    flows_per_connection: int = 1
    # the most NIC positions (NCCL's HCA rails) of one node on one leaf switch: SHARP streaming
    # aggregation flows a communicator needs there (simulator.collectives.sharp)
    rails_per_leaf: int = 1
    # an NVLink bridge joins the node's GPUs in pairs (2k, 2k + 1) on a PCIe server: its rate, one direction, which a
    # group of one such pair communicates at (simulator.training.groups.group_view); 0 without bridges
    bridge_Bps: float = 0.0
    # the node's GPUs meet in an NVSwitch fabric (nvswitch and nvl72 layouts): a chain of them, as NCCL's tree
    # runs inside a node, gets a GPU's whole NVLink rate a hop; in a mesh a hop has one pair's links
    nvswitch: bool = False
    # the Simple protocol's buffer a channel has per connection (NCCL_BUFFSIZE, 4 MiB by default; nccl_constants)
    simple_buffer_bytes: int = 4 * 1024**2

    @property
    def multi_node(self) -> bool:
        return self.n_nodes > 1

    @property
    def spanned_leaf_groups(self) -> int:
        """Leaf groups the communicator's nodes span: as counted for a strided group, or ceil(nodes /
        nodes a group) for consecutive nodes."""
        return self.leaf_groups or math.ceil(self.n_nodes / self.nodes_per_leaf_group)

    @property
    def spanned_pods(self) -> int:
        """Pods of a three-tier fabric the communicator's leaf groups span (1 in two tiers)."""
        return math.ceil(self.spanned_leaf_groups / self.leaf_groups_per_pod)

    def with_nodes(self, n_nodes: int) -> CommView:
        """The same hardware with another node count (for scaling curves), its nodes consecutive."""
        return replace(self, n_nodes=n_nodes, n_ranks=n_nodes * self.ranks_per_node, leaf_groups=0)


def gpu_to_network_Bps(topology: Topology, server: int = 0) -> float:
    """What the GPUs of `server` can push into the network together. Each GPU spreads its traffic evenly
    over its NICs (NCCL's channels), along its route to each (a PCIe switch, or staged through a
    CPU without GPUDirect RDMA) and on up the NIC's link to its leaf; a GPU whose NICs all failed
    falls back to the nearest NIC that works: the one its route leaves by, to the same GPU of the
    first server built in another NVLink domain, or else to the leaf its own NIC sat on. A link loaded
    by k GPUs' shares gives each its part, and the GPUs send in lockstep, so the most loaded link sets
    every GPU's pace. With one NVLink domain nothing leaves it: inf."""
    per_domain = max(1, topology.gpus_per_nvlink_domain // topology.gpus_per_server)
    if topology.n_servers <= per_domain:
        return math.inf
    graph = topology.graph
    built = sorted(topology.servers_built) if topology.servers_built is not None else range(topology.n_servers)
    peer = next((s for s in built if s // per_domain != server // per_domain), None)
    leaves = spec_leaves(topology.spec)
    load: dict[tuple[str, str], float] = {}
    for local in range(topology.gpus_per_server):
        gpu = topology.gpu_id(server, local)
        nics = [nic for nic in topology.nics_of_gpu(server, local) if graph.out_degree(nic) > 0]
        if not nics:
            if peer is not None or leaves is None:
                target = topology.gpu_id(server if peer is None else peer, local)
            else:
                own = nics_of_gpu(local, topology.gpus_per_server, topology.nics_per_server)[0]
                target = f"leaf{leaves.leaf_of(server, own)}"
            route = topology.path(gpu, target)
            nics = [next(v for _, v in route if graph.nodes[v]["kind"] == "nic")]
        for nic in nics:
            uplinks = [(nic, v) for v in graph.succ[nic] if graph.nodes[v]["kind"] not in ("gpu", "pcie_switch", "cpu")]
            for edge in topology.path(gpu, nic) + uplinks[:1]:
                load[edge] = load.get(edge, 0.0) + 1.0 / len(nics)
    if not load:
        return math.inf
    per_gpu = min(float(graph.edges[edge]["bandwidth_Bps"]) / share for edge, share in load.items())
    return per_gpu * topology.gpus_per_server


def leaf_uplinks(topology: Topology, server: int = 0) -> tuple[float, int]:
    """(`server`'s share of the uplinks of the leaves its NICs sit on, servers per leaf group).
    With one switch, or all servers under the same leaves, nothing crosses: (inf, servers)."""
    graph = topology.graph
    leaves = set()
    for local in range(topology.nics_per_server):
        nic = topology.nic_id(server, local)
        attached = [v for v in graph.succ[nic] if graph.nodes[v]["kind"] == "leaf"]
        if not attached:
            return math.inf, topology.n_servers
        leaves.add(attached[0])
    share, group = 0.0, topology.n_servers
    for leaf in sorted(leaves):
        uplinks = sum(float(link["bandwidth_Bps"]) for v, link in graph.succ[leaf].items()
                      if graph.nodes[v]["kind"] == "spine")
        servers = {graph.nodes[u]["server"] for u in graph.pred[leaf] if graph.nodes[u]["kind"] == "nic"}
        if uplinks == 0.0 or len(servers) >= topology.n_servers:
            return math.inf, topology.n_servers
        share += uplinks / len(servers)
        group = min(group, len(servers))
    return share, group


def leaf_uplink_links(topology: Topology, server: int = 0) -> tuple[int, float]:
    """(uplinks of the leaf NIC 0 of `server` sits on, mean rate of one): the links a flow leaving that
    leaf is hashed onto under ECMP. A failed link takes no flow. No spines: (0, 0.0)."""
    graph = topology.graph
    leaf = next((v for v in graph.succ[topology.nic_id(server, 0)] if graph.nodes[v]["kind"] == "leaf"), None)
    if leaf is None:
        return 0, 0.0
    rates = [float(link["bandwidth_Bps"]) for v, link in graph.succ[leaf].items()
             if graph.nodes[v]["kind"] == "spine" and float(link["bandwidth_Bps"]) > 0.0]
    return (len(rates), sum(rates) / len(rates)) if rates else (0, 0.0)


def rails_per_leaf(topology: Topology) -> int:
    """The most NICs of one node (a server, or the servers of an NVLink domain) that sit on one leaf switch:
    NIC i of a server is NCCL's HCA rail i, so a leaf_spine or single-switch leaf holds every rail of its
    servers, a rail-optimised leaf one rail of each server of its unit (an NVL72 rack's 18 trays: 18)."""
    leaves = spec_leaves(topology.spec)
    if leaves is None or not topology.nics_per_server:
        return 0
    per_domain = max(1, topology.gpus_per_nvlink_domain // topology.gpus_per_server)
    counts: dict[int, int] = {}
    for server in range(min(per_domain, topology.n_servers)):
        for nic in range(topology.nics_per_server):
            leaf = leaves.leaf_of(server, nic)
            counts[leaf] = counts.get(leaf, 0) + 1
    return max(counts.values())


def fabric_tier_latencies(topology: Topology) -> tuple[float, float, int]:
    """(us a hop adds crossing leaf groups, us it adds crossing pods, leaf groups a pod holds). Crossing
    leaves takes a hop up to a spine and down again: the two leaf-spine links of the topology (cable
    and switch port-to-port each, topologies.links). A fabric of more leaves than a spine has ports
    is three-tier (SPINE_PORTS): pods of SPINE_PORTS / 2 leaves under core switches, and crossing pods
    takes two more links of the same figure. No spines: (0, 0, all)."""
    leaves = spec_leaves(topology.spec)
    graph = topology.graph
    uplink = next(((u, v) for u, v in graph.edges if graph.nodes[u]["kind"] == "leaf"
                   and graph.nodes[v]["kind"] == "spine"), None)
    if leaves is None or uplink is None:
        return 0.0, 0.0, 1 << 30
    hop_us = 2 * float(graph.edges[uplink]["latency_s"]) * 1e6
    leaves_per_group = leaves.nics if leaves.rails else 1
    groups_per_pod = max(1, SPINE_PORTS // 2 // leaves_per_group)
    return hop_us, (hop_us if leaves.count > SPINE_PORTS else 0.0), groups_per_pod


def bridged_pairs_only(topology: Topology) -> bool:
    """True when the server's GPUs are PCIe cards joined in pairs by NVLink bridges and there are more than two:
    a ring or tree over them crosses PCIe between pairs, so the bridges do not set its pace."""
    return topology.platform.layout == "pcie_bridged" and topology.gpus_per_server > 2


def gpu_intra_Bps(topology: Topology, server: int) -> float:
    """The slowest GPU of `server` to the rest of its server or NVLink domain, one direction: the sum
    of its NVLinks, or its PCIe link when it has none or only a bridge to one other card of several
    (a degraded GPU, NVSwitch or bridge lowers it)."""
    graph = topology.graph
    pcie_only = bridged_pairs_only(topology)
    rates = []
    for local in range(topology.gpus_per_server):
        out = graph.out_edges(topology.gpu_id(server, local), data=True)
        nvlink = sum(float(attrs["bandwidth_Bps"]) for _, _, attrs in out if attrs["kind"] == "nvlink")
        pcie = [float(attrs["bandwidth_Bps"]) for _, _, attrs in out if attrs["kind"] == "pcie"]
        rates.append(max(pcie, default=0.0) if pcie_only or not nvlink else nvlink)
    return min(rates)


def bridge_Bps(topology: Topology, server: int) -> float:
    """The slowest NVLink bridge of `server`'s pairs of cards, one direction (0 on other servers)."""
    if topology.platform.layout != "pcie_bridged":
        return 0.0
    graph = topology.graph
    rates = [float(attrs["bandwidth_Bps"]) for local in range(0, topology.gpus_per_server - 1, 2)
             for _, _, attrs in graph.out_edges(topology.gpu_id(server, local), data=True) if attrs["kind"] == "nvlink"]
    return min(rates, default=0.0)


@dataclass(frozen=True)
class ServerClass:
    """`count` servers the faults leave alike, and the rates their GPUs see. `faults` names the faulty
    devices (role or fabric id, factor) in or next to them and `servers` lists them; both are empty for
    the servers no fault touches."""

    count: int
    example: int  # one server of the class, the one it was priced on
    servers: tuple[int, ...]
    faults: tuple[tuple[str, float], ...]
    intra_Bps: float  # the slowest GPU to the rest of its server, one direction
    net_Bps: float  # the server's GPUs into the network together, one direction (0 for one server)
    spine_Bps: float  # the server's share of its leaves' uplinks (inf when nothing crosses)

    @property
    def healthy(self) -> bool:
        return not self.faults


@functools.lru_cache(maxsize=16)
def server_classes(topology: Topology) -> tuple[ServerClass, ...]:
    """The servers grouped by the faults that touch them (the untouched ones first), each class priced
    once on one of its servers (topologies.faults.server_groups): servers with the same faulty roles at the
    same factors (NIC 3 at 0.1 on s0 or on s5) see the same rates, so the cost grows with the distinct faults,
    not with the servers, and a faulty server is priced on its own links, wherever it is. Kept for the last
    few topologies (a prediction asks for them more than once)."""
    networked = topology.n_servers > 1 and topology.nics_per_server > 0
    line_Bps = topology.nic_bandwidth_Bps * topology.nics_per_server
    return tuple(
        ServerClass(group.count, group.example, group.servers, group.faults, gpu_intra_Bps(topology, group.example),
                    min(line_Bps, gpu_to_network_Bps(topology, group.example)) if networked else 0.0,
                    leaf_uplinks(topology, group.example)[0] if networked else math.inf)
        for group in topology.server_groups)


def comm_view(topology: Topology) -> CommView:
    """Derive the view of all GPUs of a topology as one communicator. A ring or tree runs at its slowest
    member's pace, so each rate is the slowest server class's (server_classes): a fault anywhere counts
    the same as on server 0."""
    per_domain = topology.gpus_per_nvlink_domain
    n_nodes = max(1, topology.n_gpus // per_domain)
    layout = topology.platform.layout
    if layout in ("nvswitch", "nvlink_mesh", "nvl72") or (layout == "pcie_bridged"
                                                           and not bridged_pairs_only(topology)):
        kind = "nvlink"
    else:
        kind = "pcie" if topology.p2p else "shm"
    classes = server_classes(topology)
    net_Bps = 0.0
    spine_Bps, group = math.inf, n_nodes
    if n_nodes > 1 and topology.nics_per_server:
        net_Bps = min(c.net_Bps for c in classes)
        spine_Bps = min(c.spine_Bps for c in classes)
        group = leaf_uplinks(topology, classes[0].example)[1]
    servers_per_domain = max(1, per_domain // topology.gpus_per_server)
    leaf_hop_us, pod_hop_us, groups_per_pod = fabric_tier_latencies(topology) if n_nodes > 1 else (0.0, 0.0, 1)
    uplinks, uplink_Bps = leaf_uplink_links(topology, classes[0].example) if math.isfinite(spine_Bps) else (0, 0.0)
    return CommView(
        n_ranks=topology.n_gpus,
        n_nodes=n_nodes,
        ranks_per_node=min(per_domain, topology.n_gpus),
        arch=topology.gpu.arch,
        intra_kind=kind,
        intra_Bps=min(c.intra_Bps for c in classes),
        net_Bps=net_Bps * servers_per_domain,
        nics_per_node=topology.nics_per_server * servers_per_domain,
        transport=topology.transport,
        nvls=topology.nvls,
        sharp=topology.sharp,
        gpudirect_rdma=topology.gpudirect_rdma,
        spine_Bps=spine_Bps * servers_per_domain,
        nodes_per_leaf_group=max(1, group // servers_per_domain),
        # NVLink domains spanning servers are Grace trays (GB200/GB300 NVL72, GH200 NVL32), whose NICs hang
        # off the Grace CPU; NCCL reaches them over NVLink-C2C (paths.cc: NCCL_NET_GDR_C2C)
        gpu_nic_path="c2c" if servers_per_domain > 1 else topology.gpu_nic_path,
        host_cpu=topology.host_cpu,
        cross_leaf_hop_us=leaf_hop_us,
        cross_pod_hop_us=pod_hop_us,
        leaf_groups_per_pod=groups_per_pod,
        ecmp=topology.ecmp,
        uplinks_per_leaf=uplinks,
        uplink_Bps=uplink_Bps,
        rails_per_leaf=rails_per_leaf(topology),
        bridge_Bps=min(bridge_Bps(topology, c.example) for c in classes),
        nvswitch=layout in ("nvswitch", "nvl72"),
    )
