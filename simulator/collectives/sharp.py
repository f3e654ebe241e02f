"""SHARP (NCCL CollNet) limits: when a communicator gets in-network reduction and when NCCL falls back.

Modelled (sourced):
- Streaming aggregation flows per switch. NVIDIA switches run at most 2 SHARP streaming aggregation
  flows, and NCCL opens one per HCA rail (NIC position) of the node, so a leaf switch must see at most
  two of a node's rails (NVIDIA HPC-X 2.25/2.26 manual, "NCCL-RDMA-SHARP Plugins": it is required that
  leaf switches connect the same HCA rail of every server). A rail-optimised leaf holds one rail; a
  leaf_spine or single-switch leaf holds every NIC of its servers (8 on a DGX), an NVL72 rack's rail leaf
  18 of its NICs. Beyond the limit the CollNet transport cannot be set up, and NCCL turns CollNet off for
  the communicator (src/transport/coll_net.cc: a failed setup sets collNetSupport = 0) and chooses among
  its other algorithms: the communicator is priced with those.
Not modelled (no published figure found): the aggregation nodes' buffer and OST quotas per job
(SHARP_COLL_JOB_QUOTA_*: set by the aggregation manager's configuration), the number of concurrent jobs
and trees per switch, the low-latency (LLT) vs streaming (SAT) threshold by message size, and the plugin's
per-device communicator cap (NCCL_SHARP_MAX_COMMS, 1 in nccl-rdma-sharp-plugins) across the several
communicators of a training step.
"""

from __future__ import annotations

from simulator.collectives.comm import CommView

# Streaming aggregation flows one switch runs (HPC-X manual, module docstring).
STREAMING_FLOWS_PER_SWITCH = 2


def collnet_available(v: CommView) -> bool:
    """SHARP in-network reduction for this communicator: on in the topology, across nodes, and within the
    switches' streaming aggregation flows (module docstring)."""
    return v.sharp and v.multi_node and v.rails_per_leaf <= STREAMING_FLOWS_PER_SWITCH
