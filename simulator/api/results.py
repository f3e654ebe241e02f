"""What every result of the Python API shares: frozen dataclasses that turn into plain data (`to_dict`,
`to_json`), into rows for pandas where they are tabular (`to_records`), and into a plotly figure (`figure`).

plotly is loaded when a figure is first asked for (simulator.api.figures), so importing the API and
predicting never pay for it.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import json
from typing import Any


class Result:
    """Base of the API's results. A subclass is a frozen dataclass; fields whose name starts with `_` hold
    the internal objects behind it (never part of its data) and `FIGURE` names its builder in
    simulator.api.figures."""

    FIGURE = ""

    def to_dict(self) -> dict[str, Any]:
        """The result as plain data (numbers, strings, lists, mappings): what `to_json` writes."""
        return {f.name: copy.deepcopy(getattr(self, f.name)) for f in dataclasses.fields(self)  # type: ignore[arg-type]
                if not f.name.startswith("_")}

    def to_json(self, indent: int | None = 2) -> str:
        """`to_dict()` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent)

    def figure(self) -> Any:
        """A plotly Figure of the result (plotly is imported here, on first use)."""
        return getattr(importlib.import_module("simulator.api.figures"), self.FIGURE)(self)


def records(rows: tuple[Any, ...]) -> list[dict[str, Any]]:
    """Rows (frozen dataclasses) as a list of dicts, e.g. for `pandas.DataFrame(...)`."""
    return [{f.name: copy.deepcopy(getattr(row, f.name)) for f in dataclasses.fields(row) if not f.name.startswith("_")}
            for row in rows]
