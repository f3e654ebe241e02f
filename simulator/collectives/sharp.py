"""SHARP (NCCL CollNet) limits: when a communicator gets in-network reduction and when NCCL falls back.

Modelled (sourced):
- Streaming aggregation flows per switch, on first-generation Quantum (HDR) switches. NCCL opens one
  streaming aggregation flow per HCA rail (NIC position) of the node, and "NVIDIA switches allow a limited
  number of streaming aggregation flows (maximum: 2)", so leaf switches must each connect one rail of every
  server (NVIDIA HPC-X 2.25/2.26 manual, "NCCL-RDMA-SHARP Plugins"); SHARP's own release notes put
  Quantum at "one active tree per switch" and lift the limit from Quantum-2 (NDR) on: "multiple SHARP
  streaming aggregation operations can be operated in parallel by a single Quantum-2 switch. The limit is
  one active tree per port" (SHARP 3.13 "General Information", capabilities and limitations). The switch
  generation is read from the NIC speed: 200 Gb/s and below is HDR (Quantum), above it NDR (Quantum-2)
  or XDR. A rail-optimised leaf holds one rail; a leaf_spine or single-switch leaf holds every NIC of its
  servers (8 on a DGX). On an HDR fabric beyond the limit the CollNet transport cannot be set up, and NCCL
  turns CollNet off for the communicator (src/transport/coll_net.cc: a failed setup sets collNetSupport = 0)
  and chooses among its other algorithms: the communicator is priced with those.
Not modelled (no published figure found): the aggregation nodes' buffer and OST quotas per job
(SHARP_COLL_JOB_QUOTA_*: set by the aggregation manager's configuration), the number of concurrent jobs
and trees per switch, the low-latency (LLT) vs streaming (SAT) threshold by message size, and the plugin's
per-device communicator cap (NCCL_SHARP_MAX_COMMS, 1 in nccl-rdma-sharp-plugins) across the several
communicators of a training step.
"""

from __future__ import annotations

from simulator.collectives.comm import CommView

# Streaming aggregation flows one Quantum (HDR) switch runs (HPC-X manual, module docstring).
STREAMING_FLOWS_PER_SWITCH = 2
# The fastest NIC of an HDR (first-generation Quantum) fabric, Gb/s; faster NICs sit on Quantum-2 and later,
# whose streaming aggregation is limited per port, not per switch.
HDR_MAX_NIC_GBPS = 200.0


def collnet_available(v: CommView) -> bool:
    """SHARP in-network reduction for this communicator: on in the topology, across nodes, and, on an HDR
    fabric, within its switches' streaming aggregation flows (module docstring)."""
    if not (v.sharp and v.multi_node):
        return False
    nic_gbps = v.net_Bps / max(1, v.nics_per_node) * 8.0 / 1e9
    return nic_gbps > HDR_MAX_NIC_GBPS or v.rails_per_leaf <= STREAMING_FLOWS_PER_SWITCH
