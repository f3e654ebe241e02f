"""The representative cluster a prediction prices (topologies.build.build_representative): one server of each
fault group, what their rates depend on, and nothing else; the same rates, server groups and routes as the
whole cluster, and the whole cluster still there for the topology commands."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simulator.cli.app import app
from simulator.collectives.comm import comm_view, server_classes
from simulator.core.errors import ConfigError, TopologyError
from topologies.build import build, build_representative
from topologies.fabric import build_fabric, fabric_counts
from topologies.presets import load_preset
from topologies.spec import TopologySpec, validate_topology_spec
from topologies.summary import summarize

IB = {"transport": "ib", "nics_per_node": 8, "nic_gbps": 400}
ROCE_4 = {"transport": "roce", "nics_per_node": 4, "nic_gbps": 200}


def _spec(nodes: int, fabric: dict[str, Any], faults: list[tuple[str, float]], net: dict[str, Any] = IB,
          intra: str = "nvswitch-nvlink4", gpu: str = "H100-SXM5-80GB", gpus: int = 8) -> TopologySpec:
    return validate_topology_spec({
        "gpu": gpu, "gpus_per_node": gpus, "nodes": nodes, "intra_node": intra, "inter_node": net,
        "fabric": fabric, "link_faults": [{"device": d, "factor": f} for d, f in faults]}, "test")


FABRICS = [{"kind": "rail_optimized", "nodes_per_leaf": 4}, {"kind": "rail_optimized"},
           {"kind": "leaf_spine", "nodes_per_leaf": 2, "oversubscription": 2.0},
           {"kind": "leaf_spine", "nodes_per_leaf": 3, "spines": 5}, {"kind": "single_switch"}]


@st.composite
def faulty_specs(draw: st.DrawFn) -> TopologySpec:
    """A small cluster on one of several fabrics with up to three degraded or failed devices or roles."""
    nodes = draw(st.integers(1, 12))
    fabric = draw(st.sampled_from(FABRICS))
    net = draw(st.sampled_from([IB, ROCE_4]))
    whole = build(_spec(nodes, fabric, [], net))
    devices = sorted(str(n) for n in whole.graph) + ["nic1", "gpu3", "leaf", "spine", "nvswitch", "pcie2", "cpu1"]
    devices = [d for d in devices if d in whole.graph or d in {r for _, r in whole.graph.nodes(data="role")}]
    faults = draw(st.lists(st.tuples(st.sampled_from(devices), st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9])),
                           max_size=3))
    return _spec(nodes, fabric, faults, net)


def _outcome(function: Any, topology: Any) -> object:
    """What `function(topology)` returns, or the message of the TopologyError it raises (a failed PCIe switch
    can leave a GPU no route to its NIC: the prediction's error, which must be the same)."""
    try:
        return function(topology)
    except TopologyError as error:
        return str(error)


def _routes(topology: Any) -> list[object]:
    """The routes a prediction asks for: each class's GPUs to their NICs and to server 0 or 1 (or the error a
    route raises: a failed NIC or leaf leaves some unroutable)."""
    def route(src: str, dst: str) -> object:
        try:
            return topology.path(src, dst)
        except TopologyError as error:
            return str(error)

    routes = []
    for group in topology.server_groups:
        peer = 1 if group.example == 0 else 0
        for local in range(topology.gpus_per_server):
            gpu = topology.gpu_id(group.example, local)
            routes += [route(gpu, nic) for nic in topology.nics_of_gpu(group.example, local)]
            if topology.n_servers > 1:
                routes.append(route(gpu, topology.gpu_id(peer, local)))
    return routes


@settings(max_examples=60, deadline=None)
@given(faulty_specs())
def test_the_representative_cluster_prices_as_the_whole_one(spec: TopologySpec) -> None:
    """Degraded or failed devices anywhere, by id or role, on any fabric: the faults placed from the spec touch
    the servers they touch in the built graph, and the server classes, the communicator and the routes are
    identical; failures that cut GPUs off are the same error."""
    try:
        whole = build(spec)
    except TopologyError as cut:
        with pytest.raises(TopologyError) as same:
            build_representative(spec)
        assert str(same.value) == str(cut)
        return
    part = build_representative(spec)
    assert {s: sorted(f) for s, f in part.servers_touched.items()} == {
        s: sorted(f) for s, f in whole.servers_touched.items()}
    assert _outcome(server_classes, part) == _outcome(server_classes, whole)
    assert _outcome(comm_view, part) == _outcome(comm_view, whole)
    assert _routes(part) == _routes(whole)
    for device, factor in part.fault_factors.items():
        assert whole.fault_factors[device] == factor


def test_nvl72_domains_are_built_whole() -> None:
    """GB200 NVL72, 36 trays (two domains) with a degraded domain switch and GPU: the same classes and
    communicator as the whole cluster, from the two domains' trays."""
    spec = load_preset("gb200-nvl72", nodes=36, link_faults=[{"device": "nvl1/nvswitch", "factor": 0.5},
                                                              {"device": "s3/gpu1", "factor": 0.5}])
    whole, part = build(spec), build_representative(spec)
    assert server_classes(part) == server_classes(whole) and comm_view(part) == comm_view(whole)
    assert part.servers_built == frozenset(range(36))


def test_the_representative_cluster_does_not_grow_with_the_servers() -> None:
    """2,048 DGX H100 servers (16,384 GPUs) on rails: the graph holds servers 0 and 1 and a degraded server's
    group's first server, the leaves of their scalable units (ports of 32 servers each) and the spines."""
    spec = load_preset("dgx-h100", nodes=2048, link_faults=[{"device": "s2000/nic3", "factor": 0.5}])
    part = build_representative(spec)
    assert part.servers_built == {0, 1, 2000}
    kinds = [kind for _, kind in part.graph.nodes(data="kind")]
    assert kinds.count("gpu") == 3 * 8 and kinds.count("leaf") == 2 * 8 and kinds.count("spine") == 32
    assert kinds.count("nic") == 2 * 32 * 8  # every port of the two units' rail leaves
    assert part.n_gpus == 16384 and [c.count for c in server_classes(part)] == [2047, 1]


def test_a_failed_device_is_checked_without_the_whole_cluster() -> None:
    """2,048 servers with NIC 1 of s700 failed: the rest of the cluster still reaches it (through its other NICs),
    found without building every server; failing the only spine group's every spine cuts the units apart."""
    spec = load_preset("dgx-h100", nodes=2048, link_faults=[{"device": "s700/nic1", "factor": 0.0}])
    part = build_representative(spec)
    assert part.servers_built == {0, 1, 700} and [c.count for c in server_classes(part)] == [2047, 1]
    small = _spec(64, {"kind": "rail_optimized"}, [("spine", 0.0)])
    with pytest.raises(TopologyError, match=r"failing spine0, spine1, spine2, spine3 \.\.\. partitions the cluster: "
                                            r"256 of 512 GPUs \(e\.g\. s32/gpu0\)"):
        build_representative(small)


def test_an_unknown_device_is_the_whole_clusters_error() -> None:
    """A fault naming no device is refused with the message listing the cluster's roles and devices."""
    spec = _spec(2, {"kind": "rail_optimized"}, [("s9/nic1", 0.5)])
    with pytest.raises(ConfigError, match=r"no device or role 's9/nic1'.*roles: cpu0-1, gpu0-7, leaf, nic0-7") as error:
        build_representative(spec)
    with pytest.raises(ConfigError) as whole_error:
        build(spec)
    assert str(error.value) == str(whole_error.value)


def test_the_topology_command_shows_the_whole_cluster_after_a_prediction() -> None:
    """After a prediction priced 64 DGX H100 on a few servers, `topology show` and summarize still count every
    device and link of the cluster (512 GPUs, 512 NIC uplinks each way)."""
    spec = load_preset("dgx-h100", nodes=64)
    comm_view(build_representative(spec))
    summary = summarize(build(spec))
    assert summary.devices_by_kind["gpu"] == 512 and summary.devices_by_kind["nic"] == 512
    assert summary.links_by_kind["ib"].count == 2 * (512 + 16 * 32)  # NIC uplinks and leaf-spine links
    result = CliRunner().invoke(app, ["topology", "show", "dgx-h100", "--nodes", "64", "--json"], terminal_width=200)
    assert result.exit_code == 0 and '"gpu": 512' in result.stdout


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 40), st.sampled_from(FABRICS), st.sampled_from([IB, ROCE_4]))
def test_fabric_counts_without_building_are_the_built_fabrics(nodes: int, fabric: dict[str, Any],
                                                              net: dict[str, Any]) -> None:
    """NICs, cables and switches counted from the spec equal those of the built fabric."""
    spec = _spec(nodes, fabric, [], net)
    graph = build_fabric(spec)
    kinds = [kind for _, kind in graph.nodes(data="kind")]
    assert fabric_counts(spec) == (kinds.count("nic"), graph.number_of_edges() // 2,
                                   kinds.count("leaf") + kinds.count("spine"))
