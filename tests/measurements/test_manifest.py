"""The manifest of measured logs: the shared one loads, and bad entries are set aside naming entry and field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simulator.core.errors import ConfigError
from simulator.measurements.manifest import ManifestEntry, log_path, parse_manifest

DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nccl-tests"
BASE = Path("/data/logs")

ENTRY = """\
- file: a.txt
  collective: all_reduce
  gpu: H100-SXM5-80GB
  gpus_per_node: 8
  nodes: 2
  intra_node: nvswitch-nvlink4
  inter_node: {transport: ib, nics_per_node: 8, nic_gbps: 400}
  nccl: 2.26.2
"""
SECOND = """\
- file: b.txt
  collective: all_gather
  gpu: B200-180GB
  gpus_per_node: 8
  nodes: 1
  intra_node: nvswitch-nvlink5
  env: NCCL_ALGO=ring NCCL_PROTO=simple
"""


@pytest.mark.skipif(
    not (DATA_DIR / "manifest.yaml").is_file(), reason=f"shared data not present at {DATA_DIR}"
)
def test_shared_manifest_loads() -> None:
    """The shared manifest: 40 entries, no warnings, every log path exists, known fields as written."""
    manifest = parse_manifest((DATA_DIR / "manifest.yaml").read_text(), "manifest.yaml", DATA_DIR)
    assert (len(manifest.entries), manifest.warnings) == (40, ())
    assert all(log_path(manifest, e).is_file() for e in manifest.entries)
    by_file = {e.file: e for e in manifest.entries}
    ring = by_file["h100x8-2node-allreduce-ib400-ring-minctas24-qps2-gjaion-nccltests309.txt"]
    assert ring.env == {"NCCL_ALGO": "Ring", "NCCL_MIN_CTAS": "24", "NCCL_IB_QPS_PER_CONNECTION": "2"}
    gb200 = by_file["gb200x4-18node-nvl72-1rack-allreduce-largesizes-coreweave.txt"]
    assert (gb200.nodes, gb200.gpus_per_node, gb200.nvlink_domain_gpus, gb200.nccl) == (18, 4, 72, "2.26.2")
    l40s = by_file["l40sx2-2node-allreduce-roce-ring-schmaustech.txt"]
    assert l40s.inter_node is not None and l40s.inter_node["nic_gbps"] is None
    single = by_file["a100x8-1node-allreduce-stas00.txt"]
    assert (single.inter_node, single.format, single.env) == (None, "nccl-tests-trimmed", {})


def test_entry_fields_and_defaults() -> None:
    """Two entries: values as written, defaults (format nccl-tests, no notes), env string parsed."""
    manifest = parse_manifest(ENTRY + SECOND, "m.yaml", BASE)
    first, second = manifest.entries
    assert first == ManifestEntry(
        file="a.txt",
        collective="all_reduce",
        gpu="H100-SXM5-80GB",
        gpus_per_node=8,
        nodes=2,
        intra_node="nvswitch-nvlink4",
        inter_node={"transport": "ib", "nics_per_node": 8, "nic_gbps": 400},
        nccl="2.26.2",
    )
    assert (first.format, first.notes, first.env) == ("nccl-tests", None, {})
    assert second.env == {"NCCL_ALGO": "ring", "NCCL_PROTO": "simple"}
    assert log_path(manifest, second) == BASE / "b.txt"


def test_unknown_key_is_a_warning() -> None:
    """An unknown key is ignored with a warning naming the entry (from 1), its file and the key."""
    manifest = parse_manifest(ENTRY + SECOND + "  foo: 3\n", "manifest.yaml", BASE)
    assert manifest.warnings == ("manifest.yaml entry 2 (file b.txt): unknown key 'foo' ignored",)
    assert len(manifest.entries) == 2


def _rejected(text: str) -> list[str]:
    """The reasons parse_manifest set entries aside for (the entries that load are checked by the callers)."""
    return [reason for _, reason in parse_manifest(text, "m.yaml", BASE).rejected]


def test_missing_field_sets_the_entry_aside() -> None:
    """A missing required field names the manifest, the entry, its file and the field; the other entries load."""
    manifest = parse_manifest(ENTRY + SECOND.replace("  gpu: B200-180GB\n", ""), "m.yaml", BASE)
    assert manifest.rejected == (("b.txt", "m.yaml entry 2 (file b.txt): field 'gpu': missing (required)"),)
    assert [entry.file for entry in manifest.entries] == ["a.txt"]


def test_unknown_collective_sets_the_entry_aside() -> None:
    """A collective outside COLLECTIVES is rejected with the valid names."""
    [reason] = _rejected(ENTRY.replace("collective: all_reduce", "collective: allscatter"))
    assert re.search(r"entry 1 \(file a.txt\): field 'collective': .*'allscatter'.*all_reduce", reason)


@pytest.mark.parametrize(("field", "written", "read"), [
    ("collective", "AllReduce", "all_reduce"),
    ("collective", "all-reduce", "all_reduce"),
    ("collective", "all_reduce_perf", "all_reduce"),
    ("gpu", "h100_sxm5_80gb", "H100-SXM5-80GB"),
    ("intra_node", "NVSwitch-NVLink4", "nvswitch-nvlink4"),
])
def test_vocabulary_in_other_spellings_is_read(field: str, written: str, read: str) -> None:
    """The vocabulary's names in another case or with other separators are the same names."""
    original = {"collective": "all_reduce", "gpu": "H100-SXM5-80GB", "intra_node": "nvswitch-nvlink4"}[field]
    manifest = parse_manifest(ENTRY.replace(f"{field}: {original}", f"{field}: {written}"), "m.yaml", BASE)
    assert getattr(manifest.entries[0], field) == read


@pytest.mark.parametrize(("written", "read"), [("InfiniBand", "ib"), ("RoCEv2", "roce"), ("RoCE v2", "roce"),
                                               ("EFA", "efa"), ("TCP", "sockets"), ("GPUDirect-TCPXO", "tcpxo"),
                                               ("Slingshot-11", "slingshot"), ("HPE Slingshot", "slingshot"),
                                               ("CXI", "slingshot"), ("InfiniBand NDR", "ib"), ("NDR400", "ib"),
                                               ("ConnectX-7 InfiniBand", "ib"), ("RoCE v2 400G", "roce"),
                                               ("Spectrum-X RoCE", "roce"), ("EFA v2", "efa"), ("TCP/IP", "sockets"),
                                               ("GPUDirect-TCPXO", "tcpxo")])
def test_transport_in_other_spellings_is_read(written: str, read: str) -> None:
    manifest = parse_manifest(ENTRY.replace("transport: ib", f"transport: {written}"), "m.yaml", BASE)
    assert manifest.entries[0].inter_node["transport"] == read  # type: ignore[index]



@pytest.mark.parametrize(("written", "read"), [
    ("InfiniBand NDR 8x400G", ("ib", 8, 400.0)),
    ("RoCE v2, 8x200G", ("roce", 8, 200.0)),
    ("4 x 200 Gb/s Slingshot-11", ("slingshot", 4, 200.0)),
    ("8x ConnectX-7 NDR", ("ib", 8, 400.0)),
    ("EFA 3200 Gbps per instance, 32 adapters", ("efa", 32, 100.0)),  # a node's rate, split over its NICs
])
def test_a_network_written_as_one_description_is_read(written: str, read: tuple[str, int, float]) -> None:
    """`inter_node: "InfiniBand NDR 8x400G"`: the transport, the NICs' count and each NIC's rate; the text is the
    note, and the cluster built from the entry has those NICs."""
    entry = parse_manifest(ENTRY.replace("{transport: ib, nics_per_node: 8, nic_gbps: 400}", f'"{written}"'),
                           "m.yaml", BASE).entries[0]
    assert entry.inter_node is not None
    assert (entry.inter_node["transport"], entry.inter_node["nics_per_node"], entry.inter_node["nic_gbps"]) == read
    assert entry.inter_node["note"] == written


@pytest.mark.parametrize(("written", "reason"), [
    ("InfiniBand NDR", r"states no count of NICs a node"),
    ("Quantum 8x400G", r"names no transport; expected one of ib, roce"),
])
def test_a_description_missing_the_nics_or_the_transport_sets_the_entry_aside(written: str, reason: str) -> None:
    """A description that leaves out the NICs' count (no preset to take it from) or names no transport is set
    aside, saying which."""
    [rejected] = _rejected(ENTRY.replace("{transport: ib, nics_per_node: 8, nic_gbps: 400}", f'"{written}"'))
    assert re.search(r"field 'inter_node': .*" + reason, rejected)

def test_wrong_type_sets_the_entry_aside() -> None:
    """gpus_per_node must be an integer, not a string."""
    [reason] = _rejected(ENTRY.replace("gpus_per_node: 8", "gpus_per_node: eight"))
    assert re.search(r"entry 1 \(file a.txt\): field 'gpus_per_node': .*integer", reason)


@pytest.mark.parametrize(("written", "read"), [("gpus_per_node: '8'", 8), ("nodes: '2'", 2)])
def test_whole_numbers_written_as_text_are_read(written: str, read: int) -> None:
    """A count quoted in the YAML ('8') is the number; 'eight' is still refused (above)."""
    field = written.split(":")[0]
    entry = parse_manifest(ENTRY.replace(f"{field}: {read}", written), "m.yaml", BASE).entries[0]
    assert getattr(entry, field) == read


@pytest.mark.parametrize(("written", "read"), [("2.18", "2.18"), ("2.26", "2.26"), ("'2.2'", "2.2")])
def test_an_unquoted_nccl_version_is_read_as_text(written: str, read: str) -> None:
    """`nccl: 2.18` (YAML reads a number) is release 2.18; quoted text stays as written."""
    entry = parse_manifest(ENTRY.replace("nccl: 2.26.2", f"nccl: {written}"), "m.yaml", BASE).entries[0]
    assert entry.nccl == read


@pytest.mark.parametrize("written", ["2.2", "2.20", "2"])
def test_a_version_number_that_names_several_releases_is_refused(written: str) -> None:
    """`nccl: 2.20` and `nccl: 2.2` read as the same number: which release is not known, so the entry is set aside
    asking for the version quoted."""
    [reason] = _rejected(ENTRY.replace("nccl: 2.26.2", f"nccl: {written}"))
    assert re.search(r"field 'nccl': .*read as a number .*write the version quoted", reason)


def test_bad_env_and_format_set_the_entry_aside() -> None:
    """env must be NAME=VALUE words; format must be a known log layout."""
    assert re.search("field 'env': .*'NCCL_ALGO' is not NAME=VALUE", _rejected(ENTRY + "  env: NCCL_ALGO\n")[0])
    assert re.search("field 'format': .*unknown format 'xlsx'", _rejected(ENTRY + "  format: xlsx\n")[0])


def test_top_level_and_yaml_errors() -> None:
    """A mapping at the top level and invalid YAML are errors; a non-mapping entry and a repeated file are set
    aside, the first entry still loading."""
    with pytest.raises(ConfigError, match="m.yaml: expected a YAML list of entries .* found dict"):
        parse_manifest("file: a.txt\n", "m.yaml", BASE)
    with pytest.raises(ConfigError, match="m.yaml: not valid YAML"):
        parse_manifest("- file: [a.txt\n", "m.yaml", BASE)
    manifest = parse_manifest(ENTRY + "- just a string\n", "m.yaml", BASE)
    assert manifest.rejected == (("entry 2", "m.yaml entry 2: expected a mapping of fields, found str"),)
    assert len(manifest.entries) == 1
    [reason] = _rejected(ENTRY + ENTRY)
    assert re.search(r"entry 2 \(file a.txt\): field 'file': listed twice with the same collective and run "
                     r"\(also entry 1\)", reason)


def test_a_file_may_be_listed_once_per_collective_and_run() -> None:
    """A file holding several tools' tables (or several runs) is an entry per collective (or run)."""
    other_tool = ENTRY.replace("collective: all_reduce", "collective: all_gather")
    other_run = ENTRY + "  run: 2\n"
    manifest = parse_manifest(ENTRY + other_tool + other_run, "m.yaml", BASE)
    assert not manifest.rejected
    assert [(e.file, e.collective, e.run) for e in manifest.entries] == [
        ("a.txt", "all_reduce", None), ("a.txt", "all_gather", None), ("a.txt", "all_reduce", 2)]


@pytest.mark.parametrize(("written", "read"), [
    ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),  # as nccl-tests' device list prints an H100 SXM5
    ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
    ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"),
    ("NVIDIA GH200 120GB", "GH200-96GB"),
    ("NVIDIA A100 80GB PCIe", "A100-PCIe-80GB"),
    ("NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada"),
    ("NVIDIA GeForce RTX 5090", "RTX-5090"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000"),
    ("NVIDIA L40", "L40"),
    ("NVIDIA L40S", "L40S"),
])
def test_device_names_as_logs_print_them_are_read(written: str, read: str) -> None:
    manifest = parse_manifest(ENTRY.replace("gpu: H100-SXM5-80GB", f"gpu: {written}"), "m.yaml", BASE)
    assert manifest.entries[0].gpu == read


@pytest.mark.parametrize("written", ["NVIDIA A100 PCIe", "H100", "NVIDIA Graphics Device"])
def test_ambiguous_or_unknown_device_names_are_left_as_written(written: str) -> None:
    """'A100 PCIe' fits two table GPUs (40 and 80 GB) and a bare 'H100' four: the name stays as written, and
    building the cluster refuses it listing the known names (tests/measurements/test_skipped_entries.py)."""
    manifest = parse_manifest(ENTRY.replace("gpu: H100-SXM5-80GB", f"gpu: {written}"), "m.yaml", BASE)
    assert manifest.entries[0].gpu == written


@pytest.mark.parametrize(("gpu", "per_node", "written", "read"), [
    ("H100-SXM5-80GB", 8, "NVSwitch", "nvswitch-nvlink4"),
    ("H100-SXM5-80GB", 8, "NVLink", "nvswitch-nvlink4"),
    ("A100-SXM4-40GB", 8, "NVLink 3 + NVSwitch", "nvswitch-nvlink3"),  # the full board, not 4 of its 12 links
    ("H800-SXM5-80GB", 8, "NVSwitch", "nvswitch-nvlink4-8links"),
    ("V100-SXM2-16GB", 8, "hybrid cube mesh", "nvlink2-hybrid-cube-mesh"),
    ("GB200", 4, "NVL72", "nvlink5-nvl72"),
    ("L40S", 8, "PCIe", "pcie4"),
    ("RTX-4090", 8, "PCIe", "pcie4-no-p2p"),  # GeForce: no peer-to-peer over PCIe
    ("RTX-5090", 4, "PCIe Gen5", "pcie5-no-p2p"),
    ("L40S", 8, "PCIe gen5, P2P disabled", "pcie5-no-p2p"),
    ("A100-PCIe-80GB", 8, "PCIe with NVLink bridges", "pcie4-nvlink-bridges"),
    ("V100-SXM2-32GB", 8, "NVLink", "nvlink"),  # DGX-1's cube mesh or an NVSwitch board: not guessed
])
def test_intra_node_in_words_reads_as_the_platform_the_gpu_fits(gpu: str, per_node: int, written: str,
                                                                read: str) -> None:
    text = (ENTRY.replace("gpu: H100-SXM5-80GB", f"gpu: {gpu}")
            .replace("gpus_per_node: 8", f"gpus_per_node: {per_node}")
            .replace("intra_node: nvswitch-nvlink4", f"intra_node: {written}"))
    assert parse_manifest(text, "m.yaml", BASE).entries[0].intra_node == read
