"""Routes through a built topology: which directed links a transfer from one device to another uses.

The rules, in the order NCCL's transports would pick them:
1. A route never passes through a GPU or a NIC that is not one of its ends (GPUs and NICs are not
   routers; PXN-style relays through a peer GPU are the collective model's business).
2. Devices that share a server, or GPUs that share an NVLink domain, are joined by a *local route*: the
   least-cost path inside those servers and their domain NVSwitch, the cost of a link being the time to
   move a 1 MiB reference message across it (latency + 1 MiB / bandwidth), so NVLink beats PCIe and
   a direct NVLink beats a PCIe detour. Peer-to-peer off: GPU to GPU is staged through the host memory
   of the source GPU's CPU. GPUDirect RDMA off: GPU <-> NIC is staged through the host memory of the
   NIC's CPU (the route goes up to the CPU and back down, so it may use a PCIe link in both directions).
3. Anything else leaves its server through a NIC (a GPU uses its first affine NIC, see
   topologies.layout.nics_of_gpu; another device its nearest NIC), crosses the fabric and enters the
   destination server through the destination's NIC. Between two leaves the spine is chosen like the
   real fabric does: InfiniBand by destination (D-mod-k, as OpenSM's fat-tree routing), Ethernet
   transports by a CRC32 hash of the two ends (ECMP). Routes are deterministic and memoised.
"""

from __future__ import annotations

import heapq
import zlib
from collections.abc import Callable
from math import inf

import networkx as nx

from simulator.core.errors import TopologyError
from topologies.layout import device_id, nics_of_gpu

Edge = tuple[str, str]

REFERENCE_BYTES = float(1 << 20)
_NOT_ROUTERS = ("gpu", "nic")
_SWITCHES = ("leaf", "spine", "core")


class Router:
    """Computes and memoises routes over one frozen topology graph."""

    def __init__(self, graph: nx.DiGraph, gpus_per_server: int, nics_per_server: int, p2p: bool, gdr: bool) -> None:
        self._graph = graph
        self._gpus = gpus_per_server
        self._nics = nics_per_server
        self._p2p = p2p
        self._gdr = gdr
        self._routes: dict[Edge, list[Edge]] = {}

    def path(self, src: str, dst: str) -> list[Edge]:
        """The route from src to dst as directed links (see the module docstring)."""
        route = self._routes.get((src, dst))
        if route is None:
            for device in (src, dst):
                if device not in self._graph:
                    raise TopologyError(f"no device {device!r} in this topology")
            route = self._route(src, dst)
            self._routes[src, dst] = route
        return list(route)

    def _kind(self, device: str) -> str:
        return str(self._graph.nodes[device]["kind"])

    def _server(self, device: str) -> int:
        return int(self._graph.nodes[device]["server"])

    def _domain(self, device: str) -> str | None:
        """The NVLink-domain switch a GPU hangs on, or the switch itself (None outside NVL72 domains)."""
        if self._kind(device) == "nvswitch" and self._server(device) < 0:
            return device
        if self._kind(device) != "gpu":
            return None
        for peer in self._graph.succ[device]:
            if self._kind(peer) == "nvswitch" and self._server(peer) < 0:
                return str(peer)
        return None

    def _route(self, src: str, dst: str) -> list[Edge]:
        if src == dst:
            return []
        same_server = self._server(src) >= 0 and self._server(src) == self._server(dst)
        domain = self._domain(src)
        if same_server or (domain is not None and domain == self._domain(dst)):
            return self._local(src, dst)
        exit_nic, entry_nic = self._nic_for(src, dst), self._nic_for(dst, src)
        return self._local(src, exit_nic) + self._fabric(exit_nic, entry_nic) + self._local(entry_nic, dst)

    def _local(self, src: str, dst: str) -> list[Edge]:
        """Route inside the servers of src and dst (and their NVLink domain), with host staging."""
        if src == dst:
            return []
        kinds = (self._kind(src), self._kind(dst))
        region = {self._server(src), self._server(dst)}
        staging = None
        if kinds == ("gpu", "gpu") and not self._p2p:
            staging = src
        elif sorted(kinds) == ["gpu", "nic"] and not self._gdr:
            staging = src if kinds[0] == "nic" else dst
        if staging is not None:
            cpu = self._search(staging, lambda n: self._kind(n) == "cpu", region)[-1][1]
            return self._search(src, lambda n: n == cpu, region) + self._search(cpu, lambda n: n == dst, region)
        return self._search(src, lambda n: n == dst, region)

    def _nic_for(self, device: str, peer: str) -> str:
        """Where `device` meets the fabric: itself (a NIC or switch), a GPU's NIC, or the nearest NIC."""
        kind = self._kind(device)
        if kind == "nic" or kind in _SWITCHES:
            return device
        if self._nics == 0:
            raise TopologyError(f"no route from {device} to {peer}: the servers have no network (inter_node)")
        if kind == "gpu":
            local = int(self._graph.nodes[device]["local"])
            own = device_id(self._server(device), f"nic{nics_of_gpu(local, self._gpus, self._nics)[0]}")
            if self._graph.out_degree(own):
                return own
            # its NIC failed: the nearest NIC that still has links (NCCL falls back to another NIC)
        return self._search(device, lambda n: self._kind(n) == "nic" and self._graph.out_degree(n) > 0,
                            {self._server(device)})[-1][1]

    def _search(self, src: str, accept: Callable[[str], bool], region: set[int]) -> list[Edge]:
        """Least-cost path from src to the first device `accept`s, through devices of `region`'s servers
        and NVLink-domain switches only, never through a GPU or NIC it does not accept."""
        graph, nodes = self._graph, self._graph.nodes
        best = {src: 0.0}
        previous: dict[str, str] = {}
        heap = [(0.0, 0, src)]
        pushed = 1
        while heap:
            cost, _, u = heapq.heappop(heap)
            if cost > best[u]:
                continue
            if u != src and accept(u):
                route = [u]
                while route[-1] != src:
                    route.append(previous[route[-1]])
                route.reverse()
                return list(zip(route[:-1], route[1:], strict=True))
            for v, link in graph.succ[u].items():
                attrs = nodes[v]
                if attrs["kind"] in _NOT_ROUTERS and not accept(v):
                    continue
                if attrs["server"] not in region and not (attrs["kind"] == "nvswitch" and attrs["server"] < 0):
                    continue
                new_cost = cost + link["latency_s"] + REFERENCE_BYTES / link["bandwidth_Bps"]
                if new_cost < best.get(v, inf):
                    best[v] = new_cost
                    previous[v] = u
                    heapq.heappush(heap, (new_cost, pushed, v))
                    pushed += 1
        raise TopologyError(f"no route from {src} inside server(s) {sorted(region)}")

    def _fabric(self, a: str, b: str) -> list[Edge]:
        """Route between two NICs (or switches) across the switches of the fabric."""
        leaf_a, leaf_b = self._leaf(a), self._leaf(b)
        route = [] if a == leaf_a else [(a, leaf_a)]
        route += self._between_switches(leaf_a, leaf_b, a, b)
        return route + ([] if b == leaf_b else [(leaf_b, b)])

    def _leaf(self, device: str) -> str:
        if self._kind(device) in _SWITCHES:
            return device
        for peer in self._graph.succ[device]:
            if self._kind(peer) in _SWITCHES:
                return str(peer)
        raise TopologyError(f"{device} is not attached to the fabric")

    def _between_switches(self, leaf_a: str, leaf_b: str, a: str, b: str) -> list[Edge]:
        if leaf_a == leaf_b:
            return []
        graph = self._graph
        spines = sorted(s for s in graph.succ[leaf_a] if s in graph.pred[leaf_b] and self._kind(s) in _SWITCHES)
        if spines:
            if graph.edges[leaf_a, spines[0]]["kind"] == "ib":
                pick = int(graph.nodes[b]["server"]) * max(self._nics, 1) + int(graph.nodes[b]["local"])
            else:
                pick = zlib.crc32(f"{a}>{b}".encode())
            spine = spines[pick % len(spines)]
            return [(leaf_a, spine), (spine, leaf_b)]
        switches = nx.subgraph_view(graph, filter_node=lambda n: self._kind(n) in _SWITCHES)
        try:
            nodes = nx.shortest_path(switches, leaf_a, leaf_b)
        except nx.NetworkXNoPath:
            raise TopologyError(f"no route from {a} to {b}: the fabric is partitioned") from None
        return list(zip(nodes[:-1], nodes[1:], strict=True))
