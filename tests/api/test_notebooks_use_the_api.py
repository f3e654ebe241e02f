"""Every notebook imports clustersim only through its public API (`import simulator` or `from simulator import
...` of names in `simulator.__all__`), never an internal module, and is saved with its outputs."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

import simulator

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
INTERNAL = ("simulator.", "topologies", "workloads")


def _imports(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(module, names) for each import statement in the notebook's code cells."""
    found = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Import):
                found += [(alias.name, ()) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                found.append((node.module or "", tuple(alias.name for alias in node.names)))
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_imports_only_the_public_api(path):
    """No `simulator.<module>`, `topologies` or `workloads` import; names from `simulator` are public ones."""
    for module, names in _imports(path):
        assert not module.startswith(INTERNAL), f"{path.name} imports {module}"
        if module == "simulator":
            assert set(names) <= set(simulator.__all__), f"{path.name} imports {names} from simulator"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_saved_with_its_outputs(path):
    """Notebooks are committed run (notebooks/render.py), so a reader sees their figures: every code cell ran, in
    order, without an error, and the figures carry HTML as well as plotly's JSON, loading plotly.js from its CDN
    rather than embedding it (the file stays small)."""
    cells = [cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in cells] == list(range(1, len(cells) + 1)), f"{path.name}: not run"
    outputs = [output for cell in cells for output in cell.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    figures = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert figures and all("text/html" in o["data"] for o in figures)
    assert path.stat().st_size < 3 * 1024**2
