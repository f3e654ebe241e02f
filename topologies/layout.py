"""Where things sit inside a server: device ids and roles, which PCIe switch and CPU socket a GPU or
NIC hangs under, and which NIC a GPU uses. The builders and the router share these rules so that
they agree.

The server layout follows HGX/DGX baseboards (DGX-1, DGX-2, DGX A100, DGX H100 system architecture
documents): GPUs in pairs under PCIe switches, each NIC under the switch of the GPUs that use it, the
switches split between two CPU sockets.
"""

from __future__ import annotations

GPUS_PER_PCIE_SWITCH = 2
MAX_CPU_SOCKETS = 2


def device_id(server: int, role: str) -> str:
    """Id of the device with `role` ("gpu3", "nic0", "nvswitch", "pcie1", "cpu0") in `server`."""
    return f"s{server}/{role}"


def node_attrs(kind: str, server: int, local: int, role: str) -> dict[str, object]:
    """The attribute dict every graph node carries (see topologies.model)."""
    return {"kind": kind, "server": server, "local": local, "role": role}


def pcie_switch_count(gpus: int) -> int:
    """PCIe switches of a server with `gpus` GPUs."""
    return max(1, -(-gpus // GPUS_PER_PCIE_SWITCH))


def cpu_count(gpus: int) -> int:
    """CPU sockets of a server (two, unless it has a single PCIe switch)."""
    return min(MAX_CPU_SOCKETS, pcie_switch_count(gpus))


def pcie_switch_of_gpu(gpu: int) -> int:
    """PCIe switch that GPU `gpu` sits under."""
    return gpu // GPUS_PER_PCIE_SWITCH


def cpu_of_pcie_switch(switch: int, gpus: int) -> int:
    """CPU socket that PCIe switch `switch` hangs under (switches split evenly, in order)."""
    return switch * cpu_count(gpus) // pcie_switch_count(gpus)


def nics_of_gpu(gpu: int, gpus: int, nics: int) -> range:
    """NICs GPU `gpu` uses: NIC floor(gpu * nics / gpus) when NICs are fewer than GPUs, else the
    nics/gpus NICs k with floor(k * gpus / nics) == gpu (e.g. AWS p5: 4 EFA NICs per GPU)."""
    if nics < gpus:
        first = gpu * nics // gpus
        return range(first, first + 1)
    return range(-(-gpu * nics // gpus), -(-(gpu + 1) * nics // gpus))


def gpu_of_nic(nic: int, gpus: int, nics: int) -> int:
    """The first GPU that uses NIC `nic` (the NIC sits under that GPU's PCIe switch)."""
    if nics < gpus:
        return -(-nic * gpus // nics)
    return nic * gpus // nics
