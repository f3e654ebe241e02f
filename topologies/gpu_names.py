"""GPU names as logs print them, read as the GPU table's names (data/gpus.yaml).

nccl-tests prints each rank's device under the name CUDA gives it, as nvidia-smi does: "NVIDIA
A100-SXM4-40GB", "Tesla V100-SXM2-16GB", "NVIDIA GeForce RTX 2080 Ti", "NVIDIA H100 80GB HBM3", "NVIDIA GH200
120GB" (all in the "Using devices" lines of published logs). A name is read, in this order, as:

1. a table name written in another case or with other separators ("h100_sxm5_80gb");
2. the same without the vendor's brand words (NVIDIA, Tesla, GeForce, Quadro);
3. a CUDA device name of a module whose name leaves out the table's form factor (DEVICE_NAMES);
4. the one table GPU every word of whose name but its memory size is a word of the text, with the memory size
   where the text states one ("NVIDIA A100 80GB PCIe" -> A100-PCIe-80GB, "NVIDIA RTX 6000 Ada Generation" ->
   RTX-6000-Ada).

A name that matches none, or several table GPUs equally, is left as written, and the table's look-up then
refuses it listing the known names.
"""

from __future__ import annotations

import re

from topologies.hardware import known_gpus

BRAND_WORDS = frozenset({"nvidia", "tesla", "geforce", "quadro"})
# CUDA device names (brand words removed, squeezed) that do not carry the form factor of the table's name: the
# SXM modules and superchips print their memory or nothing. "h100 80gb hbm3" and "gh200 120gb" are printed by
# published logs (benchmarks/data/outside_nccl_tests); the others are the names nvidia-smi gives those parts.
DEVICE_NAMES = {
    "h10080gbhbm3": "H100-SXM5-80GB",
    "h100pcie": "H100-PCIe-80GB",
    "h100nvl": "H100-NVL-94GB",
    "h800": "H800-SXM5-80GB",
    "h20": "H20-96GB",
    "h200": "H200-SXM-141GB",
    "gh200480gb": "GH200-96GB",
    "gh200120gb": "GH200-96GB",
    "gh200144ghbm3e": "GH200-144GB",
    "b200": "B200-180GB",
    "gb200": "GB200",
    "gb300": "GB300",
}
_MEMORY = re.compile(r"^\d+gb$")
# GeForce cards: NVIDIA's driver gives them no peer-to-peer over PCIe (the 40 and 50 series have none at all; the
# 30 series only over an NVLink bridge between two cards), so NCCL stages their transfers through host memory
_GEFORCE = re.compile(r"^RTX-[2-5]0[5-9]0")


def squeezed(text: str) -> str:
    """`text` lower-case without spaces, '-' or '_': how a name is compared with the vocabulary's."""
    return re.sub(r"[\s_-]", "", text.lower())


def _words(text: str) -> list[str]:
    return [word for word in re.split(r"[^a-z0-9]+", text.lower()) if word]


def table_gpu_name(text: str) -> str | None:
    """The GPU table's name for `text` (module docstring), or None when it names no table GPU unambiguously."""
    names = known_gpus()
    exact = {squeezed(name): name for name in names}
    words = [word for word in _words(text) if word not in BRAND_WORDS]
    unbranded = "".join(words)
    found = exact.get(squeezed(text)) or exact.get(unbranded) or DEVICE_NAMES.get(unbranded)
    if found:
        return found
    stated = {word for word in words if _MEMORY.match(word)}

    def fits(name: str) -> bool:
        own = _words(name)
        memory = {word for word in own if _MEMORY.match(word)}
        return set(own) - memory <= set(words) and (not stated or not memory or memory == stated)

    matches = [name for name in names if fits(name)]
    return matches[0] if len(matches) == 1 else None


def is_geforce(name: str) -> bool:
    """A GeForce card of the table (RTX 3090, 4090, 5090): no peer-to-peer between cards over PCIe."""
    return bool(_GEFORCE.match(name))
