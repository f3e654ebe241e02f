"""The PCIe, inference and workstation GPUs that published training runs use (A100 and V100 PCIe cards, A10, L4,
T4, RTX A6000, RTX 6000 Ada, GeForce RTX 3090 and 4090): their datasheet figures, and a step predicted on each."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from typer.testing import CliRunner

import simulator as cs
from simulator.cli.app import app
from simulator.core.errors import ConfigError
from topologies.hardware import GpuSpec, gpu_spec, intra_node_platform, known_gpus

ADDED = ("A100-PCIe-40GB", "A100-PCIe-80GB", "V100-PCIe-16GB", "V100-PCIe-32GB", "A10", "L4", "T4", "RTX-A6000",
         "RTX-6000-Ada", "RTX-3090", "RTX-4090")

# (GPU, field, the figure as its datasheet or whitepaper prints it, how it is printed). The table holds half of
# a figure printed "with sparsity", half of a bidirectional NVLink figure, and for GeForce cards half of the
# FP16-accumulate tensor rate (FP32 accumulate runs at half rate there); a "dense" figure is held as printed.
DATASHEET = [
    ("A100-PCIe-40GB", "hbm_GBps", 1555, "dense"),            # A100 datasheet, 40GB PCIe column
    ("A100-PCIe-40GB", "tdp_w", 250, "dense"),
    ("A100-PCIe-40GB", "bf16_tflops", 624, "sparse"),
    ("A100-PCIe-40GB", "nvlink_GBps_per_direction", 600, "both directions"),  # NVLink bridge for 2 GPUs
    ("A100-PCIe-80GB", "hbm_GBps", 1935, "dense"),            # A100 datasheet, 80GB PCIe column
    ("A100-PCIe-80GB", "tdp_w", 300, "dense"),
    ("A100-PCIe-80GB", "tf32_tflops", 312, "sparse"),
    ("A100-PCIe-80GB", "nvlink_GBps_per_direction", 600, "both directions"),
    ("V100-PCIe-16GB", "fp16_tflops", 112, "dense"),          # V100 datasheet, PCIe column
    ("V100-PCIe-32GB", "fp32_tflops", 14, "dense"),
    ("V100-PCIe-32GB", "hbm_GBps", 900, "dense"),
    ("V100-PCIe-32GB", "tdp_w", 250, "dense"),
    ("A10", "bf16_tflops", 250, "sparse"),                    # A10 datasheet
    ("A10", "tf32_tflops", 125, "sparse"),
    ("A10", "hbm_GBps", 600, "dense"),
    ("A10", "tdp_w", 150, "dense"),
    ("L4", "bf16_tflops", 242, "sparse"),                     # L4 datasheet
    ("L4", "fp8_tflops", 485, "sparse"),
    ("L4", "tf32_tflops", 120, "sparse"),
    ("L4", "hbm_GBps", 300, "dense"),
    ("L4", "tdp_w", 72, "dense"),
    ("T4", "fp16_tflops", 65, "dense"),                       # T4 datasheet: mixed precision, no sparsity on Turing
    ("T4", "fp32_tflops", 8.1, "dense"),
    ("T4", "hbm_GBps", 320, "dense"),
    ("T4", "tdp_w", 70, "dense"),
    ("RTX-A6000", "fp16_tflops", 309.7, "sparse"),            # RTX A6000 datasheet tensor performance
    ("RTX-A6000", "hbm_GBps", 768, "dense"),
    ("RTX-A6000", "nvlink_GBps_per_direction", 112.5, "both directions"),
    ("RTX-6000-Ada", "hbm_GBps", 960, "dense"),               # RTX 6000 Ada datasheet
    ("RTX-6000-Ada", "fp32_tflops", 91.1, "dense"),
    ("RTX-6000-Ada", "fp8_tflops", 1457, "sparse"),
    ("RTX-3090", "bf16_tflops", 142, "sparse"),               # GA102 whitepaper, GeForce RTX 3090 table
    ("RTX-3090", "fp16_tflops", 142, "FP16 accumulate"),
    ("RTX-3090", "tf32_tflops", 71, "sparse"),
    ("RTX-3090", "hbm_GBps", 936, "dense"),
    ("RTX-3090", "nvlink_GBps_per_direction", 112.5, "both directions"),
    ("RTX-4090", "bf16_tflops", 330.4, "sparse"),             # Ada whitepaper, GeForce RTX 4090 column
    ("RTX-4090", "fp16_tflops", 330.3, "FP16 accumulate"),
    ("RTX-4090", "fp8_tflops", 660.6, "sparse"),
    ("RTX-4090", "tf32_tflops", 165.2, "sparse"),
    ("RTX-4090", "hbm_GBps", 1008, "dense"),
    ("RTX-4090", "tdp_w", 450, "dense"),
]


@pytest.mark.parametrize("name", ADDED)
def test_added_gpu_loads_with_every_field(name: str):
    """Each added GPU is in the table under its name, with positive memory, bandwidth, FP32 and power."""
    gpu = gpu_spec(name)
    assert isinstance(gpu, GpuSpec) and gpu.name == name
    assert min(gpu.memory_gib, gpu.hbm_GBps, gpu.fp32_tflops, gpu.tdp_w, gpu.sm_count) > 0
    assert gpu.pcie_lanes == 16 and not gpu.nvls


@pytest.mark.parametrize(("name", "field", "printed", "how"), DATASHEET)
def test_figure_matches_its_datasheet(name: str, field: str, printed: float, how: str):
    """Dense tensor rates are half the "with sparsity" figures (and, on GeForce, half the FP16-accumulate rate);
    NVLink per direction is half the bidirectional figure; the rest as printed (to the datasheet's rounding)."""
    expected = printed if how == "dense" else printed / 2
    assert getattr(gpu_spec(name), field) == pytest.approx(expected, rel=0.005)


def test_tensor_paths_by_architecture():
    """Volta and Turing have no BF16 (the V100 PCIe and T4 train in FP16); FP8 only from Ada on (L4, RTX 6000
    Ada, RTX 4090), not Ampere (A100 PCIe, A10, RTX A6000, RTX 3090)."""
    assert [n for n in ADDED if gpu_spec(n).bf16_tflops is None] == ["V100-PCIe-16GB", "V100-PCIe-32GB", "T4"]
    assert [n for n in ADDED if gpu_spec(n).fp8_tflops] == ["L4", "RTX-6000-Ada", "RTX-4090"]
    with pytest.raises(ConfigError, match="T4 has no bf16.*fp16"):
        gpu_spec("T4").peak_tflops("bf16")


def test_nvlink_only_through_two_card_bridges():
    """A100 PCIe: 12 NVLink3 links through its bridge; RTX A6000 and RTX 3090: four x4 NVLink3 links of
    14.0625 GB/s per direction; V100 PCIe, A10, L4, T4, RTX 6000 Ada and RTX 4090: none."""
    assert {n: gpu_spec(n).nvlinks for n in ADDED if gpu_spec(n).nvlinks} == \
        {"A100-PCIe-40GB": 12, "A100-PCIe-80GB": 12, "RTX-A6000": 4, "RTX-3090": 4}
    assert gpu_spec("RTX-3090").nvlink_GBps_per_direction / gpu_spec("RTX-3090").nvlinks == 14.0625
    assert not intra_node_platform("nvswitch-nvlink3").fits(gpu_spec("RTX-A6000"))


def test_a100_pcie_is_the_sxm4_compute_at_lower_power_and_bandwidth():
    """The A100 PCIe cards share the SXM4 module's tensor rates; the 80 GB card's HBM2e runs at 1,935 GB/s
    (SXM4: 2,039) and 300 W (SXM4: 400 W)."""
    pcie, sxm = gpu_spec("A100-PCIe-80GB"), gpu_spec("A100-SXM4-80GB")
    assert (pcie.bf16_tflops, pcie.tf32_tflops, pcie.memory_gib) == (sxm.bf16_tflops, sxm.tf32_tflops, sxm.memory_gib)
    assert pcie.hbm_GBps < sxm.hbm_GBps and pcie.tdp_w < sxm.tdp_w


def _step(gpu: str) -> cs.Prediction:
    """Llama-2-7B, FSDP, one 8-GPU PCIe server of the pcie-l40s preset with `gpu` in it, FP16 (every added GPU
    has an FP16 path)."""
    scenario = cs.Scenario(topology="pcie-l40s", gpu=gpu, model="llama2-7b", strategy="fsdp", seq_len=2048,
                           global_batch=8, training={"precision": "fp16"})
    return cs.predict(scenario)


def test_slower_gpu_slower_step_on_the_same_server():
    """The same job on the same PCIe server: T4 (65 TFLOP/s, 320 GB/s) is slower than L4 (121, 300 GB/s), which
    is slower than L40S (362, 864 GB/s); the RTX 3090 (71) slower than the RTX 4090 (165)."""
    t4, l4, l40s = (_step(g).step_time_s for g in ("T4", "L4", "L40S"))
    assert t4 > l4 > l40s
    assert _step("RTX-3090").step_time_s > _step("RTX-4090").step_time_s


def test_memory_size_changes_capacity_not_speed():
    """V100 PCIe 16 GB and 32 GB compute alike: the same step, twice the capacity; the 7B job fits only 32 GB."""
    small, large = _step("V100-PCIe-16GB"), _step("V100-PCIe-32GB")
    assert small.step_time_s == pytest.approx(large.step_time_s)
    assert large.memory_capacity_bytes == pytest.approx(2 * small.memory_capacity_bytes)
    assert (small.fits_in_memory, large.fits_in_memory) == (False, True)


def test_predict_cli_with_an_added_gpu_on_a_preset(tmp_path):
    """`clustersim predict` of a scenario file putting RTX 4090s in the pcie-l40s server names them."""
    scenario = {"topology": {"preset": "pcie-l40s", "gpu": "RTX-4090"},
                "training": {"model": "llama2-7b", "global_batch": 8, "seq_len": 2048}}
    path = tmp_path / "rtx4090.yaml"
    path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
    result = CliRunner().invoke(app, ["predict", str(path)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "8 RTX-4090 (pcie-l40s)" in result.output


def refusal(tmp_path, topology: dict[str, str], **training: str) -> str:
    """The one stderr line of `clustersim predict` on a Llama 2 7B scenario over `topology`, which must exit 2."""
    scenario = {"topology": topology, "training": {"model": "llama2-7b", "global_batch": 8, "seq_len": 2048,
                                                    **training}}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "simulator.cli.app", "predict", str(path)], capture_output=True,
                         text=True)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_fp8_on_an_ampere_card_is_refused_in_one_line(tmp_path):
    """FP8 on the RTX 3090 (Ampere, no FP8 tensor path): exit 2, one line naming the GPU and its precisions."""
    line = refusal(tmp_path, {"preset": "pcie-l40s", "gpu": "RTX-3090"}, precision="fp8")
    assert "RTX-3090 has no fp8 tensor path" in line and "bf16" in line


def test_a_pcie_card_fits_no_nvswitch_or_mesh_server(tmp_path):
    """An A100 PCIe card has the SXM4's 12 NVLink3 links, but only through bridges between cards: no NVSwitch or
    NVLink-mesh platform takes any PCIe card, while the SXM4 module fits DGX A100's NVSwitch. Putting A100 PCIe
    cards in the dgx-a100 server exits 2 with one line naming the PCIe platform to use."""
    pcie_cards = [name for name in known_gpus() if gpu_spec(name).form_factor == "pcie"]
    assert {"A100-PCIe-40GB", "A100-PCIe-80GB", "H100-PCIe-80GB", "L40S", "RTX-3090"} <= set(pcie_cards)
    for kind in ("nvswitch-nvlink2", "nvswitch-nvlink3", "nvswitch-nvlink4", "nvlink4-full-mesh-4",
                 "nvlink2-hybrid-cube-mesh", "nvswitch-nvlink5"):
        assert not any(intra_node_platform(kind).fits(gpu_spec(name)) for name in pcie_cards), kind
    assert intra_node_platform("nvswitch-nvlink3").fits(gpu_spec("A100-SXM4-80GB"))
    line = refusal(tmp_path, {"preset": "dgx-a100", "gpu": "A100-PCIe-80GB"})
    assert "A100-PCIe-80GB is a PCIe card" in line and "intra_node pcie4" in line


# The data-centre and workstation cards of 2020-2025 that nccl-tests logs are published on: A40, L40, A30, the
# GeForce RTX 5090 and the RTX PRO 6000 Blackwell Server Edition (as the table above).
NEWER = ("A40", "L40", "A30", "RTX-5090", "RTX-PRO-6000")
NEWER_DATASHEET = [
    ("A40", "bf16_tflops", 299.4, "sparse"),                  # A40 datasheet
    ("A40", "tf32_tflops", 149.6, "sparse"),
    ("A40", "hbm_GBps", 696, "dense"),
    ("A40", "nvlink_GBps_per_direction", 112.5, "both directions"),
    ("L40", "bf16_tflops", 362.1, "sparse"),                  # L40 datasheet
    ("L40", "fp8_tflops", 724, "sparse"),
    ("L40", "fp32_tflops", 90.5, "dense"),
    ("L40", "tdp_w", 300, "dense"),
    ("A30", "bf16_tflops", 330, "sparse"),                    # A30 datasheet
    ("A30", "hbm_GBps", 933, "dense"),
    ("A30", "nvlink_GBps_per_direction", 200, "both directions"),
    ("A30", "tdp_w", 165, "dense"),
    ("RTX-5090", "fp16_tflops", 419, "FP16 accumulate"),      # RTX Blackwell whitepaper, GeForce RTX 5090 column
    ("RTX-5090", "fp8_tflops", 838, "sparse"),
    ("RTX-5090", "hbm_GBps", 1792, "dense"),
    ("RTX-5090", "tdp_w", 575, "dense"),
    ("RTX-PRO-6000", "hbm_GBps", 1597, "dense"),              # RTX PRO 6000 Blackwell Server Edition datasheet
    ("RTX-PRO-6000", "memory_gib", 96, "dense"),
    ("RTX-PRO-6000", "tdp_w", 600, "dense"),
]


@pytest.mark.parametrize(("name", "field", "printed", "how"), NEWER_DATASHEET)
def test_newer_card_figure_matches_its_datasheet(name: str, field: str, printed: float, how: str):
    expected = printed if how == "dense" else printed / 2
    assert getattr(gpu_spec(name), field) == pytest.approx(expected, rel=0.005)


@pytest.mark.parametrize("name", NEWER)
def test_newer_cards_are_pcie_cards_with_every_field(name: str):
    gpu = gpu_spec(name)
    assert gpu.form_factor == "pcie" and not gpu.nvls and gpu.pcie_lanes == 16
    assert min(gpu.memory_gib, gpu.hbm_GBps, gpu.fp32_tflops, gpu.tdp_w, gpu.sm_count) > 0
    assert not intra_node_platform("nvswitch-nvlink4").fits(gpu)


def test_newer_cards_compute_in_order_of_their_rates():
    """The same job on the same PCIe server (whose all-gathers bound its step): the RTX 4090 (165.2 TFLOP/s with
    FP32 accumulate) computes slower than the RTX 5090 (209.5), which computes slower than the RTX PRO 6000 (500,
    at the full rate of professional cards)."""
    rtx4090, rtx5090, pro = (_step(g).compute_s for g in ("RTX-4090", "RTX-5090", "RTX-PRO-6000"))
    assert rtx4090 > rtx5090 > 2 * pro


def test_a_topology_takes_the_gpu_as_the_device_name_prints_it(tmp_path):
    """A topology's gpu may be the name nvidia-smi and nccl-tests print ('NVIDIA H200' on a DGX-style server, a
    GeForce card by its full name): it reads as the table's name; a name of several table GPUs stays an error."""
    from topologies.spec import TopologySpec

    spec = TopologySpec.model_validate({"gpu": "NVIDIA GeForce RTX 5090", "gpus_per_node": 4, "nodes": 1,
                                        "intra_node": "pcie5-no-p2p"})
    assert spec.gpu == "RTX-5090"
    scenario = {"topology": {"preset": "dgx-h100", "gpu": "NVIDIA H200"},
                "training": {"model": "llama2-7b", "global_batch": 8, "seq_len": 2048}}
    path = tmp_path / "h200.yaml"
    path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
    result = CliRunner().invoke(app, ["predict", str(path)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "H200-SXM-141GB" in result.output
    assert "'H100' unknown" in refusal(tmp_path, {"preset": "dgx-h100", "gpu": "H100"})
