"""Shared fixture for the topology tests: build a small cluster from a few spec fields."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from topologies.build import build
from topologies.model import Topology
from topologies.spec import TopologySpec

IB_8X400 = {"transport": "ib", "nics_per_node": 8, "nic_gbps": 400}


def _make(gpu: str = "H100-SXM5-80GB", gpus: int = 8, nodes: int = 2, intra: str = "nvswitch-nvlink4",
          net: dict[str, Any] | None = IB_8X400, **fields: Any) -> Topology:
    spec = TopologySpec(gpu=gpu, gpus_per_node=gpus, nodes=nodes, intra_node=intra, inter_node=net, **fields)
    return build(spec)


@pytest.fixture
def make() -> Callable[..., Topology]:
    """A builder taking gpu, gpus, nodes, intra, net (default 8x 400G IB; None for no network) and other fields."""
    return _make
