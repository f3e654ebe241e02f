"""The free parameters of the collective model, their priors and their physical bounds.

The prior of each parameter is a published fact (see simulator.collectives.comm, transports and
nccl_constants); calibration (simulator.calibration.fit) replaces it with a value fitted to a
cluster's measured nccl-tests runs, within bounds that keep it physical. Latency parameters are
scales on NCCL's published constants, so one number moves a whole table coherently.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from simulator.collectives.comm import INTRA_EFFICIENCY, NVLS_EFFICIENCY, CommView
from simulator.collectives.nccl_constants import NET_OVERHEAD_US, P2P_NET_OPS_PER_PEER
from simulator.collectives.transports import TRANSPORTS


@dataclass(frozen=True)
class ParamInfo:
    """How a parameter may vary, and what it means."""

    lower: float
    upper: float
    description: str
    network: bool = False  # only constrained by multi-node measurements


PARAMS: dict[str, ParamInfo] = {
    "intra_efficiency": ParamInfo(
        0.05, 1.0, "achievable fraction of the intra-node link rate (NVLink, PCIe P2P or host staging)"),
    "nvls_efficiency": ParamInfo(0.05, 1.0, "achievable fraction of the NVLink rate for NVLink SHARP"),
    "net_efficiency": ParamInfo(0.05, 1.0, "achievable fraction of the NICs' line rate", network=True),
    "net_extra_latency_us": ParamInfo(
        0.0, 500.0, "transport latency per network hop beyond NCCL's network constant, us", network=True),
    "latency_scale": ParamInfo(0.2, 5.0, "scale on NCCL's base and intra-node hop latencies"),
    "net_latency_scale": ParamInfo(0.2, 5.0, "scale on NCCL's network hop latency", network=True),
    "sync_hops": ParamInfo(0.0, 5.0, "hop latencies each chunk handshake costs"),
    "p2p_peer_us": ParamInfo(
        0.0, 500.0, "cost of each point-to-point exchange with a peer on another node, paid one peer after "
        "another (alltoall, sendrecv): the proxy's launch of its send and its receive, us", network=True),
}
# Parameters that add microseconds (pulled towards their prior in 50 us units), not scales or fractions.
ADDITIVE_PARAMS = ("net_extra_latency_us", "p2p_peer_us")


@dataclass(frozen=True)
class ModelParams:
    """Values of the model's free parameters for one cluster (see PARAMS for meaning and bounds)."""

    intra_efficiency: float
    nvls_efficiency: float
    net_efficiency: float
    net_extra_latency_us: float
    latency_scale: float = 1.0
    net_latency_scale: float = 1.0
    sync_hops: float = 1.0
    # NCCL's proxy thread launches each network peer's send and receive in turn; prior_params prices the two
    # launches at NCCL's own figure for the host's CPU, and a cluster's multi-node alltoall logs refit it
    p2p_peer_us: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {f.name: float(getattr(self, f.name)) for f in fields(self)}

    def updated(self, values: dict[str, float]) -> ModelParams:
        return replace(self, **values)


def prior_params(v: CommView) -> ModelParams:
    """The published-facts prior for this cluster's link kinds and transport."""
    transport = TRANSPORTS[v.transport] if v.transport is not None else None
    return ModelParams(
        intra_efficiency=INTRA_EFFICIENCY[v.intra_kind],
        nvls_efficiency=NVLS_EFFICIENCY.get(v.arch, NVLS_EFFICIENCY["hopper"]),  # unused without NVLS
        net_efficiency=transport.efficiency if transport else TRANSPORTS["ib"].efficiency,
        net_extra_latency_us=transport.extra_hop_latency_us if transport else 0.0,
        p2p_peer_us=P2P_NET_OPS_PER_PEER * NET_OVERHEAD_US[v.host_cpu],
    )
