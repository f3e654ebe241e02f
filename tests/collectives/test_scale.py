"""Collectives at scale: NVLink domains of many servers (GB200 NVL72 racks) joined by a network."""

from __future__ import annotations

import math

import pytest

from simulator.collectives.comm import comm_view, gpu_to_network_Bps
from topologies.build import build
from topologies.presets import load_preset


def nvl72(racks: int, **overrides: object):
    return comm_view(build(load_preset("gb200-nvl72", nodes=18 * racks, **overrides)))


def test_a_failed_nic_in_an_nvl72_tray_reroutes_through_another_tray():
    """NIC 3 of tray 5 fails: its GPU's share leaves by the NIC its route to the next rack takes
    (another tray's), which then carries two GPUs' shares, so the rack's network rate halves (the GPUs
    send in lockstep); it does not fail to find a route inside its own NVLink domain."""
    healthy, failed = nvl72(2), nvl72(2, link_faults=[{"device": "s5/nic3", "factor": 0.0}])
    assert failed.n_nodes == 2
    assert failed.net_Bps == pytest.approx(healthy.net_Bps / 2)


def test_a_failed_nic_in_a_single_rack_changes_nothing():
    """One rack: nothing leaves the NVLink domain, so a failed NIC costs no bandwidth (and the
    network rate of its tray is not looked for)."""
    view = nvl72(1, link_faults=[{"device": "s5/nic3", "factor": 0.0}])
    assert (view.n_nodes, view.net_Bps) == (1, 0.0)


def test_a_partial_last_rack_finds_its_route_out():
    """20 trays: a full rack and a rack of 2 trays. A failed NIC in the partial rack reroutes towards
    the full rack (the next domain): its tray pushes a finite rate, half its healthy one."""
    topology = build(load_preset("gb200-nvl72", nodes=20, link_faults=[{"device": "s19/nic0", "factor": 0.0}]))
    healthy = build(load_preset("gb200-nvl72", nodes=20))
    rate = gpu_to_network_Bps(topology, 19)
    assert math.isfinite(rate)
    assert rate == pytest.approx(gpu_to_network_Bps(healthy, 19) / 2)
