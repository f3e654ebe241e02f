"""How each transport behaves beyond its line rate: achievable efficiency and latency floor.

NCCL's tuner knows one "network" hop latency (simulator.collectives.nccl_constants). Real
transports differ by an order of magnitude, and that is most of the small-message error of the
tuner on cloud fabrics. Each entry is a fact about the transport with its basis:

- ib: InfiniBand verbs with GPUDirect RDMA. ConnectX-6/7 reach ~96-98% of line rate in
  ib_write_bw (NVIDIA perftest reports: 48-49 GB/s on NDR 400G); NCCL adds the proxy's per-message
  cost, already in NCCL's network hop latency, so no extra floor.
- roce: RoCE v2 on the same NICs: same wire efficiency less Ethernet/IP/UDP headers (~4% on 4 KiB
  MTU), congestion control margin; a microsecond more per hop through Ethernet switches.
- efa: AWS Elastic Fabric Adapter (SRD over the AWS network) through aws-ofi-nccl: per-message
  latency of ~15-20 us (AWS EFA documentation and re:Invent talks quote ~15 us p50), so an extra
  ~15 us per network hop; sustained 85-90% of line rate (p4d/p5 nccl-tests published by AWS). The plugin also
  sets the protocols NCCL may use (plugin_env: Simple alone on the instances of pre-Hopper GPUs).
- slingshot: HPE Slingshot-11 (Cassini NIC, 200 Gb/s; Rosetta switches) through aws-ofi-nccl and
  libfabric's CXI provider. GPU-to-GPU osu_bw between Alps GH200 nodes reaches 23.99 GB/s of the NIC's 25 GB/s
  at 4 MiB (CSCS user documentation, OpenMPI page), and NCCL's sendrecv_perf 24.2 GB/s per GPU on 8 GH200
  nodes (NVIDIA/nccl issue 1272): 0.96, as InfiniBand. No per-message cost of the plugin on CXI is
  published, so no floor is added beyond NCCL's network hop latency; a cluster's own logs fit one
  (`clustersim calibrate`).
- tcpxo / tcpx: GCP GPUDirect-TCPXO / -TCPX (A3 Mega / A3 High): data moves over TCP with a
  receive-side datapath; published nccl-tests floors are ~100-120 us for small all_reduce
  (GCP A3 Mega docs), i.e. tens of microseconds per network hop; ~90% of line rate at large sizes.
- sockets: NCCL's plain socket transport (no RDMA): kernel TCP stack, ~25 us per hop, 60-70% of
  line rate with the default 2 sockets x 2 threads.
- ethernet: plain Ethernet with NCCL sockets and no offload, as sockets.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransportModel:
    """Latency floor added to each network hop and the achievable fraction of line rate."""

    kind: str
    extra_hop_latency_us: float
    efficiency: float


TRANSPORTS: dict[str, TransportModel] = {
    "ib": TransportModel("ib", extra_hop_latency_us=0.0, efficiency=0.96),
    "roce": TransportModel("roce", extra_hop_latency_us=1.0, efficiency=0.92),
    "efa": TransportModel("efa", extra_hop_latency_us=15.0, efficiency=0.87),
    "slingshot": TransportModel("slingshot", extra_hop_latency_us=0.0, efficiency=0.96),
    "tcpxo": TransportModel("tcpxo", extra_hop_latency_us=45.0, efficiency=0.90),
    "tcpx": TransportModel("tcpx", extra_hop_latency_us=45.0, efficiency=0.80),
    "sockets": TransportModel("sockets", extra_hop_latency_us=25.0, efficiency=0.65),
    "ethernet": TransportModel("ethernet", extra_hop_latency_us=25.0, efficiency=0.65),
}


# GPU generations whose EFA instances run aws-ofi-nccl's SENDRECV protocol: p3dn (V100), p4d and p4de (A100), g5
# (A10G) by the plugin's platform table (platform-aws.cpp); g4dn (T4), g6 (L4) and g6e (L40S) have no entry and one
# EFA rail a GPU, for which the plugin takes SENDRECV too (nccl_ofi_net.cpp, protocol selection)
EFA_SENDRECV_ARCHS = frozenset({"volta", "turing", "ampere", "ada"})


def plugin_env(transport: str | None, arch: str, gpudirect_rdma: bool = True) -> dict[str, str]:
    """The NCCL environment a cluster's network plugin sets before NCCL reads it; a user's own setting of the
    same variable wins (the plugin does not overwrite it). aws-ofi-nccl sets NCCL_PROTO=simple where LL and
    LL128, which write flags beside the data, could read a message before all its bytes landed:
    - where EFA does not deliver a message's bytes in order in 128-byte units: a fixed rule for p3dn, p4d and
      p4de from release 1.6.0 (2023, platform-aws.c force_proto_simple), a test of the device's in-order option
      since (platform_config_endpoint: "force the simple protocol as the LL/LL128 protocols can lead to data
      corruption without data delivery ordering"), which the devices of its SENDRECV protocol fail: the
      instances of pre-Hopper GPUs (EFA_SENDRECV_ARCHS). Hopper and later multi-GPU instances (p5, p5e, p5en,
      p6) run its RDMA protocol and keep LL and LL128;
    - without GPUDirect RDMA, from release 1.15.0 (2025, "Set NCCL_PROTO to simple when GDR is unsupported":
      NCCL would poll LL flags in host memory that the provider fills out of order).
    Not modelled: the one-GPU sizes p5.4xlarge and g7e.8xlarge run SENDRECV too (NCCL_PROTO=simple there is the
    user's to state)."""
    if transport == "efa" and (arch in EFA_SENDRECV_ARCHS or not gpudirect_rdma):
        return {"NCCL_PROTO": "simple"}
    return {}


# The network latency aws-ofi-nccl reports to NCCL (ncclNetProperties latency, us; platform-aws.cpp's table, from
# release 1.7.0): p3dn 150, p4d / p4de / p5 / p5e 75, p5en / p6 / g7e 35. NCCL's tuner adds it to every network
# hop (tuner.py); it is a setting for the tuner's choice, not a measured latency (TRANSPORTS has that). H200
# instances are taken as p5e (75; p5en reports 35).
EFA_REPORTED_LATENCY_US = {"volta": 150.0, "ampere": 75.0, "hopper": 75.0, "blackwell": 35.0}


def plugin_net_latency_us(transport: str | None, arch: str) -> float:
    """The network latency the cluster's network plugin reports to NCCL (0: none, as NCCL's own transports)."""
    return EFA_REPORTED_LATENCY_US.get(arch, 0.0) if transport == "efa" else 0.0
