"""The manifest of measured logs: which cluster produced each nccl-tests file.

A manifest is a YAML list, one entry per log, in the schema of ../shared/data/nccl-tests/manifest.yaml
(DESIGN.md section 11); log paths are relative to the manifest's folder. Unknown extra keys in an
entry are ignored with a warning (collected in `Manifest.warnings`), not an error, so that newer
manifests still load. An entry that cannot be read (a field missing or wrong, an entry repeated) is
set aside with its reason (`Manifest.rejected`) and the others load: one bad entry in a manifest of
many logs does not hide the rest. A manifest that is no list of entries at all is an error. This module
reads no log files: callers open `log_path(manifest, entry)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from simulator.collectives.busbw import COLLECTIVES, collective_name
from simulator.core.errors import ConfigError
from simulator.core.yaml_text import load_yaml_text
from simulator.measurements.nccl_tests import LOG_FORMATS
from topologies.gpu_names import squeezed, table_gpu_name
from topologies.hardware import gpu_spec, known_gpus
from topologies.network_names import described_nics
from topologies.platform_names import platform_kind
from topologies.spec import Transport

_ENV_PAIR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\S*)")
# other spellings of the vocabulary's transports (compared lower-case, without spaces, '-' or '_')
_TRANSPORT_SPELLINGS = {"infiniband": "ib", "rocev2": "roce", "awsefa": "efa", "gpudirecttcpx": "tcpx",
                        "gpudirecttcpxo": "tcpxo", "tcp": "sockets", "socket": "sockets", "slingshot11": "slingshot",
                        "hpeslingshot": "slingshot", "hpeslingshot11": "slingshot", "cxi": "slingshot"}
# a transport written with more words ("InfiniBand NDR", "RoCE v2 400G", "EFA v2"): the first of these word
# patterns that a word of it matches, most specific first (GPUDirect-TCPXO is not TCP; Spectrum-X RoCE is RoCE);
# InfiniBand's generations (EDR, HDR, NDR, XDR) name it too
_TRANSPORT_WORDS = (("tcpxo", "tcpxo"), ("tcpx", "tcpx"), (r"infiniband|ib|[ehnx]dr\d*", "ib"),
                    (r"roce(?:v2)?", "roce"), ("efa", "efa"), (r"slingshot(?:11)?|cxi", "slingshot"),
                    (r"tcp|sockets?", "sockets"), ("ethernet", "ethernet"))


def _transport_name(text: str) -> str:
    """The vocabulary's transport for `text`: its squeezed spelling, else the first word pattern a word of it
    matches (_TRANSPORT_WORDS), else the text squeezed (then refused naming the known transports)."""
    key = squeezed(text)
    if key in _TRANSPORT_SPELLINGS or key in {name for _, name in _TRANSPORT_WORDS}:
        return _TRANSPORT_SPELLINGS.get(key, key)
    words = [w for w in re.split(r"[^a-z0-9]+", text.lower()) if w]
    return next((name for pattern, name in _TRANSPORT_WORDS for word in words if re.fullmatch(pattern, word)), key)



def _described_network(text: str) -> dict[str, Any]:
    """inter_node fields from a network written as one description (ManifestEntry._transport_spelling)."""
    nics, transport = described_nics(text), _transport_name(text)
    if transport not in get_args(Transport):
        raise ValueError(f"{text!r} names no transport; expected one of {', '.join(get_args(Transport))} in it")
    if nics.count is None:
        raise ValueError(f"{text!r} states no count of NICs a node; write it as '8x 400G' in the text, or give the "
                         "fields: {transport: ib, nics_per_node: 8, nic_gbps: 400}")
    return {"transport": transport, "nics_per_node": nics.count, "nic_gbps": nics.nic_gbps(nics.count),
            "note": text}


def _canonical_gpu(value: Any) -> Any:
    """A GPU table name written in another case or with other separators ('h100_sxm5_80gb' -> H100-SXM5-80GB), or
    as the log's device list prints it ('NVIDIA H100 80GB HBM3'; topologies.gpu_names)."""
    if not isinstance(value, str):
        return value
    return table_gpu_name(value) or value


class ManifestEntry(BaseModel):
    """One measured log and the cluster it was measured on."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    file: str = Field(min_length=1, description="Log file name, relative to the manifest's folder.")
    collective: str = Field(
        description=f"nccl-tests tool name without _perf: one of {', '.join(COLLECTIVES)}."
    )
    gpu: str = Field(min_length=1, description="GPU model: a name of the GPU table (e.g. H100-SXM5-80GB) or the "
                     "device name the log prints (e.g. 'NVIDIA H100 80GB HBM3').")
    gpus_per_node: int = Field(strict=True, ge=1, description="GPUs used per node in this run.")
    nodes: int = Field(strict=True, ge=1, description="Number of nodes in this run.")
    intra_node: str = Field(min_length=1, description="Intra-node fabric: a platform name (e.g. nvswitch-nvlink4, "
                            "pcie4), or the fabric in words that the GPU settles (e.g. 'NVSwitch', 'PCIe Gen4').")
    inter_node: dict[str, Any] | None = Field(
        default=None,
        description="Inter-node network as written: transport, nics_per_node, nic_gbps (Gbit/s per NIC, "
        "may be null), sharp, note; or one description stating the transport, NICs and rate, e.g. "
        "'InfiniBand NDR 8x400G'. Absent for single-node runs.",
    )
    nccl: str | None = Field(default=None, description="NCCL version as stated, or 'unknown'.")
    format: str = Field(default="nccl-tests", description=f"Log layout: one of {', '.join(LOG_FORMATS)}.")
    notes: str | None = Field(default=None, description="Free-text remarks about the run.")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="NCCL environment in force, written 'NCCL_ALGO=ring NCCL_PROTO=simple' (or a mapping).",
    )
    run: int | None = Field(
        default=None,
        strict=True,
        ge=1,
        description="Which result table to take (1-based) from a file that holds several independent runs, "
        "as nccl-tests built without MPI=1 and started by mpirun on several hosts prints.",
    )
    gpus_per_thread: int | None = Field(
        default=None,
        strict=True,
        ge=1,
        description="GPUs one nccl-tests thread drove (-g; the header line's nGpus), for a log published "
        "without that line. One thread issues every one of its GPUs' launches each iteration, which sets a "
        "floor on the time of small sizes.",
    )
    nvlink_domain_gpus: int | None = Field(
        default=None,
        strict=True,
        ge=1,
        description="GPUs sharing one NVLink domain across nodes (NVL72: 72).",
    )

    @field_validator("gpus_per_node", "nodes", "run", "gpus_per_thread", "nvlink_domain_gpus", mode="before")
    @classmethod
    def _whole_number_as_text(cls, value: Any) -> Any:
        """'8' (a whole number written as text, as a quoted YAML value is) -> 8; anything else as written."""
        if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
            return int(value)
        return value

    @field_validator("nccl", mode="before")
    @classmethod
    def _version_as_number(cls, value: Any) -> Any:
        """An unquoted version YAML read as a number: 2.18 -> '2.18'. One written with one decimal (2.2, read from
        2.2 or 2.20 alike) or none names no release for sure and is refused, asking for the text."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return value
        text = repr(value)
        if not re.fullmatch(r"\d+\.\d{2,}", text):
            raise ValueError(f"{value!r} was read as a number and may mean more than one release (2.2 and 2.20 "
                             "read alike); write the version quoted, e.g. nccl: '2.20.5'")
        return text

    @field_validator("collective", mode="before")
    @classmethod
    def _collective_spelling(cls, value: Any) -> Any:
        """'AllReduce', 'all-reduce', 'allreduce' -> all_reduce (nccl-tests' tool names, as sources write them)."""
        return collective_name(value) if isinstance(value, str) else value

    @field_validator("gpu", mode="before")
    @classmethod
    def _gpu_spelling(cls, value: Any) -> Any:
        return _canonical_gpu(value)

    @field_validator("intra_node", mode="before")
    @classmethod
    def _intra_node_spelling(cls, value: Any, info: ValidationInfo) -> Any:
        """A platform name in another case, or the fabric in words ('NVSwitch', 'PCIe Gen4') read as the platform
        the entry's GPU fits (topologies.platform_names); text it does not settle stays, to be refused."""
        if not isinstance(value, str):
            return value
        gpu, per_node = info.data.get("gpu"), info.data.get("gpus_per_node")
        if isinstance(gpu, str) and gpu in known_gpus() and isinstance(per_node, int):
            return platform_kind(value, gpu_spec(gpu), per_node) or value.strip().lower()
        return value.strip().lower()

    @field_validator("inter_node", mode="before")
    @classmethod
    def _transport_spelling(cls, value: Any) -> Any:
        """The transport in the vocabulary's spelling ('InfiniBand' -> ib, 'RoCEv2' -> roce, 'TCP' -> sockets); the
        network written as one description ('InfiniBand NDR 8x400G', '4 x 200 Gb/s Slingshot-11') read as its
        transport, NICs and rate (topologies.network_names), the text kept as the note. A description that
        states no count of NICs is refused, asking for them."""
        if isinstance(value, str):
            return _described_network(value)
        if isinstance(value, dict) and isinstance(value.get("transport"), str):
            return {**value, "transport": _transport_name(value["transport"])}
        return value

    @field_validator("collective")
    @classmethod
    def _known_collective(cls, value: str) -> str:
        if value not in COLLECTIVES:
            raise ValueError(f"unknown collective {value!r}; expected one of {', '.join(COLLECTIVES)}")
        return value

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value not in LOG_FORMATS:
            raise ValueError(f"unknown format {value!r}; expected one of {', '.join(LOG_FORMATS)}")
        return value

    @field_validator("env", mode="before")
    @classmethod
    def _parse_env(cls, value: Any) -> Any:
        """'NCCL_ALGO=ring NCCL_PROTO=simple' -> {'NCCL_ALGO': 'ring', 'NCCL_PROTO': 'simple'}."""
        if value is None:
            return {}
        if isinstance(value, dict):
            return {k: v if isinstance(v, str) else str(v) for k, v in value.items()}
        if not isinstance(value, str):
            return value  # pydantic reports the type error
        env: dict[str, str] = {}
        for token in value.split():
            match = _ENV_PAIR.fullmatch(token)
            if match is None:
                raise ValueError(
                    f"{token!r} is not NAME=VALUE; expected e.g. 'NCCL_ALGO=ring NCCL_PROTO=simple'"
                )
            env[match.group(1)] = match.group(2)
        return env


@dataclass(frozen=True)
class Manifest:
    """The entries of a manifest, the folder its log paths are relative to, load warnings, and the entries set
    aside as (file, or "entry <n>" where it has none, and the reason, naming the manifest, entry and field)."""

    entries: tuple[ManifestEntry, ...]
    base_dir: Path
    warnings: tuple[str, ...]
    rejected: tuple[tuple[str, str], ...] = ()


def _describe(errors: ValidationError) -> str:
    parts = []
    for error in errors.errors():
        field = ".".join(str(p) for p in error["loc"]) or "entry"
        message = "missing (required)" if error["type"] == "missing" else error["msg"]
        parts.append(f"field '{field}': {message}")
    return "; ".join(parts)


def parse_manifest(text: str, source: str, base_dir: Path) -> Manifest:
    """Validate manifest YAML `text` (named `source` in messages); log paths resolve under `base_dir`.

    Raises ConfigError for invalid YAML or a top level that is not a non-empty list. An entry that is not
    a mapping, has a missing or mistyped field or an unknown collective or format, or repeats the file,
    collective and run of an entry before it is set aside in `Manifest.rejected` with a message "<source>
    entry <n> (file <name>): field '<field>': ..." (n counts from 1).
    """
    data = load_yaml_text(text, source)
    if not isinstance(data, list) or not data:
        found = "an empty list" if data == [] else type(data).__name__
        raise ConfigError(
            f"{source}: expected a YAML list of entries (file, collective, gpu, ...), found {found}"
        )
    entries: list[ManifestEntry] = []
    warnings: list[str] = []
    rejected: list[tuple[str, str]] = []
    seen: dict[tuple[str, str, int | None], int] = {}
    for index, raw in enumerate(data, start=1):
        if not isinstance(raw, dict):
            rejected.append((f"entry {index}",
                             f"{source} entry {index}: expected a mapping of fields, found {type(raw).__name__}"))
            continue
        label = str(raw.get("file") or f"entry {index}")
        where = f"{source} entry {index} (file {raw.get('file', '?')})"
        known = {key: value for key, value in raw.items() if key in ManifestEntry.model_fields}
        for key in raw:
            if key not in known:
                warnings.append(f"{where}: unknown key {key!r} ignored")
        try:
            entry = ManifestEntry.model_validate(known)
        except ValidationError as exc:
            rejected.append((label, f"{where}: {_describe(exc)}"))
            continue
        # one file may hold the tables of several tools or runs: an entry per (file, collective, run)
        key = (entry.file, entry.collective, entry.run)
        if key in seen:
            rejected.append((label, f"{where}: field 'file': listed twice with the same collective and run "
                                    f"(also entry {seen[key]})"))
            continue
        seen[key] = index
        entries.append(entry)
    return Manifest(entries=tuple(entries), base_dir=base_dir, warnings=tuple(warnings), rejected=tuple(rejected))


def log_path(manifest: Manifest, entry: ManifestEntry) -> Path:
    """Where the entry's log file is: relative to the manifest's folder."""
    return manifest.base_dir / entry.file
