"""Every notebook in notebooks/ runs top to bottom (nbclient), as a capacity planner would run it."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.mark.skipif(not SHARED.exists(), reason="the notebooks read ../shared/data")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    """Execute the notebook in its folder; any cell error fails the test."""
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
