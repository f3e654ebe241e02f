"""Hardware facts as data: the GPU table (data/gpus.yaml), the intra-node platforms
(data/intra_node.yaml) and PCIe lane rates. Every figure's source is cited in the YAML; this module
only loads it into frozen dataclasses and answers look-ups.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

import yaml

from simulator.core.errors import ConfigError

Arch = Literal["volta", "turing", "ampere", "ada", "hopper", "blackwell"]
Layout = Literal["nvswitch", "nvlink_mesh", "nvl72", "pcie", "pcie_bridged"]
Precision = Literal["bf16", "fp16", "fp8", "tf32", "fp32"]
FormFactor = Literal["sxm", "pcie"]

# PCIe payload rate per lane, one direction, GB/s: transfer rate x line-code efficiency / 8 bits.
# PCI-SIG base specifications: Gen3 8 GT/s 128b/130b, Gen4 16 GT/s, Gen5 32 GT/s (128b/130b),
# Gen6 64 GT/s PAM4 with 242/256-byte FLITs. x16: Gen3 15.75, Gen4 31.5, Gen5 63.0, Gen6 121 GB/s.
_PCIE_GBPS_PER_LANE = {3: 8 * 128 / 130 / 8, 4: 16 * 128 / 130 / 8, 5: 32 * 128 / 130 / 8, 6: 64 * 242 / 256 / 8}


def pcie_GBps_per_direction(gen: int, lanes: int) -> float:
    """Payload bandwidth of a PCIe link, one direction, GB/s (e.g. Gen4 x16 = 31.5)."""
    try:
        return _PCIE_GBPS_PER_LANE[gen] * lanes
    except KeyError:
        raise ConfigError(f"pcie_gen {gen} unknown; valid: {sorted(_PCIE_GBPS_PER_LANE)}") from None


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model. Dense peak TFLOP/s per precision (None where the GPU has no such tensor path);
    NVLink figures are per GPU, all its links together, one direction."""

    name: str
    arch: Arch
    memory_gib: float
    hbm_GBps: float
    bf16_tflops: float | None
    fp16_tflops: float | None
    fp8_tflops: float | None
    tf32_tflops: float | None
    fp32_tflops: float
    nvlinks: int
    nvlink_gen: int
    nvlink_GBps_per_direction: float
    pcie_gen: int
    pcie_lanes: int
    sm_count: int
    tdp_w: float
    nvls: bool
    # "pcie": an add-in card, whose NVLinks (if any) join it to one or two other cards through bridges, never to
    # an NVSwitch or a module's mesh; "sxm": a module on a baseboard (SXM, OAM-style, or a superchip)
    form_factor: FormFactor = "sxm"
    # a Grace superchip's GPU (GH200, GB200, GB300): its node's NICs hang off the Grace CPU, which the GPU reaches
    # over NVLink-C2C
    grace: bool = False
    # the measured maximum achievable bf16 matmul rate, TFLOP/s (the best shape of a torch.matmul sweep), where
    # one is published; None elsewhere (simulator.training.compute.gemm_rate_factor)
    mamf_bf16_tflops: float | None = None
    mamf_presumed: bool = False  # the rate is presumed from other parts' (gpus.yaml says from which), not measured

    def peak_tflops(self, precision: Precision) -> float:
        """Dense peak TFLOP/s at `precision`; ConfigError if this GPU has no such path."""
        value = getattr(self, f"{precision}_tflops")
        if value is None:
            supported = [p for p in ("bf16", "fp16", "fp8", "tf32", "fp32") if getattr(self, f"{p}_tflops")]
            raise ConfigError(f"{self.name} has no {precision} tensor path; supported: {supported}")
        return float(value)


@dataclass(frozen=True)
class IntraNodePlatform:
    """How the GPUs of one server are joined (an `intra_node` value of a TopologySpec)."""

    kind: str
    description: str
    layout: Layout
    nvlink_gen: int
    nvlinks_per_gpu: int
    max_gpus_per_node: int
    p2p: bool
    host_pcie_gen: int
    smp_GBps_per_direction: float
    nvlink_pairs: tuple[tuple[int, int, int], ...] = ()
    # NVLinks of the module the platform takes, where it wires fewer of them (nvlinks_per_gpu); None: all of them
    module_nvlinks: int | None = None

    def fits(self, gpu: GpuSpec) -> bool:
        """True when `gpu` is a module with the NVLinks this platform takes (any GPU fits a PCIe platform; a PCIe
        card's bridged NVLinks fit no NVSwitch or mesh, only a server of bridged pairs, which takes no module)."""
        if self.layout == "pcie":
            return True
        if self.layout == "pcie_bridged":
            return gpu.form_factor == "pcie" and gpu.nvlinks > 0
        return (gpu.form_factor == "sxm" and gpu.nvlink_gen == self.nvlink_gen
                and gpu.nvlinks == (self.module_nvlinks or self.nvlinks_per_gpu))


def _load(filename: str) -> dict[str, dict[str, Any]]:
    text = resources.files("topologies").joinpath("data", filename).read_text(encoding="utf-8")
    return dict(yaml.safe_load(text))


@cache
def _gpu_table() -> dict[str, GpuSpec]:
    return {name: GpuSpec(name=name, **fields) for name, fields in _load("gpus.yaml").items()}


@cache
def _platform_table() -> dict[str, IntraNodePlatform]:
    table = {}
    for kind, fields in _load("intra_node.yaml").items():
        pairs = tuple(tuple(p) for p in fields.pop("nvlink_pairs", ()))
        table[kind] = IntraNodePlatform(kind=kind, nvlink_pairs=pairs, **fields)
    return table


def known_gpus() -> list[str]:
    """Names of the GPUs in the table, sorted."""
    return sorted(_gpu_table())


def gpu_spec(name: str) -> GpuSpec:
    """The GPU called `name`; ConfigError listing the known names otherwise."""
    try:
        return _gpu_table()[name]
    except KeyError:
        raise ConfigError(f"gpu {name!r} unknown; known: {', '.join(known_gpus())}") from None


def known_platforms() -> list[str]:
    """The intra-node platform kinds in the table, sorted."""
    return sorted(_platform_table())


def intra_node_platform(kind: str) -> IntraNodePlatform:
    """The intra-node platform `kind`; ConfigError listing the known kinds otherwise."""
    try:
        return _platform_table()[kind]
    except KeyError:
        raise ConfigError(f"intra_node {kind!r} unknown; known: {', '.join(known_platforms())}") from None


def gpus_fitting(platform: IntraNodePlatform) -> list[str]:
    """Names of the GPUs that fit `platform` (for error messages)."""
    return [name for name in known_gpus() if platform.fits(_gpu_table()[name])]
