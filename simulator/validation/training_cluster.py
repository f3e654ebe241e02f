"""The cluster of a published training case: free text ("A100 80GB (Selene, DGX A100)", "4 x 100
Gbps IB", "400 Gb/s per GPU") read into a topology preset with the stated GPU, size and network;
whatever is not stated comes from the preset and is named in the case's `defaults`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from topologies.gpu_names import is_geforce
from topologies.hardware import IntraNodePlatform, gpu_spec, intra_node_platform, known_gpus, known_platforms
from topologies.network_names import RATE, described_nics, rate_gbps
from topologies.presets import load_preset
from topologies.spec import NVL72_DOMAIN_GPUS, TopologySpec, nics_of_gpus_used


class Unexpressible(Exception):
    """A case this tool cannot lower onto its specs (the message is the skip reason)."""


# a field's text saying the source gave no value ("not stated", "unknown", "n/a", "not stated (tuned per run)")
UNSTATED = re.compile(r"^\s*(?:not\s+(?:stated|given|specified|published|reported)|unknown|unspecified|n/?a)\b",
                      re.IGNORECASE)
# a field's text saying there is none of it ("false", "off", "none (tuned)")
SAYS_NONE = re.compile(r"^\s*(?:false|no|none|off|disabled)\b", re.IGNORECASE)


_OPA_LINKS = re.compile(r"(\d+)\s*(?:x\s*)?(?:intel\s*)?omni-?path(?:\s*architecture)?\s*links?", re.IGNORECASE)
OPA_GBPS = 100.0  # Intel Omni-Path Architecture (100 Series): 100 Gb/s per port


# GPUs named in free text -> (GPU table name, the preset whose server holds it, its intra_node where it
# differs from the preset's), checked in order (GB300 before B300, GH200 before H200 ...).
_NAMED_GPUS: tuple[tuple[str, str, str, str | None], ...] = (
    (r"gb300", "GB300", "gb300-nvl72", None),
    (r"b300", "B300-288GB", "dgx-b300", None),
    (r"gh200.*144|gh200.*hbm3e", "GH200-144GB", "dgx-h100", "nvlink4-full-mesh-4"),
    (r"gh200", "GH200-96GB", "dgx-h100", "nvlink4-full-mesh-4"),
    (r"\bh800", "H800-SXM5-80GB", "hgx-h800", None),
    (r"\ba800", "A800-SXM4-80GB", "hgx-a800", None),
    (r"\bh20\b", "H20-96GB", "dgx-h100", None),
    (r"\ba10g\b", "A10G", "pcie-l40s", None),
)


# Cloud instance types named anywhere in a case's cluster text -> the preset that describes that instance (its
# GPUs, server and network, each sourced in topologies/presets/<name>.yaml), checked in order (p4de before p4d).
_INSTANCES: tuple[tuple[str, str], ...] = (
    (r"\bp4de\b", "aws-p4de"),
    (r"\bp4d\b", "aws-p4d"),
    (r"\bp5en\b", "aws-p5en"),
    (r"\bp5e\b", "aws-p5e"),
    (r"\bp5\b", "aws-p5"),
    (r"\bp6-b200\b", "aws-p6-b200"),
    (r"\ba3-highgpu|\ba3[ -]high\b", "gcp-a3-high"),
    (r"\ba3-megagpu|\ba3[ -]mega\b", "gcp-a3-mega"),
    (r"\ba3-ultragpu|\ba3[ -]ultra\b", "gcp-a3-ultra"),
    (r"\ba4-highgpu|\b(?:gcp|google cloud)[ -]a4\b", "gcp-a4"),
    (r"\bndm?(?:96a[m]?sr)?[ _]?a100[ _]?v4\b", "azure-nd-a100-v4"),
    (r"\bnd(?:96isr)?[ _]?h100[ _]?v5\b", "azure-nd-h100-v5"),
    (r"\bnd(?:96isr)?[ _]?h200[ _]?v5\b", "azure-nd-h200-v5"),
    # HPE Cray EX systems of 4-GPU nodes on Slingshot-11 (their presets give the sources)
    (r"\b(?:cscs[ -])?alps\b|\bclariden\b|\bsantis\b|\bisambard[ -]ai\b", "cscs-alps-gh200"),
    (r"\bperlmutter\b", "nersc-perlmutter"),
    (r"\bpolaris\b", "alcf-polaris"),
    # JSC's 4-GPU InfiniBand systems (their presets give the sources)
    (r"\bjuwels\b", "jsc-juwels-booster"),
    (r"\bjupiter\b", "jsc-jupiter-booster"),
)

_PCIE_PRESET = "pcie-l40s"  # the preset whose server holds PCIe cards (8 per node, no NVLink)
_MEMORY_TOKEN = re.compile(r"^\d+gb$")


def _tokens(text: str) -> set[str]:
    return {token for token in re.split(r"[^a-z0-9]+", text.lower()) if token}


def _table_card(text: str, defaults: list[str]) -> tuple[str, str, str | None] | None:
    """A card of the GPU table named in `text` (every token of its table name but the memory size is a word
    of the text: 'NVIDIA L40S', 'A100 80GB PCIe', 'GeForce RTX 4090'), in the PCIe server preset with its
    PCIe generation (without peer-to-peer for GeForce cards); None when no table GPU is named. Of several
    memory sizes, the stated one, else the largest, flagged. Reached only for text that names none of the
    NVLink module families `_gpu_and_preset` knows, so a match is a PCIe card."""
    words = _tokens(text)

    def core(name: str) -> set[str]:
        return {token for token in _tokens(name) if not _MEMORY_TOKEN.match(token)}

    matches = [name for name in known_gpus() if core(name) <= words]
    if not matches:  # workstation cards are often named without their RTX ("A6000", "6000 Ada")
        matches = [name for name in known_gpus() if "rtx" in core(name) and core(name) <= words | {"rtx"}]
    if not matches:
        return None
    stated = [name for name in matches if (_tokens(name) - core(name)) & words]
    choice = stated[0] if stated else max(matches, key=lambda name: gpu_spec(name).memory_gib)
    if not stated and len(matches) > 1:
        defaults.append(f"GPU {text!r}: memory not stated: {choice}")
    gen = gpu_spec(choice).pcie_gen
    geforce = is_geforce(choice)
    intra = f"pcie{gen}{'-no-p2p' if geforce else ''}"
    defaults.append(f"GPU {text!r}: server not stated: {load_preset(_PCIE_PRESET).gpus_per_node} cards over PCIe "
                    f"Gen{gen}{' without peer-to-peer (GeForce)' if geforce else ''} ({_PCIE_PRESET}'s server "
                    f"with intra_node {intra})")
    return choice, _PCIE_PRESET, intra


def _gpu_and_preset(text: str, gpus_per_node: int | None, defaults: list[str]) -> tuple[str, str, str | None]:
    """A GPU table name, the preset whose server it sits in and the server's intra_node where it differs
    from the preset's, from free text like 'V100 32GB (DGX-2)'."""
    low = text.lower()
    memory = re.search(r"(\d+)\s*gb", low)
    gib = int(memory.group(1)) if memory else None
    named = next(((gpu, preset, intra) for pattern, gpu, preset, intra in _NAMED_GPUS if re.search(pattern, low)),
                 ("H100-NVL-94GB", "pcie-l40s", "pcie5") if "h100" in low and re.search(r"\bnvl\b", low) else None)
    if named is not None:
        gpu, preset, intra = named
        if load_preset(preset).gpu != gpu:
            defaults.append(f"GPU {text!r}: server not stated: {preset}'s server"
                            f"{f' with intra_node {intra}' if intra else ''} ({gpu})")
        return named
    if "pcie" in low:
        card = _table_card(text, defaults)
        if card is None:
            raise Unexpressible(f"GPU {text!r}: no PCIe part of it in the GPU table (topologies/data/gpus.yaml)")
        return card
    if "gb200" in low:
        return "GB200", "gb200-nvl72", None
    if "b200" in low:
        return "B200-180GB", "dgx-b200", None
    if "h200" in low:
        return "H200-SXM-141GB", "hgx-h200", None
    if "h100" in low:
        if gib == 96 and "hbm2e" in low:
            return "H100-SXM-96GB-HBM2e", "dgx-h100", None
        if gib is None:
            defaults.append(f"GPU {text!r}: variant not stated: H100-SXM5-80GB")
        elif gib != 80:
            defaults.append(f"GPU {text!r}: {gib}GB part not in the GPU table: H100-SXM5-80GB")
        return "H100-SXM5-80GB", "dgx-h100", None
    if "a100" in low:
        if gib not in (40, 80):
            # an unqualified DGX A100 is the original 320 GB system (8 x 40 GB; the 80 GB parts came in
            # November 2020 as "DGX A100 640GB")
            gib = 40 if re.search(r"dgx-?\s?a100", low) else 80
            defaults.append(f"GPU {text!r}: memory not stated: A100-SXM4-{gib}GB")
        return ("A100-SXM4-40GB" if gib == 40 else "A100-SXM4-80GB"), "dgx-a100", None
    if "v100" in low:
        if gib not in (16, 32):
            defaults.append(f"GPU {text!r}: memory not stated: V100-SXM2-32GB")
        gpu = "V100-SXM2-16GB" if gib == 16 else "V100-SXM2-32GB"
        if re.search(r"dgx-?2", low) or gpus_per_node == 16:
            return gpu, "dgx-2-v100", None
        if not re.search(r"dgx-?1", low):
            defaults.append("V100 server not stated: dgx-1-v100")
        return gpu, "dgx-1-v100", None
    card = _table_card(text, defaults)
    if card is None:
        raise Unexpressible(f"GPU {text!r} is not in the GPU table (topologies/data/gpus.yaml)")
    return card


def _stated_nics(cluster: Mapping[str, Any], gpus_per_node: int, preset_nics: int,
                 defaults: list[str]) -> tuple[int, float] | None:
    """(NICs per node, Gb/s each) where the case states its network bandwidth, else None: `ib_links` or
    `inter_node_bw_per_node` ('4 x 100 Gbps', '400 Gb/s per GPU', a node's '800 Gbps' over the preset's NICs, or the
    short forms topologies.network_names reads), else the `inter_node` text."""
    for text in (cluster.get("ib_links"), cluster.get("inter_node_bw_per_node")):
        if not text:
            continue
        links = re.search(r"(\d+)\s*x\s*" + RATE, text, re.IGNORECASE)
        if links:
            return int(links.group(1)), rate_gbps(links, 2)
        speed = re.search(RATE + r"(\s*per GPU)?", text, re.IGNORECASE)
        if speed and speed.group(5):
            return gpus_per_node, rate_gbps(speed, 1)
        if speed:
            return preset_nics, rate_gbps(speed, 1) / preset_nics
        described = described_nics(text)  # the short forms: '800G', '8x100G', '8x EDR', '200GbE x 4'
        if described.rate_gbps is not None:
            count = described.count or preset_nics
            total = described.node_total or described.count is None  # a rate alone: the node's, as above
            return count, described.rate_gbps / count if total else described.rate_gbps
    opa = _OPA_LINKS.search(str(cluster.get("inter_node") or ""))
    if opa:  # "4 OmniPath links per node": the links' count, at Omni-Path's one speed
        return int(opa.group(1)), OPA_GBPS
    return _described_nics(str(cluster.get("inter_node") or ""), preset_nics, defaults)


def _described_nics(text: str, preset_nics: int, defaults: list[str]) -> tuple[int, float] | None:
    """(NICs per node, Gb/s each) as a network description gives them (topologies.network_names: '8x 400Gb/s NDR
    InfiniBand', '4 x HDR200', 'NDR400 IB, 8 HCAs', '3.2 Tbps InfiniBand'), else None: the stated count or else
    the preset's (flagged)."""
    described = described_nics(text)
    if described.rate_gbps is None:
        return None
    count = described.count
    if count is None:
        count = preset_nics
        defaults.append(f"NICs per node not stated ({text!r}): {count}, the server preset's")
    rate = described.rate_gbps
    return count, rate / count if described.node_total else rate


def _stated_transport(text: str | None) -> str | None:
    low = (text or "").lower()
    if "roce" in low or "spectrum-x" in low:  # NVIDIA Spectrum-X is RoCE on Spectrum switches and SuperNICs
        return "roce"
    if "efa" in low:
        return "efa"
    if "slingshot" in low:
        return "slingshot"
    if re.search(r"infiniband|\bib\b|\b[hnex]dr\d*\b|omni-?path|\bopa\b", low):
        return "ib"  # Omni-Path is driven through verbs like InfiniBand
    if re.search(r"ethernet|\d\s*gbe\b|\btcp\b", low) and "rdma" not in low:
        return "ethernet"  # NCCL's sockets over plain Ethernet (no RDMA named)
    return None


def _instance(cluster: Mapping[str, Any]) -> str | None:
    """The preset of a cloud instance type the cluster's text names ('AWS p4d.24xlarge', 'ND96isr H100 v5'),
    else None."""
    text = " ".join(str(value) for value in cluster.values() if isinstance(value, str)).lower()
    return next((preset for pattern, preset in _INSTANCES if re.search(pattern, text)), None)


def _instance_gpu(text: str, preset_name: str, defaults: list[str]) -> str:
    """The instance's GPU; an 80 GB part stated for an instance of the 40 GB one (p4d, ND A100 v4) is its
    80 GB sibling (p4de, NDm A100 v4)."""
    preset = load_preset(preset_name)
    gpu = preset.gpu
    memory = re.search(r"(\d+)\s*gb", text.lower())
    if gpu == "A100-SXM4-40GB" and memory and memory.group(1) == "80":
        gpu = "A100-SXM4-80GB"
    defaults.append(f"instance or system named: {preset_name} ({preset.description})"
                    + (f", with the stated {gpu}" if gpu != preset.gpu else ""))
    return gpu


def _wired_platform(text: str, platform_kind: str) -> str | None:
    """The intra-node platform that wires the NVLink count a server's text states per GPU ('NVLink (4 inter-GPU
    NVLink connects)', '8 NVLinks') where it is fewer than the module of `platform_kind` has: the switched platform
    of the same NVLink generation with that many links a GPU. None where no count is stated, where it is the
    module's own, or where no platform wires it."""
    count = re.search(r"(\d+)\s*(?:inter-?gpu\s+)?nvlinks?\b(?:\s+(?:connects|connections|links))?", text,
                      re.IGNORECASE)
    platform = intra_node_platform(platform_kind)
    if count is None or platform.layout != "nvswitch" or int(count.group(1)) >= platform.nvlinks_per_gpu:
        return None
    links = int(count.group(1))
    return next((kind for kind in known_platforms()
                 if (candidate := intra_node_platform(kind)).layout == "nvswitch"
                 and candidate.nvlink_gen == platform.nvlink_gen and candidate.nvlinks_per_gpu == links
                 and candidate.module_nvlinks == platform.nvlinks_per_gpu), None)


def _trays_per_stated_node(platform: IntraNodePlatform, per_node: int, defaults: list[str]) -> int:
    """How many servers a case's "node" of `per_node` GPUs is: on a rack-scale NVLink domain (GB200 / GB300
    NVL72) a node of more GPUs than a compute tray holds is that many trays (flagged; the domain spans the rack
    either way), elsewhere 1 (more GPUs than the server holds is the preset's error)."""
    tray = platform.max_gpus_per_node
    if platform.layout != "nvl72" or per_node <= tray or per_node % tray:
        return 1
    defaults.append(f"gpus_per_node {per_node} read as {per_node // tray} compute trays of {tray} GPUs "
                    f"({platform.description}); the NVLink domain spans the rack either way")
    return per_node // tray


def _preset_nics(nics: int, preset_gpus: int, per_node: int, preset_name: str) -> tuple[int, str]:
    """The preset server's NICs for a node of `per_node` GPUs (nics_of_gpus_used: a platform of fewer GPUs, four
    GH200 superchips, is read the same way), and whose they are (for the flag)."""
    share = nics_of_gpus_used(nics, preset_gpus, per_node)
    if share == nics:
        return nics, f"{preset_name}'s"
    return share, f"{preset_name}'s NICs of {per_node} of its {preset_gpus} GPUs:"


def topology_of(cluster: Mapping[str, Any], defaults: list[str]) -> tuple[TopologySpec, str]:
    """The cluster a case's `cluster` section describes, and its GPU name; fillers go to `defaults`. A cloud
    instance type named in its text (_INSTANCES) states the server, GPUs and network of that instance."""
    stated_per_node = cluster.get("gpus_per_node")
    instance = _instance(cluster)
    if instance is None and not cluster.get("gpu"):
        raise Unexpressible("GPU not stated (cluster.gpu)")
    if instance is not None:
        gpu, preset_name, intra = _instance_gpu(str(cluster.get("gpu") or ""), instance, defaults), instance, None
    else:
        gpu, preset_name, intra = _gpu_and_preset(cluster["gpu"], stated_per_node, defaults)
    preset = load_preset(preset_name)
    platform = intra_node_platform(intra or preset.intra_node)
    holds = platform.max_gpus_per_node if intra else preset.gpus_per_node
    per_node = stated_per_node or min(preset.gpus_per_node, holds)
    if stated_per_node is None and instance is None:
        defaults.append(f"gpus_per_node not stated: {per_node} ({preset_name})")
    n_gpus = cluster.get("num_gpus") or (cluster.get("nodes") or 0) * per_node
    trays = _trays_per_stated_node(platform, per_node, defaults)
    per_node //= trays
    if not n_gpus:
        raise Unexpressible("cluster size not stated (num_gpus or nodes)")
    if n_gpus < per_node:
        per_node = n_gpus  # part of one server
    if n_gpus % per_node:
        raise Unexpressible(f"num_gpus {n_gpus} is not a multiple of gpus_per_node {per_node}")
    nodes = n_gpus // per_node
    stated_intra = str(cluster.get("intra_node") or "")
    wired = _wired_platform(stated_intra, intra or preset.intra_node) if instance is None else None
    if wired is not None:
        intra = wired
        defaults.append(f"intra_node {stated_intra!r} read as {wired}: {intra_node_platform(wired).description}")
    elif stated_intra and instance is None and not re.search(r"nvswitch|dgx|fully connected", stated_intra,
                                                             re.IGNORECASE):
        defaults.append(f"intra_node {stated_intra!r} read as {preset.intra_node} ({preset_name}); "
                        "the server's NVLink wiring is not stated")
    overrides: dict[str, Any] = {"gpu": gpu, "gpus_per_node": per_node, **({"intra_node": intra} if intra else {})}
    cap = re.search(r"(\d+(?:\.\d+)?)\s*W\s*power\s*limit", str(cluster.get("gpu") or ""), re.IGNORECASE)
    if cap:  # e.g. "H100 SXM 96GB HBM2e (Grand Teton, 500W power limit)"
        overrides["gpu_power_limit_w"] = float(cap.group(1))
    if nodes > 1 and preset.inter_node is not None:
        base = preset.inter_node
        preset_nics, whose = _preset_nics(base.nics_per_node, preset.gpus_per_node, per_node, preset_name)
        nics = _stated_nics(cluster, per_node * trays, preset_nics * trays, defaults)
        if nics is not None:  # stated for the case's node: a tray has its share
            nics = (max(1, nics[0] // trays), nics[1])
        transport = _stated_transport(cluster.get("inter_node"))
        if instance is None:  # an instance type states its network; otherwise what the case leaves out is flagged
            if nics is None and transport is None:
                defaults.append(f"inter-node network not stated: {whose} {preset_nics} x {base.nic_gbps:g} Gb/s "
                                f"{base.transport}")
            elif nics is None:
                defaults.append(f"inter-node bandwidth not stated: {whose} {preset_nics} x {base.nic_gbps:g} Gb/s")
            elif transport is None:
                defaults.append(f"inter-node transport not stated: {base.transport}")
        count, speed = nics or (preset_nics, base.nic_gbps)
        overrides["inter_node"] = {"transport": transport or base.transport, "nics_per_node": count, "nic_gbps": speed}
        if transport not in (None, "ib"):
            overrides["inter_node"]["sharp"] = False  # SHARP is InfiniBand only
    topology = load_preset(preset_name, nodes=nodes, **overrides)
    domain = topology.gpus_per_nvlink_domain
    if n_gpus > domain and topology.intra_node == "nvlink5-nvl72" and domain < NVL72_DOMAIN_GPUS:
        defaults.append(f"placement in NVLink domains not stated: {n_gpus} GPUs split evenly over "
                        f"{n_gpus // domain} racks, {domain} a rack")
    return topology, gpu
