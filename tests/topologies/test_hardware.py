"""GPU table and intra-node platform data: datasheet facts and their look-ups."""

from __future__ import annotations

import typing

import pytest

from simulator.core.errors import ConfigError
from topologies.hardware import gpu_spec, intra_node_platform, known_gpus, pcie_GBps_per_direction
from topologies.spec import IntraNodeKind


@pytest.mark.parametrize(
    ("name", "per_direction_GBps", "links"),
    [
        ("V100-SXM2-16GB", 150.0, 6),
        ("A100-SXM4-80GB", 300.0, 12),
        ("H100-SXM5-80GB", 450.0, 18),
        ("B200-180GB", 900.0, 18),
        ("GB200", 900.0, 18),
        ("L40S", 0.0, 0),
    ],
)
def test_nvlink_bandwidth_is_half_the_bidirectional_datasheet_figure(name, per_direction_GBps, links):
    """NVLink per GPU, one direction: V100 300/2, A100 600/2, H100 900/2, B200 1800/2 GB/s."""
    gpu = gpu_spec(name)
    assert gpu.nvlink_GBps_per_direction == per_direction_GBps
    assert gpu.nvlinks == links


def test_v100_nvlink_is_six_links_of_25_GBps():
    """V100: 6 NVLink2 links x 25 GB/s per direction = 150 GB/s."""
    gpu = gpu_spec("V100-SXM2-32GB")
    assert gpu.nvlink_GBps_per_direction / gpu.nvlinks == 25.0


@pytest.mark.parametrize(("gen", "x16_GBps"), [(3, 15.75), (4, 31.5), (5, 63.0)])
def test_pcie_x16_bandwidth(gen, x16_GBps):
    """PCIe x16 payload per direction: Gen3 ~15.75, Gen4 ~31.5, Gen5 ~63 GB/s (128b/130b coding)."""
    assert pcie_GBps_per_direction(gen, 16) == pytest.approx(x16_GBps, rel=0.005)


def test_a100_sxm4_unstated_memory_takes_the_40gb_figures():
    """A100-SXM4 (memory not stated) carries the 40 GB part's memory and bandwidth."""
    assert gpu_spec("A100-SXM4").memory_gib == gpu_spec("A100-SXM4-40GB").memory_gib == 40
    assert gpu_spec("A100-SXM4").hbm_GBps == gpu_spec("A100-SXM4-40GB").hbm_GBps


def test_nvls_only_on_hopper_and_blackwell_sxm():
    """NVLink SHARP capability: the SXM-class Hopper and Blackwell parts (H100 SXM 80 GB and Meta's 96 GB HBM2e,
    H800, H20, GH200, H200, B200, B300, GB200, GB300); not the PCIe cards (H100 PCIe and NVL) nor Ampere."""
    assert {n for n in known_gpus() if gpu_spec(n).nvls} == {
        "H100-SXM5-80GB", "H100-SXM-96GB-HBM2e", "H800-SXM5-80GB", "H20-96GB", "GH200-96GB", "GH200-144GB",
        "H200-SXM-141GB", "B200-180GB", "B300-288GB", "GB200", "GB300"}


def test_h100_96gb_hbm2e_is_the_sxm5_with_slower_memory():
    """torchtitan's Grand Teton H100: 96 GB of HBM2e at 2.4 TB/s (its benchmark's hardware section), the
    SXM5's compute and NVLink."""
    part, sxm5 = gpu_spec("H100-SXM-96GB-HBM2e"), gpu_spec("H100-SXM5-80GB")
    assert (part.memory_gib, part.hbm_GBps) == (96, 2400)
    assert (part.bf16_tflops, part.nvlink_GBps_per_direction, part.tdp_w) == \
        (sxm5.bf16_tflops, sxm5.nvlink_GBps_per_direction, sxm5.tdp_w)


def test_peak_tflops_and_unsupported_precision():
    """H100 SXM dense BF16 is 989 TFLOP/s; V100 has no BF16 path and says which precisions it has."""
    assert gpu_spec("H100-SXM5-80GB").peak_tflops("bf16") == 989
    with pytest.raises(ConfigError, match="no bf16.*fp16"):
        gpu_spec("V100-SXM2-16GB").peak_tflops("bf16")


def test_unknown_gpu_lists_known_names():
    """An unknown GPU name raises ConfigError listing the table's names."""
    with pytest.raises(ConfigError, match="H100-SXM5-80GB"):
        gpu_spec("H100")


def test_every_intra_node_kind_has_platform_data():
    """The spec's intra_node vocabulary and data/intra_node.yaml name the same kinds."""
    for kind in typing.get_args(IntraNodeKind):
        assert intra_node_platform(kind).kind == kind


def test_hybrid_cube_mesh_uses_all_six_links_of_every_gpu():
    """The DGX-1 pair map gives every V100 exactly its 6 NVLinks, over 16 pairs (8 of them doubled)."""
    pairs = intra_node_platform("nvlink2-hybrid-cube-mesh").nvlink_pairs
    per_gpu = [sum(links for a, b, links in pairs if g in (a, b)) for g in range(8)]
    assert per_gpu == [6] * 8
    assert (len(pairs), sum(1 for *_, links in pairs if links == 2)) == (16, 8)


@pytest.mark.parametrize(("name", "bf16", "fp8", "hbm_GBps", "nvlink_GBps"), [
    ("H800-SXM5-80GB", 989, 1979, 3350, 200),   # H800 datasheet: 1,979 / 3,958 with sparsity, NVLink 400 GB/s
    ("A800-SXM4-80GB", 312, None, 2039, 200),   # A800 datasheet: 624 with sparsity, NVLink 400 GB/s
    ("H20-96GB", 148, 296, 4000, 450),          # HGX H20: BF16 148, FP8 296, 4.0 TB/s, NVLink 900 GB/s
    ("H100-NVL-94GB", 835, 1670, 3900, 300),    # H100 datasheet NVL column: 1,671 / 3,341 with sparsity
    ("GH200-96GB", 989, 1979, 4000, 450),       # GH200 datasheet, HBM3 version
    ("GH200-144GB", 989, 1979, 4900, 450),      # GH200 datasheet, HBM3e version
    ("B300-288GB", 2250, 4500, 8000, 900),      # HGX B300: 36 / 72 PFLOPS with sparsity over 8 GPUs
    ("GB300", 2500, 5000, 8000, 900),           # GB300 NVL72: 360 / 720 PFLOPS with sparsity over 72 GPUs
    ("A10G", 70, None, 600, 0),                 # AWS G5: 24 GB GDDR6, 600 GB/s, no NVLink
])
def test_added_gpus_carry_their_datasheet_figures(name: str, bf16: float, fp8: float | None, hbm_GBps: float,
                                                  nvlink_GBps: float):
    """Dense peaks (half the "with sparsity" figures), memory bandwidth and NVLink per direction (half the
    bidirectional figure) of the GPUs in wide use the table had lacked."""
    gpu = gpu_spec(name)
    assert (gpu.bf16_tflops, gpu.fp8_tflops, gpu.hbm_GBps, gpu.nvlink_GBps_per_direction) == \
        (bf16, fp8, hbm_GBps, nvlink_GBps)


def test_h800_and_a800_fit_only_their_eight_link_nvswitch_boards():
    """The China-market cuts keep 8 NVLinks: an H800 does not fit a full H100 board (18 links) but fits
    nvswitch-nvlink4-8links; an A800 likewise nvswitch-nvlink3-8links, not nvswitch-nvlink3."""
    h800, a800 = gpu_spec("H800-SXM5-80GB"), gpu_spec("A800-SXM4-80GB")
    assert not intra_node_platform("nvswitch-nvlink4").fits(h800)
    assert intra_node_platform("nvswitch-nvlink4-8links").fits(h800)
    assert not intra_node_platform("nvswitch-nvlink3").fits(a800)
    assert intra_node_platform("nvswitch-nvlink3-8links").fits(a800)


def test_gh200_quad_mesh_uses_all_eighteen_links():
    """Four GH200 joined pairwise: 3 peers x 6 links = each Hopper's 18 NVLink4 links."""
    pairs = intra_node_platform("nvlink4-full-mesh-4").nvlink_pairs
    assert [sum(links for a, b, links in pairs if g in (a, b)) for g in range(4)] == [18] * 4
