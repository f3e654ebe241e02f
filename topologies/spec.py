"""Topology specs: the pydantic v2 models a user writes (presets, scenario files, manifest entries),
their cross-field checks, and the conversion of validation errors into one-line `ConfigError`s.

A `TopologySpec` says what a cluster is made of; `topologies.build.build` turns it into a graph.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from simulator.core.errors import ConfigError
from simulator.core.units import from_text, parse_gbps
from topologies.gpu_names import table_gpu_name
from topologies.hardware import gpu_spec, gpus_fitting, intra_node_platform

Transport = Literal["ib", "roce", "efa", "slingshot", "tcpx", "tcpxo", "sockets", "ethernet"]
IntraNodeKind = Literal[
    "nvswitch-nvlink2",
    "nvswitch-nvlink3",
    "nvswitch-nvlink4",
    "nvswitch-nvlink5",
    "nvswitch-nvlink3-8links",
    "nvswitch-nvlink3-4links",
    "nvswitch-nvlink4-8links",
    "nvlink4-full-mesh-4",
    "nvlink3-full-mesh-4",
    "nvlink2-full-mesh-4",
    "nvlink2-hybrid-cube-mesh",
    "nvlink5-nvl72",
    "pcie5",
    "pcie4",
    "pcie3",
    "pcie3-no-p2p",
    "pcie4-no-p2p",
    "pcie5-no-p2p",
    "pcie4-nvlink-bridges",
    "pcie5-nvlink-bridges",
]
FabricKind = Literal["single_switch", "leaf_spine", "rail_optimized"]
GpuNicPath = Literal["pxb", "phb", "c2c"]
HostCpu = Literal["intel", "amd", "arm"]
Routing = Literal["adaptive", "ecmp"]

# NIC speed assumed when a spec omits nic_gbps (then nic_gbps_presumed is set): the commonest speed of
# each transport in GPU clusters. ib: NDR 400 Gb/s ConnectX-7 (DGX H100/B200 compute fabric);
# roce: 200 GbE ConnectX-6 Dx/ConnectX-7 class; efa: 100 Gb/s per EFA interface (AWS p4d 4x100,
# p5 32x100); slingshot: HPE Slingshot-11's Cassini NIC, 200 Gb/s; tcpx: GCP A3 High 4x200 Gb/s GPU NICs;
# tcpxo: GCP A3 Mega 8x200 Gb/s; sockets and plain ethernet: 100 GbE.
DEFAULT_NIC_GBPS: dict[str, float] = {
    "ib": 400.0,
    "roce": 200.0,
    "efa": 100.0,
    "slingshot": 200.0,
    "tcpx": 200.0,
    "tcpxo": 200.0,
    "sockets": 100.0,
    "ethernet": 100.0,
}
# How the switches spread flows over the spines when a spec does not say (FabricSpec.routing).
# adaptive: InfiniBand (NCCL turns on adaptive-routing-capable transfers by default where the port's link
# layer is InfiniBand and off on RoCE: src/transport/net_ib.cc, NCCL_IB_ADAPTIVE_ROUTING; NVIDIA Quantum
# switches route such traffic adaptively) and EFA (AWS SRD sprays a flow's packets over many paths:
# Shalev et al., "A Cloud-Optimized Transport Protocol for Elastic and Scalable HPC", IEEE Micro 2020).
# ecmp: RoCE and TCP-based transports, whose switches pin each flow to a path by a hash of its 5-tuple
# (Gangidi et al., "RDMA over Ethernet for Distributed Training at Meta Scale", SIGCOMM 2024).
ADAPTIVE_ROUTING_TRANSPORTS = ("ib", "efa", "slingshot")
# NCCL's socket transport (used over plain Ethernet too) always copies through host memory.
HOST_STAGED_TRANSPORTS = ("sockets", "ethernet")
NVL72_DOMAIN_GPUS = 72  # GB200 NVL72: 72 GPUs in one NVLink domain (NVIDIA GB200 NVL72 datasheet)

# The largest cluster clustersim builds: 32,768 servers (262,144 GPUs at 8 a server), beyond the largest
# training clusters built so far (~200k GPUs in 2025); building the graph of one takes ~25 s and ~2 GB.
MAX_NODES = 32_768
_SPEC_CONFIG = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # no field is infinite


# words of a CPU's name that say its vendor (host_cpu): the vendor, its server product line, or an architecture
# that is one vendor's ISA family as the host_cpu values split them
_HOST_CPU_WORDS = {"intel": "intel", "xeon": "intel", "amd": "amd", "epyc": "amd", "arm": "arm", "grace": "arm",
                   "aarch64": "arm", "arm64": "arm", "neoverse": "arm"}


def _host_cpu_name(value: Any) -> Any:
    """A CPU written by name ('AMD EPYC 7543P', 'Intel Xeon Platinum 8480C', 'NVIDIA Grace') read as its vendor;
    anything that names no vendor, or more than one, is left to the field's own check."""
    if not isinstance(value, str):
        return value
    vendors = {_HOST_CPU_WORDS[word] for word in re.findall(r"[a-z0-9]+", value.lower()) if word in _HOST_CPU_WORDS}
    return vendors.pop() if len(vendors) == 1 else value


class InterNodeSpec(BaseModel):
    """The network between servers: transport, NICs per server and their speed."""

    model_config = _SPEC_CONFIG

    transport: Transport = Field(
        description="NCCL network transport: ib (InfiniBand verbs), roce (RoCE v2), efa (AWS EFA), slingshot (HPE "
        "Slingshot-11 through the OFI plugin's CXI provider), tcpx/tcpxo "
        "(GCP GPUDirect-TCPX/TCPXO), sockets (NCCL socket transport), ethernet (plain Ethernet, sockets)."
    )
    nics_per_node: int = Field(strict=True, ge=1, description="Network interfaces per server used for GPU traffic.")
    nic_gbps: Annotated[float, BeforeValidator(from_text(parse_gbps))] = Field(
        gt=0,
        description="Line rate of one NIC in Gbit/s (1e9 bit/s): 400, 400G, 400Gbps or 50GB/s (bytes, x 8). "
        "Omitted or null: the transport's commonest "
        "speed (see DEFAULT_NIC_GBPS) and nic_gbps_presumed is set.",
    )
    nic_gbps_presumed: bool = Field(
        default=False, description="True when nic_gbps was not stated and the transport's default was taken."
    )
    sharp: bool = Field(default=False, description="In-network reduction (InfiniBand SHARP / NCCL CollNet) on.")
    gpudirect_rdma: bool = Field(
        default=True,
        description="NICs read and write GPU memory directly. False: traffic bounces through host memory "
        "(extra PCIe hops via the CPU). Defaults to false for sockets/ethernet, which always stage.",
    )

    gpu_nic_path: GpuNicPath | None = Field(
        default=None,
        description="How a GPU reaches its NIC, in NCCL's path classes: pxb (through PCIe switches, as on HGX "
        "boards), phb (through the CPU's host bridge: NICs on the CPU's root ports), c2c (through a Grace CPU over "
        "NVLink-C2C). NCCL runs LL128 across nodes only over pxb, and over c2c from 2.27 (tuning.cc). Default: c2c "
        "for Grace superchips' GPUs (GH200, GB200, GB300), else pxb.",
    )
    host_cpu: Annotated[HostCpu | None, BeforeValidator(_host_cpu_name)] = Field(
        default=None,
        description="The servers' CPUs, whose cores run NCCL's proxy thread (it launches every network send and "
        "receive): intel, amd (x86) or arm, or the CPU's name ('AMD EPYC 7543P', 'Intel Xeon Platinum 8480C', "
        "'Grace'). NCCL prices each such launch at 2 us on AMD hosts and 1 us on the others (tuning.cc "
        "getNetOverhead), and so does the model. Default: arm for Grace superchips' GPUs (GH200, GB200, GB300), "
        "else intel.",
    )

    @model_validator(mode="before")
    @classmethod
    def _transport_defaults(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        filled = dict(data)
        transport = filled.get("transport")
        if filled.get("nic_gbps") is None and transport in DEFAULT_NIC_GBPS:
            filled["nic_gbps"] = DEFAULT_NIC_GBPS[transport]
            filled["nic_gbps_presumed"] = True
        if filled.get("gpudirect_rdma") is None:
            filled.pop("gpudirect_rdma", None)
            if transport in HOST_STAGED_TRANSPORTS:
                filled["gpudirect_rdma"] = False
        return filled

    @model_validator(mode="after")
    def _check(self) -> InterNodeSpec:
        if self.sharp and self.transport != "ib":
            raise ValueError(f"sharp: SHARP needs transport 'ib' (got {self.transport!r}); set sharp: false")
        if self.gpudirect_rdma and self.transport in HOST_STAGED_TRANSPORTS:
            raise ValueError(
                f"gpudirect_rdma: transport {self.transport!r} always stages through host memory; "
                "set gpudirect_rdma: false or use ib/roce/efa/slingshot/tcpx/tcpxo"
            )
        return self

    @property
    def nic_link_kind(self) -> str:
        """Link kind of this network's cables (tcpx, tcpxo and sockets are all TCP)."""
        return "tcp" if self.transport in ("tcpx", "tcpxo", "sockets") else self.transport


class LinkFault(BaseModel):
    """A degraded or failed device: every link into and out of it runs at `factor` of its rate."""

    model_config = _SPEC_CONFIG

    device: str = Field(description="A device id (s0/nic3, leaf2, spine0), or a role in every server "
                                    "(nic3 = rail 3 on all servers; gpu0; nvswitch).")
    factor: float = Field(ge=0.0, le=1.0, description="Bandwidth factor of its links: 0 = failed, 0.5 = half rate.")


class FabricSpec(BaseModel):
    """How the NICs of the servers are switched."""

    model_config = _SPEC_CONFIG

    kind: FabricKind = Field(
        default="rail_optimized",
        description="single_switch: every NIC on one switch; leaf_spine: servers under leaves, leaves under "
        "spines; rail_optimized: NIC i of every server on leaf (rail) i, rails joined by spines.",
    )
    oversubscription: float = Field(
        default=1.0, ge=1.0, description="Leaf downlink bandwidth / leaf uplink bandwidth (1 = non-blocking)."
    )
    nodes_per_leaf: int | None = Field(
        strict=True, default=None,
        ge=1,
        description="Servers under one leaf (rail_optimized: per scalable unit). Default: a leaf has 32 "
        "server-facing ports (half of a 64-port switch), so 32 for rails and 32 // nics_per_node for leaf_spine.",
    )
    spines: int | None = Field(
        strict=True, default=None,
        ge=1,
        description="Spine switches. Default: one per leaf uplink port (downlink ports / oversubscription), at "
        "most 64; each leaf-spine link carries the leaf's uplink bandwidth / spines.",
    )
    routing: Routing | None = Field(
        default=None,
        description="How a leaf spreads traffic over its spines: adaptive (per packet or flowlet: InfiniBand "
        "adaptive routing, EFA SRD, Spectrum-X) or ecmp (each flow pinned to one uplink by a hash of its "
        "headers: RoCE and TCP on plain Ethernet ECMP, or InfiniBand with static routing). Default: adaptive "
        "for ib and efa, ecmp otherwise. A single_switch fabric has no uplinks and ignores it.",
    )

    @model_validator(mode="after")
    def _check(self) -> FabricSpec:
        if self.kind == "single_switch":
            for field in ("nodes_per_leaf", "spines"):
                if getattr(self, field) is not None:
                    raise ValueError(f"{field}: not used by a single_switch fabric; use leaf_spine or rail_optimized")
            if self.oversubscription != 1.0:
                raise ValueError("oversubscription: a single_switch fabric has no uplinks; use leaf_spine")
        return self


def _table_gpu(value: Any) -> Any:
    """A GPU written as a device name ('NVIDIA H100 80GB HBM3') read as the table's (topologies.gpu_names)."""
    return (table_gpu_name(value) or value) if isinstance(value, str) else value


class TopologySpec(BaseModel):
    """A cluster: `nodes` identical servers of `gpus_per_node` GPUs, joined inside by `intra_node` and
    between servers by `inter_node` over `fabric`."""

    model_config = _SPEC_CONFIG

    name: str | None = Field(default=None, description="Name of the cluster (a preset name, or free text).")
    description: str | None = Field(default=None, description="One line saying what this cluster is.")
    gpu: Annotated[str, BeforeValidator(_table_gpu)] = Field(
        description="GPU model: a name of the GPU table (topologies/data/gpus.yaml), or the device name nvidia-smi "
        "and nccl-tests print for one (e.g. 'NVIDIA H100 80GB HBM3').")
    gpus_per_node: int = Field(strict=True, ge=1, description="GPUs used per server.")
    nodes: int = Field(
        strict=True, ge=1, le=MAX_NODES, description=f"Servers (nodes) in the cluster, at most {MAX_NODES:,}.")
    intra_node: IntraNodeKind = Field(description="How the GPUs of a server are joined (data/intra_node.yaml).")
    inter_node: InterNodeSpec | None = Field(
        default=None, description="The network between servers; required when nodes > 1 (except within NVL72)."
    )
    fabric: FabricSpec = Field(default_factory=FabricSpec, description="Switching of the inter-node network.")
    nvlink_domain_gpus: int | None = Field(
        strict=True, default=None, ge=1,
        description="GPUs per NVLink domain for intra_node nvlink5-nvl72. Default 72 (a whole rack); a job that "
        "does not fill whole racks (e.g. 128 GPUs) is split evenly over the fewest racks that hold it (2 x 64).")
    link_faults: tuple[LinkFault, ...] = Field(
        default=(), description="Degraded or failed devices (what-if); traffic reroutes around failures.")
    gpu_power_limit_w: float | None = Field(
        default=None, gt=0, description="Board power cap per GPU (nvidia-smi --power-limit), at most the GPU's TDP; "
        "default: the TDP.")

    @property
    def gpus_per_nvlink_domain(self) -> int:
        """GPUs that share one NVLink fabric: the server's GPUs, or the NVL72 domain (nvlink_domain_gpus, else
        even_nvlink_domain_gpus)."""
        if self.intra_node == "nvlink5-nvl72":
            return self.nvlink_domain_gpus or even_nvlink_domain_gpus(self.nodes, self.gpus_per_node)
        return self.gpus_per_node

    @property
    def uneven_nvlink_note(self) -> str | None:
        """For NVL72 racks left to the default split: why it prices more, smaller domains than the racks that
        hold the job (uneven_nvl72_note); None otherwise."""
        if self.intra_node != "nvlink5-nvl72" or self.nvlink_domain_gpus is not None:
            return None
        return uneven_nvl72_note(self.nodes, self.gpus_per_node)

    @property
    def routing(self) -> str:
        """How the fabric spreads flows over its spines: fabric.routing, or the transport's default
        (adaptive for ADAPTIVE_ROUTING_TRANSPORTS, ecmp otherwise)."""
        if self.fabric.routing is not None:
            return self.fabric.routing
        net = self.inter_node
        return "adaptive" if net is None or net.transport in ADAPTIVE_ROUTING_TRANSPORTS else "ecmp"

    @model_validator(mode="after")
    def _check(self) -> TopologySpec:
        try:
            gpu = gpu_spec(self.gpu)
        except ConfigError as exc:
            raise ValueError(f"gpu: {exc}") from None
        if self.gpu_power_limit_w is not None and self.gpu_power_limit_w > gpu.tdp_w:
            raise ValueError(f"gpu_power_limit_w: {self.gpu_power_limit_w:g} W is above the {gpu.name}'s TDP of "
                             f"{gpu.tdp_w:g} W")
        platform = intra_node_platform(self.intra_node)
        if self.gpus_per_node > platform.max_gpus_per_node:
            raise ValueError(
                f"gpus_per_node: {self.gpus_per_node} is more than intra_node {self.intra_node!r} holds "
                f"(at most {platform.max_gpus_per_node})"
            )
        if not platform.fits(gpu) and platform.layout == "pcie_bridged":
            raise ValueError(
                f"intra_node: {self.intra_node!r} joins PCIe cards in pairs by NVLink bridges; {gpu.name} "
                + ("is a module, not a card" if gpu.form_factor == "sxm" else "has no NVLink for a bridge")
                + f": use intra_node pcie{gpu.pcie_gen}" + (" or an NVSwitch / NVLink platform" if gpu.nvlinks else "")
            )
        if not platform.fits(gpu) and gpu.form_factor == "pcie":
            bridges = f", or pcie{gpu.pcie_gen}-nvlink-bridges for cards bridged in pairs" if gpu.nvlinks else ""
            raise ValueError(
                f"intra_node: {self.intra_node!r} wires SXM modules; {gpu.name} is a PCIe card (NVLink only through "
                f"bridges between cards): use intra_node pcie{gpu.pcie_gen} (or pcie{gpu.pcie_gen}-no-p2p{bridges})"
            )
        if not platform.fits(gpu):
            module_links = platform.module_nvlinks or platform.nvlinks_per_gpu
            raise ValueError(
                f"intra_node: {self.intra_node!r} takes modules of {module_links} NVLink{platform.nvlink_gen} links; "
                f"{gpu.name} has {gpu.nvlinks} NVLink{gpu.nvlink_gen} links. GPUs that fit: "
                f"{', '.join(gpus_fitting(platform))}"
            )
        if self.nvlink_domain_gpus is not None and platform.layout != "nvl72":
            raise ValueError("nvlink_domain_gpus: only for intra_node 'nvlink5-nvl72'")
        domain = self.gpus_per_nvlink_domain
        if domain % self.gpus_per_node:
            raise ValueError(f"nvlink_domain_gpus: {domain} is not a multiple of gpus_per_node {self.gpus_per_node}")
        n_gpus = self.nodes * self.gpus_per_node
        if n_gpus > domain and n_gpus % domain:
            raise ValueError(f"nvlink_domain_gpus: {n_gpus} GPUs do not fill NVLink domains of {domain}; give a "
                             f"divisor of {n_gpus} (or leave it out: the GPUs split evenly over the fewest racks, "
                             f"{even_nvlink_domain_gpus(self.nodes, self.gpus_per_node)} a rack)")
        if self.nodes > 1 and self.inter_node is None and self.nodes * self.gpus_per_node > domain:
            raise ValueError(
                f"inter_node: required when nodes > 1 (nodes={self.nodes}): give transport, nics_per_node, nic_gbps"
            )
        return self


def nics_of_gpus_used(nics_per_node: int, server_gpus: int, gpus_used: int) -> int:
    """NICs a node using `gpus_used` of a server's `server_gpus` GPUs sends through. A server with a NIC or more
    per GPU (rail-optimised, as DGX / HGX H100 with 8 NICs) gives each GPU the NIC on its PCIe switch, and NCCL
    sends each GPU's traffic through that NIC, so the node has the NICs of the GPUs it uses; a server whose GPUs
    share NICs keeps all of them."""
    if gpus_used >= server_gpus or nics_per_node < server_gpus:
        return nics_per_node
    return max(1, nics_per_node * gpus_used // server_gpus)


def nics_follow_gpus(base: Mapping[str, Any], data: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`data` (the topology fields `base` with `overrides` applied) with its NIC count following a smaller
    `gpus_per_node` (nics_of_gpus_used) when the overrides replace that count and leave the NICs as they were."""
    inter, stated = base.get("inter_node"), overrides.get("inter_node")
    nics = inter.get("nics_per_node") if isinstance(inter, Mapping) else None
    server, used = base.get("gpus_per_node"), overrides.get("gpus_per_node")
    if not (isinstance(nics, int) and isinstance(server, int) and isinstance(used, int)) \
            or not isinstance(data.get("inter_node"), Mapping):
        return data  # nothing to follow, or values the spec's validation will name
    if isinstance(stated, Mapping) and "nics_per_node" in stated:
        return data
    return {**data, "inter_node": {**data["inter_node"], "nics_per_node": nics_of_gpus_used(nics, server, used)}}


@functools.cache
def even_nvlink_domain_gpus(nodes: int, gpus_per_node: int) -> int:
    """GPUs a job holds in each NVL72 rack: the whole rack (NVL72_DOMAIN_GPUS) when its GPUs fill whole racks
    or fit in one, else its servers split evenly over the fewest racks that hold them (128 GPUs in trays of 4:
    2 racks of 64, as a scheduler placing equal blocks a rack leaves them; 100: 5 racks of 20)."""
    n_gpus = nodes * gpus_per_node
    if n_gpus <= NVL72_DOMAIN_GPUS or n_gpus % NVL72_DOMAIN_GPUS == 0:
        return NVL72_DOMAIN_GPUS
    racks = -(-n_gpus // NVL72_DOMAIN_GPUS)
    while nodes % racks:
        racks += 1
    return n_gpus // racks


def uneven_nvl72_note(nodes: int, gpus_per_node: int) -> str | None:
    """Why the default split prices a job that the fewest racks would hold unevenly (even_nvlink_domain_gpus)
    as more, smaller NVLink domains, and which tray counts nearby split evenly; None when it does not. The
    collective model takes equal domains, so 19 trays go as 19 one-tray domains, not as 10 + 9 (or 18 + 1)
    trays of two racks: the job is priced with far less NVLink than it would have."""
    n_gpus = nodes * gpus_per_node
    domain = even_nvlink_domain_gpus(nodes, gpus_per_node)
    racks = -(-n_gpus // NVL72_DOMAIN_GPUS)
    if n_gpus // domain <= racks:
        return None
    per_rack = NVL72_DOMAIN_GPUS // gpus_per_node

    def even(trays: int) -> bool:
        return trays % -(-trays // per_rack) == 0

    below = next(t for t in range(nodes - 1, 0, -1) if even(t))
    above = next(t for t in range(nodes + 1, 2 * nodes + per_rack) if even(t))
    return (f"{n_gpus} GPUs ({nodes} trays of {gpus_per_node}) split evenly over NVL72 racks only as "
            f"{n_gpus // domain} NVLink domains of {domain} GPUs, where {racks} racks hold them unevenly; the model "
            f"takes equal domains, so it prices that split (less NVLink than the job would have): {below} or "
            f"{above} trays split evenly over the fewest racks")


_FIELD_PREFIX = re.compile(r"^([a-z_]+): (.*)$", re.DOTALL)


def describe_validation_error(exc: ValidationError) -> str:
    """One line per the whole error: `field.path: message (got value)` joined by '; '."""
    parts = []
    for err in exc.errors():
        path = [str(p) for p in err["loc"]]
        message = str(err["msg"]).removeprefix("Value error, ")
        match = _FIELD_PREFIX.match(message)
        if err["type"] == "value_error" and match:
            path.append(match.group(1))
            message = match.group(2)
        elif err["loc"] and isinstance(err.get("input"), str | int | float | bool | type(None)):
            message = f"{message} (got {err['input']!r})"
        parts.append(f"{'.'.join(path) or 'topology'}: {message}")
    return "; ".join(parts).replace("\n", " ")


def validate_topology_spec(data: Mapping[str, Any], source: str) -> TopologySpec:
    """Validate `data` as a TopologySpec; ConfigError naming `source` and the field path otherwise."""
    try:
        return TopologySpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {describe_validation_error(exc)}") from None


def topology_spec_from_fields(
    gpu: str,
    gpus_per_node: int,
    nodes: int,
    intra_node: str,
    inter_node: Mapping[str, Any] | None,
    nvlink_domain_gpus: int | None = None,
    name: str | None = None,
) -> TopologySpec:
    """Build a spec from the cluster fields of a manifest entry (../shared/data/nccl-tests/manifest.yaml).

    In `inter_node`, `note` (free text) is dropped, `nic_gbps: null` counts as omitted, and any other key
    that is not an InterNodeSpec field is dropped with a warning (as the manifest contract asks). A note
    written with a comma in a flow mapping (`{..., note: HDR, GPUDirect RDMA on}`) reads in YAML as the note
    and a key of several words with no value: such keys are the note's text, dropped with it silently.
    """
    data: dict[str, Any] = {
        "name": name,
        "gpu": gpu,
        "gpus_per_node": gpus_per_node,
        "nodes": nodes,
        "intra_node": intra_node,
        "nvlink_domain_gpus": nvlink_domain_gpus,
    }
    if inter_node is not None:
        known = InterNodeSpec.model_fields
        note_text = {key for key, value in inter_node.items()
                     if "note" in inter_node and value is None and len(str(key).split()) > 1}
        ignored = sorted(str(key) for key in inter_node if key not in known and key != "note" and key not in note_text)
        if ignored:
            warnings.warn(f"{name or 'manifest entry'}: inter_node: ignored unknown keys {ignored}", stacklevel=2)
        data["inter_node"] = {key: value for key, value in inter_node.items() if key in known}
    return validate_topology_spec(data, source=name or "manifest entry")
