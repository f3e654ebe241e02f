"""summarize: device and link counts and per-server figures of a built topology."""

from __future__ import annotations

import json

from topologies.summary import summarize


def test_summary_counts_of_two_dgx_h100(make):
    """2 x DGX H100: 16 GPUs, 16 NICs; 32 NVLink edges totalling 32 x 450 GB/s; 400 GB/s of NICs per server."""
    summary = summarize(make(nodes=2))
    assert (summary.n_gpus, summary.servers, summary.gpus_per_server) == (16, 2, 8)
    assert summary.devices_by_kind["gpu"] == 16 and summary.devices_by_kind["nic"] == 16
    assert summary.links_by_kind["nvlink"].count == 32
    assert summary.links_by_kind["nvlink"].total_bandwidth_Bps == 32 * 450e9
    assert summary.nic_bandwidth_per_server_Bps == 400e9
    assert summary.intra_bandwidth_Bps == 450e9 and summary.bisection_bandwidth_Bps == 400e9
    assert (summary.transport, summary.fabric, summary.routing) == ("ib", "rail_optimized", "adaptive")


def test_summary_is_json_ready(make):
    """to_dict() survives json round-trip with the link totals as plain mappings."""
    data = json.loads(json.dumps(summarize(make(nodes=1, net=None)).to_dict()))
    assert data["links_by_kind"]["nvlink"]["count"] == 16 and data["transport"] is None and data["routing"] is None
