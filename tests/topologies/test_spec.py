"""TopologySpec validation: defaults, cross-field checks and one-line ConfigErrors naming the field."""

from __future__ import annotations

import warnings

import pytest
import yaml
from pydantic import ValidationError

from simulator.collectives.comm import comm_view
from simulator.core.errors import ConfigError
from topologies.build import build
from topologies.spec import (
    DEFAULT_NIC_GBPS,
    FabricSpec,
    InterNodeSpec,
    TopologySpec,
    topology_spec_from_fields,
    uneven_nvl72_note,
    validate_topology_spec,
)

BASE = {"gpu": "H100-SXM5-80GB", "gpus_per_node": 8, "nodes": 1, "intra_node": "nvswitch-nvlink4"}


def _error(data: dict) -> str:
    with pytest.raises(ConfigError) as info:
        validate_topology_spec(data, "test.yaml")
    message = str(info.value)
    assert "\n" not in message
    return message


def test_omitted_nic_speed_takes_the_transport_default_and_is_flagged():
    """nic_gbps omitted or null: the transport's default speed, nic_gbps_presumed set."""
    for given in ({}, {"nic_gbps": None}):
        net = InterNodeSpec.model_validate({"transport": "efa", "nics_per_node": 4, **given})
        assert (net.nic_gbps, net.nic_gbps_presumed) == (DEFAULT_NIC_GBPS["efa"], True)
    assert InterNodeSpec(transport="ib", nics_per_node=1, nic_gbps=200).nic_gbps_presumed is False


def test_sockets_default_to_host_staging_and_refuse_gpudirect():
    """Socket transports stage through host memory: gpudirect_rdma defaults to False, True is an error."""
    assert InterNodeSpec(transport="sockets", nics_per_node=1, nic_gbps=100).gpudirect_rdma is False
    assert InterNodeSpec(transport="roce", nics_per_node=1, nic_gbps=100).gpudirect_rdma is True
    with pytest.raises(ValidationError, match="gpudirect_rdma"):
        InterNodeSpec(transport="sockets", nics_per_node=1, nic_gbps=100, gpudirect_rdma=True)


def test_nic_link_kind_per_transport():
    """ib->ib, roce->roce, efa->efa, slingshot->slingshot, tcpx/tcpxo/sockets->tcp, ethernet->ethernet."""
    nets = [InterNodeSpec.model_validate({"transport": t, "nics_per_node": 1}) for t in DEFAULT_NIC_GBPS]
    kinds = {net.transport: net.nic_link_kind for net in nets}
    assert kinds == {"ib": "ib", "roce": "roce", "efa": "efa", "slingshot": "slingshot", "tcpx": "tcp", "tcpxo": "tcp",
                     "sockets": "tcp", "ethernet": "ethernet"}


def test_specs_are_frozen_and_forbid_extra_fields():
    """Specs cannot be mutated and reject unknown fields."""
    spec = TopologySpec(**BASE)
    with pytest.raises(ValidationError):
        spec.nodes = 2
    assert "colour" in _error({**BASE, "colour": "green"})


def test_unknown_gpu_names_the_field_and_the_known_gpus():
    """gpu: an unknown name is reported with the list of known GPUs."""
    message = _error({**BASE, "gpu": "H100"})
    assert message.startswith("test.yaml: gpu: ")
    assert "H100-SXM5-80GB" in message and "V100-SXM2-16GB" in message


def test_zero_nodes_names_the_field():
    """nodes: 0 is rejected with the field and the value."""
    assert _error({**BASE, "nodes": 0}).startswith("test.yaml: nodes: Input should be greater than or equal to 1")


def test_several_nodes_need_a_network():
    """inter_node: required when nodes > 1."""
    assert "inter_node: required when nodes > 1" in _error({**BASE, "nodes": 2})


def test_nvl72_domain_covering_all_gpus_needs_no_network():
    """18 trays x 4 GPUs of one NVL72 domain: no inter_node needed; 19 trays do need one."""
    nvl = {"gpu": "GB200", "gpus_per_node": 4, "intra_node": "nvlink5-nvl72"}
    assert TopologySpec(**nvl, nodes=18).gpus_per_nvlink_domain == 72
    assert "inter_node" in _error({**nvl, "nodes": 19})


@pytest.mark.parametrize(("trays", "domain"), [(16, 72), (18, 72), (36, 72), (32, 64), (64, 64), (25, 20)])
def test_nvl72_jobs_fill_whole_racks_or_split_evenly_over_the_fewest(trays: int, domain: int) -> None:
    """Without nvlink_domain_gpus: whole 72-GPU racks when the job fills them or fits in one; else its trays
    split evenly over the fewest racks that hold them (32 trays: 2 racks of 16 trays, 64 GPUs each; 25 trays,
    which no two, three or four racks split evenly: 5 racks of 5 trays)."""
    net = {"transport": "ib", "nics_per_node": 4, "nic_gbps": 400}
    spec = TopologySpec(gpu="GB200", gpus_per_node=4, intra_node="nvlink5-nvl72", nodes=trays, inter_node=net)
    assert spec.gpus_per_nvlink_domain == domain
    if 4 * trays > domain:  # several domains: each the same size, no more racks than needed for that
        assert (4 * trays) % domain == 0 and -(-4 * trays // 72) <= 4 * trays // domain


@pytest.mark.parametrize("trays", [32, 64, 25])
def test_the_even_split_prices_as_the_same_domains_stated(trays: int) -> None:
    """Metamorphic: leaving nvlink_domain_gpus to the even split gives the collective model exactly the view of
    the same domain size stated (32 trays: 2 x 64), so the default is a placement, not a different model."""
    net = {"transport": "ib", "nics_per_node": 4, "nic_gbps": 400}
    fields = {"gpu": "GB200", "gpus_per_node": 4, "intra_node": "nvlink5-nvl72", "nodes": trays, "inter_node": net}
    default = TopologySpec(**fields)
    stated = TopologySpec(**fields, nvlink_domain_gpus=default.gpus_per_nvlink_domain)
    assert comm_view(build(default)) == comm_view(build(stated))


@pytest.mark.parametrize(("trays", "domains", "nearby"), [(19, "19 NVLink domains of 4", "18 or 20 trays"),
                                                         (38, "19 NVLink domains of 8", "36 or 39 trays"),
                                                         (25, "5 NVLink domains of 20", "24 or 26 trays")])
def test_a_tray_count_the_fewest_racks_hold_unevenly_is_named_with_even_ones_nearby(trays: int, domains: str,
                                                                                   nearby: str) -> None:
    """19 trays fill two racks unevenly; the equal-domain model can only take 19 one-tray domains: the note says
    so and names the tray counts nearby that split evenly over the fewest racks."""
    note = uneven_nvl72_note(trays, 4)
    assert note is not None and domains in note and nearby in note


def test_the_uneven_note_comes_exactly_when_the_split_takes_more_racks_than_needed() -> None:
    """For every tray count up to 5 racks: a note exactly when the even split uses more domains than the fewest
    racks that hold the job, and every tray count it suggests splits over the fewest racks evenly (no note)."""
    for trays in range(1, 91):
        n_gpus, domain = 4 * trays, TopologySpec(
            gpu="GB200", gpus_per_node=4, intra_node="nvlink5-nvl72", nodes=trays,
            inter_node={"transport": "ib", "nics_per_node": 4, "nic_gbps": 400}).gpus_per_nvlink_domain
        note = uneven_nvl72_note(trays, 4)
        assert (note is not None) == (n_gpus // domain > -(-n_gpus // 72)), trays
        if note:
            below, above = (int(word) for word in note.rsplit(": ", 1)[1].split()[:3:2])
            assert below < trays < above and uneven_nvl72_note(below, 4) is None
            assert uneven_nvl72_note(above, 4) is None


def test_a_stated_domain_the_gpus_do_not_fill_is_refused_naming_the_even_split() -> None:
    """128 GPUs in stated domains of 72 would leave a partial domain beside a full one: refused, one line, with
    the split the default would take."""
    net = {"transport": "ib", "nics_per_node": 4, "nic_gbps": 400}
    message = _error({"gpu": "GB200", "gpus_per_node": 4, "intra_node": "nvlink5-nvl72", "nodes": 32,
                      "inter_node": net, "nvlink_domain_gpus": 72})
    assert "nvlink_domain_gpus: 128 GPUs do not fill NVLink domains of 72" in message and "64 a rack" in message
    assert "\n" not in message


def test_hybrid_cube_mesh_holds_at_most_eight_gpus():
    """gpus_per_node > 8 on a hybrid cube mesh names the field and the limit."""
    dgx1 = {"gpu": "V100-SXM2-16GB", "nodes": 1, "intra_node": "nvlink2-hybrid-cube-mesh"}
    message = _error({**dgx1, "gpus_per_node": 16})
    assert "gpus_per_node: 16" in message and "at most 8" in message


def test_gpu_must_fit_the_nvlink_platform():
    """An A100 on an NVLink4 NVSwitch is refused; the message lists the GPUs that fit."""
    message = _error({**BASE, "gpu": "A100-SXM4-80GB"})
    assert "intra_node:" in message and "H100-SXM5-80GB" in message and "H200-SXM-141GB" in message


def test_nested_errors_name_the_full_field_path():
    """Errors inside inter_node carry the path inter_node.<field>."""
    net = {"transport": "roce", "nics_per_node": 8, "nic_gbps": 400, "sharp": True}
    assert "test.yaml: inter_node.sharp: SHARP needs transport 'ib'" in _error({**BASE, "nodes": 2, "inter_node": net})
    net = {"transport": "ib", "nics_per_node": 0}
    assert "inter_node.nics_per_node:" in _error({**BASE, "nodes": 2, "inter_node": net})


def test_domain_size_only_for_nvl72():
    """nvlink_domain_gpus on a non-NVL72 platform is refused."""
    assert "nvlink_domain_gpus: only for" in _error({**BASE, "nvlink_domain_gpus": 16})


def test_single_switch_has_no_uplinks_to_oversubscribe():
    """A single_switch fabric refuses oversubscription and spines."""
    with pytest.raises(ValidationError, match="oversubscription"):
        FabricSpec(kind="single_switch", oversubscription=2.0)
    with pytest.raises(ValidationError, match="spines"):
        FabricSpec(kind="single_switch", spines=4)


def test_fields_of_a_manifest_entry_drop_notes_and_warn_on_unknown_keys():
    """topology_spec_from_fields ignores `note`, warns about other unknown inter_node keys, and
    treats nic_gbps: null as omitted. A note with a comma in a flow mapping (`note: HDR, GPUDirect RDMA on`)
    parses as the note and a valueless key of several words: that is the note's text, dropped without a
    warning; a one-word unknown key, valueless or not, still warns."""
    net = {"transport": "ib", "nics_per_node": 8, "nic_gbps": None, "note": "x", "rails": 4}
    with pytest.warns(UserWarning, match="rails"):
        spec = topology_spec_from_fields("RTX-6000D", 8, 2, "pcie5", net, name="log.txt")
    assert spec.inter_node is not None and spec.inter_node.nic_gbps_presumed
    written = yaml.safe_load("{transport: ib, nics_per_node: 4, nic_gbps: 200, note: HDR, GPUDirect RDMA on}")
    assert written["GPUDirect RDMA on"] is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert topology_spec_from_fields("A100-SXM4-40GB", 8, 2, "nvswitch-nvlink3", written).inter_node.nic_gbps == 200
    with pytest.warns(UserWarning, match="sharp"):
        topology_spec_from_fields("A100-SXM4-40GB", 8, 2, "nvswitch-nvlink3", {**written, "sharp_enabled": None})
    with pytest.raises(ConfigError, match="^log.txt: gpu: "):
        topology_spec_from_fields("nope", 8, 1, "pcie5", None, name="log.txt")


def test_routing_defaults_to_the_transports_and_may_be_stated():
    """fabric.routing: adaptive for InfiniBand and EFA, ecmp for RoCE and TCP transports, unless stated."""
    def spec(transport: str, **fabric: object) -> TopologySpec:
        net = {"transport": transport, "nics_per_node": 8, "nic_gbps": 400}
        return TopologySpec.model_validate({**BASE, "nodes": 2, "inter_node": net, "fabric": fabric})

    assert [spec(t).routing for t in ("ib", "efa", "roce", "tcpxo", "sockets")] == [
        "adaptive", "adaptive", "ecmp", "ecmp", "ecmp"]
    assert spec("ib", routing="ecmp").routing == "ecmp"
    assert spec("roce", routing="adaptive").routing == "adaptive"
    assert TopologySpec.model_validate(BASE).routing == "adaptive"  # one server: nothing to route


def test_unknown_routing_is_one_line_naming_the_field():
    """A routing that is neither adaptive nor ecmp names fabric.routing and the valid values."""
    message = _error({**BASE, "fabric": {"routing": "static"}})
    assert "fabric.routing" in message and "'adaptive'" in message and "'ecmp'" in message
