"""Every cluster of the shared nccl-tests manifest builds into a topology."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml

from topologies.build import build
from topologies.spec import topology_spec_from_fields

MANIFEST = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nccl-tests" / "manifest.yaml"
ENTRIES = yaml.safe_load(MANIFEST.read_text()) if MANIFEST.exists() else []


@pytest.mark.skipif(not MANIFEST.exists(), reason=f"shared manifest not found at {MANIFEST}")
@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_manifest_entry_builds(entry):
    """The entry's cluster fields make a spec whose topology has nodes x gpus_per_node GPUs, without a warning
    (the flow-style notes' comma-split text, "GPUDirect RDMA on", is note text, not an unknown key)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        spec = topology_spec_from_fields(
            gpu=entry["gpu"], gpus_per_node=entry["gpus_per_node"], nodes=entry["nodes"],
            intra_node=entry["intra_node"], inter_node=entry.get("inter_node"),
            nvlink_domain_gpus=entry.get("nvlink_domain_gpus"), name=entry["file"],
        )
    topo = build(spec)
    assert topo.n_gpus == entry["nodes"] * entry["gpus_per_node"]
    assert sum(1 for _, kind in topo.graph.nodes(data="kind") if kind == "gpu") == topo.n_gpus
    if entry["nodes"] > 1:
        assert topo.path(topo.gpu_id(0, 0), topo.gpu_id(entry["nodes"] - 1, 0))
