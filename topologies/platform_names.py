"""A server's intra-node fabric written in words ("NVSwitch", "NVLink", "PCIe Gen4 without P2P"), read as the
intra-node platform (data/intra_node.yaml) that the server's GPU fits.

The words name a kind of platform: NVL72 (or NVLink with 72), NVSwitch (or NVLS), a mesh (mesh, cube), PCIe with
or without peer-to-peer and with NVLink bridges, or NVLink alone (any of the NVLink kinds). Of the platforms of
that kind that take the GPU (IntraNodePlatform.fits) and as many GPUs a server, the one is taken; of several, the
one wiring all the module's links (an HGX A100 board rather than a board wiring 4 of its 12). A PCIe server is of
the generation the text states (Gen4, PCIe5), else the GPU's own, at most 5, without peer-to-peer where the text
says so or the card is a GeForce card, whose driver offers none (gpu_names.is_geforce). Text that names none, or leaves
several platforms (8 V100s over "NVLink": DGX-1's hybrid cube mesh or an NVSwitch board), is not read: the
caller refuses it, naming the platforms.
"""

from __future__ import annotations

import re

from topologies.gpu_names import is_geforce
from topologies.hardware import GpuSpec, IntraNodePlatform, intra_node_platform, known_platforms

_NO_P2P = re.compile(r"\b(?:no|without|disabled?)[\s_-]*p2p\b|\bp2p[\s_-]*(?:off|disabled?)\b|\bnop2p\b")
_PCIE_GEN = re.compile(r"(?:pcie|pci-e|gen)\s*-?\s*([3-6])\b")


def _layouts(text: str) -> set[str]:
    """The platform layouts the words allow (empty: they name no fabric)."""
    if "nvl72" in text or ("nvlink" in text and re.search(r"\b72\b", text)):
        return {"nvl72"}
    if re.search(r"nvswitch|nvls\b", text):
        return {"nvswitch"}
    if re.search(r"\bmesh\b|\bcube\b", text):
        return {"nvlink_mesh"}
    if re.search(r"\bpci", text):
        return {"pcie_bridged"} if re.search(r"bridge", text) else {"pcie"}
    if "nvlink" in text:
        return {"nvswitch", "nvlink_mesh", "nvl72"}
    return set()


def platform_kind(text: str, gpu: GpuSpec, gpus_per_node: int) -> str | None:
    """The intra-node platform `text` names for a server of `gpus_per_node` `gpu`s (module docstring), or None."""
    low = text.strip().lower()
    if low in known_platforms():
        return low
    layouts = _layouts(low)
    platforms: list[IntraNodePlatform] = [intra_node_platform(kind) for kind in known_platforms()]
    fitting = [p for p in platforms if p.layout in layouts and p.fits(gpu) and gpus_per_node <= p.max_gpus_per_node]
    if layouts & {"pcie", "pcie_bridged"}:
        stated = _PCIE_GEN.search(low)
        gen = int(stated.group(1)) if stated else min(gpu.pcie_gen, 5)
        p2p = not (_NO_P2P.search(low) or is_geforce(gpu.name))
        fitting = [p for p in fitting if p.host_pcie_gen == gen and p.p2p == p2p]
    if len(fitting) > 1:
        fitting = [p for p in fitting if p.module_nvlinks is None]
    return fitting[0].kind if len(fitting) == 1 else None
