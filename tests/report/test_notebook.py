"""Figures shown in a notebook carry plotly's HTML as well as its JSON, so HTML exports keep them."""

from __future__ import annotations

from pathlib import Path

import nbformat
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from nbclient import NotebookClient

from simulator.report.notebook import CONNECTED_RENDERERS, OFFLINE_RENDERERS, use_notebook_renderers

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture
def restore_renderers():
    before = pio.renderers.default
    yield
    pio.renderers.default = before


@pytest.mark.parametrize(("connected", "expected"), [(False, OFFLINE_RENDERERS), (True, CONNECTED_RENDERERS)])
def test_a_displayed_figure_has_json_and_html(restore_renderers, capsys, connected, expected):
    """After use_notebook_renderers, the output bundle of a figure holds both the plotly JSON mimetype
    (JupyterLab draws it) and text/html (nbconvert's HTML export shows it)."""
    use_notebook_renderers(connected)
    assert pio.renderers.default == expected
    bundle = pio.renderers._build_mime_bundle(go.Figure(go.Bar(x=[1], y=[2])).to_dict())
    assert {"application/vnd.plotly.v1+json", "text/html"} <= set(bundle)
    assert "Plotly.newPlot" in bundle["text/html"]
    capsys.readouterr()  # outside IPython, activating the renderer prints its script


def test_an_executed_notebook_stores_the_figure_as_html(tmp_path):
    """A notebook that calls use_notebook_renderers and then displays a figure, run in a real kernel
    (nbclient): the figure's output holds text/html drawing it (what nbconvert's HTML export shows)
    beside plotly's JSON."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("from simulator.report.notebook import use_notebook_renderers\n"
                                  "use_notebook_renderers()"),
        nbformat.v4.new_code_cell("import plotly.graph_objects as go\ngo.Figure(go.Bar(x=[1, 2], y=[3, 4]))")]
    NotebookClient(notebook, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(REPOSITORY)}}).execute()
    outputs = [o for cell in notebook.cells for o in cell.outputs if "data" in o]
    (figure,) = [o for o in outputs if "application/vnd.plotly.v1+json" in o["data"]]
    assert "Plotly.newPlot" in figure["data"]["text/html"]
    # plotly.js itself, embedded once (the offline renderer), so the exported page draws without the network
    assert sum("* plotly.js v" in o["data"].get("text/html", "") for o in outputs) == 1
