"""`compare`: several scenarios predicted side by side, with what each changes of the first (the base), as
`clustersim compare` shows them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.api.prediction import Prediction, predict
from simulator.api.results import Result
from simulator.api.scenario import ScenarioLike, as_scenario
from simulator.core.errors import ConfigError
from simulator.report.differences import differences, resolved_view

COMPARED = ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "mfu", "gpu_idle_fraction", "exposed_comm_s",
            "memory_per_gpu_bytes")  # the metrics of a comparison's rows, each with its change from the base


@dataclass(frozen=True)
class Comparison(Result):
    """Each scenario's `label`, full `prediction`, and what it changes of the base (`differences`: 'path: old
    -> new' strings of the resolved scenarios, as `clustersim compare` lists them)."""

    FIGURE = "comparison_figure"

    labels: tuple[str, ...]
    predictions: tuple[Prediction, ...]
    differences: tuple[tuple[str, ...], ...]

    def to_dict(self) -> dict[str, Any]:
        """{"scenarios": [...]}: each scenario's label, differs_from_base and prediction fields (as
        `clustersim compare --json`, with a label in place of the file)."""
        return {"scenarios": [{"label": label, "differs_from_base": list(change), **p.to_dict()}
                              for label, p, change in zip(self.labels, self.predictions, self.differences,
                                                          strict=True)]}

    def to_records(self) -> list[dict[str, Any]]:
        """One row a scenario: its label, what it changes, the compared metrics and each one's relative change
        from the base (`step_time_s_change`: 0.1 is 10% longer), and whether it fits in memory."""
        base = self.predictions[0]
        rows = []
        for label, p, change in zip(self.labels, self.predictions, self.differences, strict=True):
            row: dict[str, Any] = {"label": label, "differs_from_base": "; ".join(change)}
            for name in COMPARED:
                value, reference = getattr(p, name), getattr(base, name)
                row[name] = value
                row[f"{name}_change"] = value / reference - 1.0 if reference else None
            row["fits_in_memory"] = p.fits_in_memory
            rows.append(row)
        return rows


def compare(*scenarios: ScenarioLike, labels: Sequence[str] | None = None, calibration: str | Path | None = None,
            force_calibration: bool = False) -> Comparison:
    """Predict each scenario (a Scenario, its data or a YAML path; the first is the base) and what each
    changes of the base. `labels`: one per scenario (default: each one's name, else 'scenario N');
    `calibration`: a profile YAML every scenario is predicted with (as `predict`'s)."""
    if len(scenarios) < 2:
        raise ConfigError("compare needs at least two scenarios (the first is the base)")
    resolved = [as_scenario(s) for s in scenarios]
    if labels is not None and len(labels) != len(resolved):
        raise ConfigError(f"compare: {len(labels)} labels for {len(resolved)} scenarios")
    names = list(labels) if labels is not None else [s.name or f"scenario {i}" for i, s in enumerate(resolved, 1)]
    predictions = tuple(predict(s, calibration=calibration, force_calibration=force_calibration) for s in resolved)
    views = [resolved_view(*s._resolved, p.scenario["nccl_selection"]) for s, p in zip(resolved, predictions,
                                                                                          strict=True)]
    changes = tuple(tuple(differences(views[0], view)) for view in views)
    return Comparison(tuple(names), predictions, changes)
