"""Calibration: the fit recovers known parameters, stays physical, never hurts; profiles round-trip."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from simulator.calibration.fit import (
    MIN_SENSITIVITY_PCT,
    fit_hardware,
    free_parameters,
    group_by_hardware,
    sensitivities,
)
from simulator.calibration.profile import CalibrationProfile, profile_from_dict, profile_to_dict
from simulator.collectives.comm import CommView
from simulator.collectives.params import PARAMS, prior_params
from simulator.collectives.predict import predict_collective
from simulator.core.errors import CalibrationError
from simulator.measurements.dataset import HardwareKey, MeasuredLog
from simulator.measurements.manifest import ManifestEntry
from simulator.measurements.nccl_tests import NcclRow

SIZES = [2**k for k in range(3, 34, 2)]


def _view(nodes: int) -> CommView:
    return CommView(n_ranks=8 * nodes, n_nodes=nodes, ranks_per_node=8, arch="ampere", intra_kind="nvlink",
                    intra_Bps=300e9, net_Bps=100e9 if nodes > 1 else 0.0, nics_per_node=4,
                    transport="ib" if nodes > 1 else None, nvls=False, sharp=False, gpudirect_rdma=True)


def synthetic_log(nodes: int, op: str = "all_reduce", **truth: float) -> MeasuredLog:
    """A log of `op` 'measured' on a cluster whose true parameters are the prior with `truth` changed."""
    view = _view(nodes)
    params = prior_params(_view(2)).updated(truth)
    rows = tuple(
        NcclRow(size, size // 4, "float", "sum", -1,
                predict_collective(view, op, size, params=params).time_s * 1e6,
                None, None, None, None, None, i + 1)
        for i, size in enumerate(SIZES)
    )
    entry = ManifestEntry(file=f"synthetic-{op}-{nodes}node.txt", collective=op, gpu="A100-SXM4-40GB",
                          gpus_per_node=8, nodes=nodes, intra_node="nvswitch-nvlink3",
                          inter_node={"transport": "ib", "nics_per_node": 4, "nic_gbps": 200} if nodes > 1 else None)
    return MeasuredLog(entry, view, rows)


TRUTH = {"intra_efficiency": 0.6, "net_efficiency": 0.7, "latency_scale": 1.5}


def _fit():
    logs = [synthetic_log(1, **TRUTH), synthetic_log(2, **TRUTH), synthetic_log(4, **TRUTH)]
    return logs, fit_hardware(HardwareKey("A100-SXM4-40GB", "nvswitch-nvlink3", "ib"), logs)


def test_fit_recovers_known_parameters():
    """Measurements made with known parameters are fitted back within 10%, in-sample error < 2%."""
    _, section = _fit()
    fitted = {p.name: p.value for p in section.params}
    for name, value in TRUTH.items():
        assert fitted[name] == pytest.approx(value, rel=0.10), name
    assert all(r.median_abs_pct_error_fitted < 2.0 for r in section.residuals)


def test_fit_stays_physical_and_never_hurts():
    """Every fitted value lies within its bounds (efficiencies in (0, 1], latencies > 0), and no
    source log's in-sample median error gets worse than the prior's overall."""
    logs, section = _fit()
    for p in section.params:
        assert PARAMS[p.name].lower <= p.value <= PARAMS[p.name].upper
        if "efficiency" in p.name:
            assert 0.0 < p.value <= 1.0
        if "latency" in p.name:
            assert p.value >= 0.0
    prior_total = sum(r.median_abs_pct_error_prior for r in section.residuals)
    fitted_total = sum(r.median_abs_pct_error_fitted for r in section.residuals)
    assert fitted_total <= prior_total


def test_single_node_logs_do_not_fit_network_parameters():
    """Without multi-node rows the network parameters stay at their prior, marked not fitted."""
    names = free_parameters([synthetic_log(1)])
    assert "net_efficiency" not in names and "net_extra_latency_us" not in names
    assert "intra_efficiency" in names


def test_network_hop_latencies_need_two_multi_node_counts():
    """At one multi-node count every row crosses the same network hops, so a hop's latency cannot be told from
    the base latency: the hop latency scale and the transport's extra latency stay at their prior, not fitted,
    while the network efficiency is. With runs of 2 and 4 nodes both are candidates, and a 4-node truth of a
    slower network hop is recovered within 20%."""
    one_count = free_parameters([synthetic_log(1), synthetic_log(2), synthetic_log(2, op="all_gather")])
    assert "net_efficiency" in one_count
    assert "net_latency_scale" not in one_count and "net_extra_latency_us" not in one_count
    truth = {"net_latency_scale": 2.0}
    logs = [synthetic_log(1, **truth), synthetic_log(2, **truth), synthetic_log(4, **truth)]
    assert {"net_latency_scale", "net_extra_latency_us"} <= set(free_parameters(logs))
    section = fit_hardware(HardwareKey("A100-SXM4-40GB", "nvswitch-nvlink3", "ib"), logs)
    fitted = {p.name: p for p in section.params}
    assert fitted["net_latency_scale"].fitted
    assert fitted["net_latency_scale"].value == pytest.approx(2.0, rel=0.20)
    pinned = fit_hardware(HardwareKey("A100-SXM4-40GB", "nvswitch-nvlink3", "ib"), logs[:2])
    assert {p.name: (p.fitted, p.value) for p in pinned.params}["net_latency_scale"] == (False, 1.0)


def test_single_node_logs_join_their_hardware_group():
    """Single-node logs of the same GPU and fabric join the networked group (they pin intra-node)."""
    groups = group_by_hardware([synthetic_log(1), synthetic_log(2)])
    assert list(groups) == [HardwareKey("A100-SXM4-40GB", "nvswitch-nvlink3", "ib")]
    assert len(next(iter(groups.values()))) == 2


def _profile() -> CalibrationProfile:
    _, section = _fit()
    return CalibrationProfile("0.1.0", "2026-12-02T00:00:00+00:00", (section,))


def test_profile_round_trips():
    """profile -> dict -> profile is identical."""
    profile = _profile()
    assert profile_from_dict(profile_to_dict(profile), "p.yaml") == profile


def test_profile_of_another_schema_version_is_refused():
    """A profile written by another schema version is an error naming the version."""
    data = profile_to_dict(_profile())
    data["schema_version"] = 99
    with pytest.raises(CalibrationError, match="schema_version 99"):
        profile_from_dict(data, "old.yaml")


def test_profile_value_outside_bounds_is_refused():
    """A hand-edited value outside its physical bounds is an error naming the parameter."""
    data = profile_to_dict(_profile())
    data["sections"][0]["parameters"]["net_efficiency"]["value"] = 1.7
    with pytest.raises(CalibrationError, match="net_efficiency"):
        profile_from_dict(data, "edited.yaml")


def test_profile_applies_to_same_hardware_at_any_node_count_only():
    """The section applies to the same GPU/fabric/transport (any node count, or one node); other
    hardware is an error unless forced."""
    profile = _profile()
    same = HardwareKey("A100-SXM4-40GB", "nvswitch-nvlink3", "ib")
    assert profile.section_for(same).hardware == same
    assert profile.section_for(replace(same, transport=None)).hardware == same
    other = HardwareKey("H100-SXM5-80GB", "nvswitch-nvlink4", "ib")
    with pytest.raises(CalibrationError, match="force"):
        profile.section_for(other)
    assert profile.section_for(other, force=True).hardware == same
    with pytest.raises(CalibrationError):
        profile.section_for(replace(same, transport="roce"))


def _large_only(log: MeasuredLog) -> MeasuredLog:
    return replace(log, rows=tuple(r for r in log.rows if r.size_bytes >= 2**29))


def test_unidentified_parameters_stay_at_their_prior():
    """Rows of 512 MiB and up are bandwidth-bound: a 10% change of the latency scale moves their
    predicted time by well under 0.5% rms, so it is left at its prior (1.0), marked not fitted, with
    its sensitivity reported; the efficiencies, which set those times, are fitted."""
    logs = [_large_only(synthetic_log(1, **TRUTH)), _large_only(synthetic_log(2, **TRUTH))]
    section = fit_hardware(HardwareKey("A100-SXM4-40GB", "nvswitch-nvlink3", "ib"), logs)
    by_name = {p.name: p for p in section.params}
    latency = by_name["latency_scale"]
    assert (latency.fitted, latency.value) == (False, 1.0)
    assert latency.sensitivity_pct is not None and latency.sensitivity_pct < MIN_SENSITIVITY_PCT
    assert by_name["intra_efficiency"].fitted and by_name["intra_efficiency"].sensitivity_pct > 5.0
    assert by_name["nvls_efficiency"].sensitivity_pct is None  # no NVLS rows: not even probed


def test_sensitivity_of_an_efficiency_is_its_share_of_the_time():
    """Bandwidth-bound rows: time ~ 1 / efficiency, so +10% efficiency changes log time by
    log(1.1) = 9.5% on the rows the intra-node link bounds (the one-node log: all of its rows)."""
    log = _large_only(synthetic_log(1))
    prior = prior_params(log.view)
    sensitivity = sensitivities([log], prior, ["intra_efficiency"])["intra_efficiency"]
    assert sensitivity == pytest.approx(100 * math.log(1.1), rel=0.05)


def test_a_value_pushed_onto_a_bound_is_flagged():
    """A log made with a network efficiency of 0.02 (below the 0.05 bound): the fit ends on the
    lower bound and says so."""
    logs = [synthetic_log(2, net_efficiency=0.02)]
    section = fit_hardware(HardwareKey("A100-SXM4-40GB", "nvswitch-nvlink3", "ib"), logs)
    net = next(p for p in section.params if p.name == "net_efficiency")
    assert net.value == pytest.approx(PARAMS["net_efficiency"].lower, abs=1e-3)
    assert net.at_bound == "lower"
    assert all(p.at_bound is None for p in section.params if p.name != "net_efficiency" and not p.fitted)


def test_profile_keeps_sensitivity_and_bound_and_refuses_a_bad_bound_word():
    """The YAML carries sensitivity_pct and at_bound per parameter; an at_bound other than
    lower/upper/null is an error naming the field."""
    data = profile_to_dict(_profile())
    params = data["sections"][0]["parameters"]
    assert {"sensitivity_pct", "at_bound"} <= set(params["intra_efficiency"])
    params["intra_efficiency"]["at_bound"] = "middle"
    with pytest.raises(CalibrationError, match="intra_efficiency.at_bound"):
        profile_from_dict(data, "edited.yaml")


def test_a_fit_records_each_log_release_and_the_profile_keeps_it():
    """fit_hardware stores each source log's release; the YAML round trip keeps it; the section's release is
    the newest stated; a profile written before the field reads as none stated."""
    logs = [replace(synthetic_log(1, **TRUTH), nccl_version="2.18.6"),
            replace(synthetic_log(2, **TRUTH), nccl_version="2.21.5"), synthetic_log(4, **TRUTH)]
    section = fit_hardware(HardwareKey("A100-SXM4-40GB", "nvswitch-nvlink3", "ib"), logs)
    assert [r.nccl for r in section.residuals] == ["2.18.6", "2.21.5", None]
    assert section.nccl_release == (2, 21)
    profile = CalibrationProfile("0.1.0", "2026-12-05T00:00:00+00:00", (section,))
    data = profile_to_dict(profile)
    assert profile_from_dict(data, "p.yaml") == profile
    for source in data["sections"][0]["sources"]:
        del source["nccl"]
    assert profile_from_dict(data, "old.yaml").sections[0].nccl_release is None


def test_crossval_clusters_split_on_the_network_providers_settings():
    """The same hardware and NCCL release with different libfabric settings (FI_*) are two clusters to
    cross-validate; NCCL's own variables (pins such as NCCL_ALGO) do not split a cluster."""
    from simulator.calibration.crossval import clusters

    def with_env(log: MeasuredLog, env: str, name: str) -> MeasuredLog:
        return replace(log, entry=log.entry.model_copy(
            update={"env": ManifestEntry._parse_env(env), "file": name, "nccl": "2.18.3"}))

    base = synthetic_log(2)
    logs = [with_env(base, "NCCL_ALGO=ring", "a.txt"), with_env(base, "NCCL_ALGO=tree", "b.txt"),
            with_env(base, "FI_CXI_RDZV_PROTO=alt_read", "c.txt"),
            with_env(base, "NCCL_ALGO=ring FI_CXI_RDZV_PROTO=alt_read", "d.txt")]
    groups = {key: sorted(log.file for log in members) for key, members in clusters(logs).items()}
    assert sorted(groups.values()) == [["a.txt", "b.txt"], ["c.txt", "d.txt"]]


def test_the_per_peer_cost_is_the_proxys_two_launches_and_grows_with_peers_off_the_node():
    """p2p_peer_us prices each peer on another node that alltoall (every one of them) or sendrecv (one) exchanges
    with in turn; its prior is the proxy's launch of a send and a receive at NCCL's figure for the host CPU (1 us
    each on Intel and Arm, 2 us on AMD: tuning.cc getNetOverhead), and it leaves collectives and single-node
    alltoall alone."""
    assert prior_params(_view(2)).p2p_peer_us == 2.0
    assert prior_params(replace(_view(2), host_cpu="amd")).p2p_peer_us == 4.0
    assert prior_params(replace(_view(2), host_cpu="arm")).p2p_peer_us == 2.0

    def added_us(op: str, nodes: int) -> float:
        view = _view(nodes)
        plain = predict_collective(view, op, 1024, params=prior_params(view).updated({"p2p_peer_us": 0.0})).time_s
        costly = predict_collective(view, op, 1024, params=prior_params(view).updated({"p2p_peer_us": 10.0})).time_s
        return (costly - plain) * 1e6

    assert added_us("alltoall", 2) == pytest.approx(8 * 10.0)  # 16 ranks, 8 on the other node
    assert added_us("alltoall", 4) == pytest.approx(24 * 10.0)
    assert added_us("sendrecv", 2) == pytest.approx(10.0)
    assert added_us("alltoall", 1) == added_us("all_reduce", 4) == 0.0


def test_fit_recovers_the_per_peer_cost_from_multi_node_alltoall_logs():
    """alltoall logs on 2 and 4 nodes with a 12 us per-peer cost: the fit finds it (within 10%); without a
    multi-node alltoall log the parameter is not identified and stays at its prior (2 us: an Intel host's two
    launches)."""
    logs = [synthetic_log(n, "alltoall", p2p_peer_us=12.0) for n in (2, 4)]
    section = fit_hardware(HardwareKey("A100-SXM4-40GB", "nvswitch-nvlink3", "ib"), logs)
    fitted = {p.name: p for p in section.params}
    assert fitted["p2p_peer_us"].fitted and fitted["p2p_peer_us"].value == pytest.approx(12.0, rel=0.10)
    _, plain = _fit()
    assert {p.name: p for p in plain.params}["p2p_peer_us"].value == 2.0
