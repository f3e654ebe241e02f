"""How plotly figures show in a Jupyter notebook so that they survive export.

A figure displayed in a notebook is stored in the cell's output under the renderers set in
`plotly.io.renderers.default`. plotly 6 and later store only its JSON (`application/vnd.plotly.v1+json`,
the `plotly_mimetype` renderer) when they detect JupyterLab or VS Code: JupyterLab draws it, but
`jupyter nbconvert --to html`, GitHub's notebook view and a docs site built from the notebook do not, and
the figure vanishes (plotly.py issue 5365). Combining renderers with `+` stores one output with several
representations (plotly's renderer documentation): `plotly_mimetype+notebook` keeps the JSON and adds
plotly's HTML (`text/html`), which any HTML export shows. `notebook` embeds plotly.js (about 4.8 MB)
once per notebook, in the output of the first figure's cell, so the exported page opens offline;
`notebook_connected` loads plotly.js from its CDN instead (a smaller notebook, a page that needs the
network).
"""

from __future__ import annotations

import plotly.io as pio

OFFLINE_RENDERERS = "plotly_mimetype+notebook"
CONNECTED_RENDERERS = "plotly_mimetype+notebook_connected"


def use_notebook_renderers(connected: bool = False) -> None:
    """Make every plotly figure displayed from here on carry its HTML as well as its JSON (see module
    docstring); `connected`: load plotly.js from the CDN rather than embed it. Call it once, in the
    notebook's first code cell (it returns nothing, so the cell shows no output); plotly.js is written
    into the output of the first figure's cell."""
    pio.renderers.default = CONNECTED_RENDERERS if connected else OFFLINE_RENDERERS
