"""clustersim: predict distributed training on GPU clusters (step time, throughput, MFU, memory, scaling).

The public Python API (docs/api.md), semver-stable:

    import simulator as cs

    scenario = cs.Scenario(model="llama2-70b", topology="dgx-h100", nodes=16, tp=8, global_batch=512)
    p = cs.predict(scenario)               # one step, the numbers of `clustersim predict --json`
    p.step_time_s, p.mfu, p.to_dict(), p.figure()

Functions: predict, scale, plan, compare, sweep, collective, validate, calibrate, crossval, and
use_notebook_renderers (figures that survive a notebook's HTML export). Every name is
loaded on first use (PEP 562), so `import simulator` stays light.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulator.api.collective import CollectivePrediction, collective
    from simulator.api.comparison import Comparison, compare
    from simulator.api.measured import Calibration, CrossValidation, Validation, calibrate, crossval, validate
    from simulator.api.planning import Plan, PlannedLayout, plan
    from simulator.api.prediction import Prediction, Scaling, ScalingRow, predict, scale
    from simulator.api.scenario import Scenario
    from simulator.api.sweeping import SweepResult, sweep
    from simulator.core.errors import ClusterSimError, ConfigError
    from simulator.report.notebook import use_notebook_renderers

_HOMES = {
    "Scenario": "simulator.api.scenario",
    "predict": "simulator.api.prediction", "Prediction": "simulator.api.prediction",
    "scale": "simulator.api.prediction", "Scaling": "simulator.api.prediction",
    "ScalingRow": "simulator.api.prediction",
    "plan": "simulator.api.planning", "Plan": "simulator.api.planning", "PlannedLayout": "simulator.api.planning",
    "compare": "simulator.api.comparison", "Comparison": "simulator.api.comparison",
    "sweep": "simulator.api.sweeping", "SweepResult": "simulator.api.sweeping",
    "collective": "simulator.api.collective", "CollectivePrediction": "simulator.api.collective",
    "validate": "simulator.api.measured", "Validation": "simulator.api.measured",
    "calibrate": "simulator.api.measured", "Calibration": "simulator.api.measured",
    "crossval": "simulator.api.measured", "CrossValidation": "simulator.api.measured",
    "ClusterSimError": "simulator.core.errors", "ConfigError": "simulator.core.errors",
    "use_notebook_renderers": "simulator.report.notebook",
}

__all__ = [
    "Calibration", "ClusterSimError", "CollectivePrediction", "Comparison", "ConfigError", "CrossValidation", "Plan",
    "PlannedLayout", "Prediction", "Scaling", "ScalingRow", "Scenario", "SweepResult", "Validation", "calibrate",
    "collective", "compare", "crossval", "plan", "predict", "scale", "sweep", "use_notebook_renderers", "validate",
]


class _Package(types.ModuleType):
    """The `simulator` package, whose public names win over its subpackages of the same name: `simulator.sweep`
    is the API's function even once the subpackage of sweep internals is loaded (import that one by its full
    name: `from simulator.sweep import ...`)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _HOMES and isinstance(value, types.ModuleType):
            return  # the import system binding a subpackage over a public name
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    """The public name `name`, imported from its module on first use (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'simulator' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
