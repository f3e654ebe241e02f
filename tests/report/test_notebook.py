"""Figures shown in a notebook carry plotly's HTML as well as its JSON, so HTML exports keep them."""

from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio
import pytest

from simulator.report.notebook import CONNECTED_RENDERERS, OFFLINE_RENDERERS, use_notebook_renderers


@pytest.fixture
def restore_renderers():
    before = pio.renderers.default
    yield
    pio.renderers.default = before


@pytest.mark.parametrize(("connected", "expected"), [(False, OFFLINE_RENDERERS), (True, CONNECTED_RENDERERS)])
def test_a_displayed_figure_has_json_and_html(restore_renderers, capsys, connected, expected):
    """After use_notebook_renderers, the output bundle of a figure holds both the plotly JSON mimetype
    (JupyterLab draws it) and text/html (nbconvert's HTML export shows it)."""
    assert use_notebook_renderers(connected) == expected == pio.renderers.default
    bundle = pio.renderers._build_mime_bundle(go.Figure(go.Bar(x=[1], y=[2])).to_dict())
    assert {"application/vnd.plotly.v1+json", "text/html"} <= set(bundle)
    assert "Plotly.newPlot" in bundle["text/html"]
    capsys.readouterr()  # outside IPython, activating the renderer prints its script
