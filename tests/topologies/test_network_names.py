"""Networks in words: the NICs' count and rate a description states (topologies.network_names)."""

from __future__ import annotations

import pytest

from topologies.network_names import described_nics


@pytest.mark.parametrize(("text", "count", "nic_gbps"), [
    ("8x 400Gb/s NDR InfiniBand", 8, 400.0),
    ("RoCE v2, 8x200G", 8, 200.0),
    ("4 x HDR200", 4, 200.0),
    ("NDR400 IB, 8 HCAs", 8, 400.0),
    ("one HCA per node, EDR", 1, 100.0),
    ("2 x ConnectX-4 100GbE", 2, 100.0),  # ConnectX-4's 4 is a part's name, not a count
    ("8 x 50 GB/s", 8, 400.0),  # bytes: x 8
    ("HDR100 InfiniBand, 4 ports", 4, 100.0),  # a split HDR port
    ("3.2 Tbps EFA, 32 adapters", 32, 100.0),  # above any NIC port: the node's, split
    ("1600 Gbps per node, 8 NICs", 8, 200.0),
    ("200GbE x 4", 4, 200.0),  # the count after the rate
    ("NDR x 8", 8, 400.0),
])
def test_count_and_rate_of_a_description(text: str, count: int, nic_gbps: float) -> None:
    nics = described_nics(text)
    assert nics.count == count and nics.nic_gbps(count) == pytest.approx(nic_gbps)


@pytest.mark.parametrize(("text", "count", "rate"), [
    ("InfiniBand NDR", None, 400.0),
    ("EFA, 32 adapters", 32, None),
    ("a4-highgpu-8g", None, None),  # a machine type's 8g is no rate
    ("backend RDMA network", None, None),
])
def test_what_a_description_leaves_out_is_none(text: str, count: int | None, rate: float | None) -> None:
    nics = described_nics(text)
    assert (nics.count, nics.rate_gbps) == (count, rate)
