"""Failure presets (simulator/data/failures.yaml) and the published fleet figures kept to check them.

An `observed` preset is a count of interruptions by cause on a known job: each class's MTBF is its
components x hours / its interruptions (the derivation lives in the data file). An `mtbf_h` preset
gives the rates directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import ValidationError

from simulator.core.errors import ConfigError, config_error_from
from simulator.core.yaml_text import load_yaml_text, package_yaml_texts
from simulator.run.spec import COMPONENT_CLASSES, FailureRates

_SOURCE = "simulator/data/failures.yaml"


@dataclass(frozen=True)
class FleetCase:
    """A published interruption rate and the fleet it was measured on."""

    id: str
    source: str
    nodes: int
    gpus_per_node: int
    nics_per_node: int
    classes: tuple[str, ...]
    per_day: float

    def components(self) -> dict[str, int]:
        """Components per class as a two-tier non-blocking fabric counts them (two cables per NIC)."""
        nics = self.nodes * self.nics_per_node
        return {"gpu": self.nodes * self.gpus_per_node, "node": self.nodes, "nic": nics, "link": 2 * nics,
                "switch": 0, "software": self.nodes}


@cache
def _data() -> dict[str, Any]:
    data = load_yaml_text(package_yaml_texts("simulator", "data")["failures"], _SOURCE)
    if not isinstance(data, dict):
        raise ConfigError(f"{_SOURCE}: expected a mapping with presets and validation")
    return data


def preset_names() -> tuple[str, ...]:
    return tuple(sorted(_data()["presets"]))


def _rates(name: str, entry: dict[str, Any]) -> FailureRates:
    if "observed" in entry or "causes" in entry:
        stops: dict[str, int] = {}
        for cause in entry["causes"]:
            stops[cause["class"]] = stops.get(cause["class"], 0) + int(cause["interruptions"])
        mtbf = {kind: entry["components"][kind] * entry["hours"] / n for kind, n in stops.items()}
    else:
        mtbf = dict(entry["mtbf_h"])
    try:
        return FailureRates.model_validate({f"{kind}_mtbf_h": value for kind, value in mtbf.items()})
    except ValidationError as exc:
        raise config_error_from(exc, f"{_SOURCE}: {name}") from None


def load_failures(name: str) -> FailureRates:
    """The MTBFs of preset `name`; ConfigError listing the presets when there is none of that name."""
    presets = _data()["presets"]
    if name not in presets:
        raise ConfigError(f"failures: unknown preset {name!r} (valid: {', '.join(preset_names())})")
    return _rates(name, presets[name])


def preset_source(name: str) -> str:
    return str(_data()["presets"][name]["source"])


def fleet_cases() -> tuple[FleetCase, ...]:
    """The published fleet figures of the data file's `validation` list."""
    return tuple(FleetCase(id=c["id"], source=" ".join(str(c["source"]).split()), nodes=c["nodes"],
                           gpus_per_node=c["gpus_per_node"], nics_per_node=c["nics_per_node"],
                           classes=tuple(c["classes"]), per_day=c["per_day"]) for c in _data()["validation"])


def predicted_per_day(rates: FailureRates, case: FleetCase) -> float:
    """Interruptions a day that `rates` predict on the case's fleet, counting only the case's classes."""
    mtbf = rates.mtbf_h()
    counts = case.components()
    return 24.0 * sum(counts[kind] / mtbf[kind] for kind in case.classes if kind in mtbf and kind in COMPONENT_CLASSES)
