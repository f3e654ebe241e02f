"""Presets: every one builds a connected cluster; loading, overrides, files and errors."""

from __future__ import annotations

import itertools

import networkx as nx
import pytest

from simulator.core.errors import ConfigError
from topologies.build import build
from topologies.presets import list_presets, load_preset, resolve_topology, spec_from_yaml_text

REQUIRED = {
    "dgx-a100", "dgx-h100", "hgx-h200", "dgx-b200", "aws-p4d", "aws-p5", "h100-roce-400g", "h100-tcp-100g",
    "pcie-l40s", "dgx-1-v100", "dgx-2-v100", "abci-a", "abci-v",
}
NAMES = [name for name, _ in list_presets()]


def test_required_presets_ship_with_descriptions():
    """Every preset the design names is present and has a one-line description."""
    assert set(NAMES) >= REQUIRED
    assert all(description and "\n" not in description for _, description in list_presets())


@pytest.mark.parametrize("name", NAMES)
def test_preset_builds_a_connected_cluster(name):
    """At 2 servers the graph is weakly connected and every GPU has a route to every other GPU."""
    topo = build(load_preset(name, nodes=2))
    assert nx.is_weakly_connected(topo.graph)
    gpus = [n for n, kind in topo.graph.nodes(data="kind") if kind == "gpu"]
    assert len(gpus) == topo.n_gpus
    for src, dst in itertools.permutations(gpus, 2):
        assert topo.path(src, dst)[-1][1] == dst


def test_load_preset_applies_nodes_and_nested_overrides():
    """nodes and overrides replace fields; a nested mapping merges key by key."""
    spec = load_preset("dgx-h100", nodes=16, inter_node={"gpudirect_rdma": False}, fabric={"oversubscription": 2.0})
    assert spec.nodes == 16 and spec.inter_node is not None
    assert (spec.inter_node.nic_gbps, spec.inter_node.gpudirect_rdma) == (400, False)
    assert (spec.fabric.kind, spec.fabric.oversubscription) == ("rail_optimized", 2.0)



@pytest.mark.parametrize(("preset", "gpus", "nics"), [
    ("dgx-h100", 4, 4),  # a NIC per GPU: the NICs on the used GPUs' PCIe switches
    ("dgx-h100", 2, 2),
    ("dgx-h100", 1, 1),
    ("dgx-h100", 8, 8),
    ("dgx-a100", 4, 4),
])
def test_fewer_gpus_of_a_server_with_a_nic_per_gpu_take_their_own_nics(preset, gpus, nics):
    """A node using `gpus` of a rail-optimised server's 8 GPUs sends through those GPUs' NICs, not all 8."""
    spec = load_preset(preset, gpus_per_node=gpus)
    assert spec.inter_node is not None and spec.inter_node.nics_per_node == nics


def test_nics_stated_with_the_gpu_count_are_kept_and_shared_nics_stay():
    """An override stating the NICs too wins; a server whose GPUs share NICs keeps all of them."""
    stated = load_preset("dgx-h100", gpus_per_node=4, inter_node={"nics_per_node": 8})
    assert stated.inter_node is not None and stated.inter_node.nics_per_node == 8
    shared = spec_from_yaml_text("gpu: H100-SXM5-80GB\nnodes: 2\ngpus_per_node: 8\nintra_node: nvswitch-nvlink4\n"
                                 "inter_node: {transport: ib, nics_per_node: 2, nic_gbps: 400}\n", "two NICs",
                                 gpus_per_node=4)
    assert shared.inter_node is not None and shared.inter_node.nics_per_node == 2

def test_unknown_preset_lists_the_available_ones():
    """An unknown preset name is a ConfigError listing every preset."""
    with pytest.raises(ConfigError, match="dgx-h10.*unknown.*dgx-h100") as info:
        load_preset("dgx-h10")
    assert all(name in str(info.value) for name in NAMES)


def test_yaml_text_errors_name_the_source_and_field():
    """A bad field in YAML text names the source and the field path; broken YAML names the source."""
    with pytest.raises(ConfigError, match=r"^my.yaml: inter_node.nic_gbps: Input should be greater than 0"):
        spec_from_yaml_text(
            "gpu: H100-SXM5-80GB\ngpus_per_node: 8\nnodes: 2\nintra_node: nvswitch-nvlink4\n"
            "inter_node: {transport: ib, nics_per_node: 8, nic_gbps: -1}\n",
            "my.yaml",
        )
    with pytest.raises(ConfigError, match="^my.yaml: not valid YAML"):
        spec_from_yaml_text("gpu: [", "my.yaml")
    with pytest.raises(ConfigError, match="^my.yaml: expected a mapping"):
        spec_from_yaml_text("- 1\n", "my.yaml")


def test_resolve_topology_reads_a_file_or_a_preset(tmp_path):
    """A YAML path is read and validated (nodes applied); a preset name loads the preset."""
    path = tmp_path / "cluster.yaml"
    path.write_text("gpu: L40S\ngpus_per_node: 2\nnodes: 1\nintra_node: pcie4\n")
    assert resolve_topology(str(path), nodes=None).gpu == "L40S"
    assert resolve_topology("abci-v", nodes=8).nodes == 8
    with pytest.raises(ConfigError, match="cannot read topology file"):
        resolve_topology(str(tmp_path / "missing.yaml"), nodes=None)
