"""Run every notebook here top to bottom and save it with its outputs, so a reader sees the tables and figures
without running anything (figures carry plotly's JSON and HTML that loads plotly.js from its CDN).

    python3 notebooks/render.py             # all notebooks, in place
    python3 notebooks/render.py what_if     # one

The notebooks read the shared measurements in ../shared/data beside the checkout.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent


def render(path: Path) -> None:
    """Execute the notebook in its folder and write it back with its outputs."""
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    nbformat.write(notebook, path)
    print(f"rendered {path.name}")


def main(names: list[str]) -> None:
    paths = [HERE / f"{name.removesuffix('.ipynb')}.ipynb" for name in names] or sorted(HERE.glob("*.ipynb"))
    for path in paths:
        render(path)


if __name__ == "__main__":
    main(sys.argv[1:])
