"""The import direction stays one-way (DESIGN.md section 2, STYLE.md).

specs -> topology graph + plan -> engine -> metrics -> reports: `topologies/` and `workloads/`
never import each other or the simulator (except the shared `simulator.core`), the network engine
knows nothing of topologies or collectives, and no module hides an import inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("simulator", "topologies", "workloads")

# package prefix -> prefixes it must not import
FORBIDDEN = {
    "topologies": ("workloads", "simulator.collectives", "simulator.network", "simulator.cli",
                   "simulator.validation", "simulator.calibration", "simulator.measurements"),
    "workloads": ("topologies", "simulator.collectives", "simulator.network", "simulator.cli",
                  "simulator.validation", "simulator.calibration", "simulator.measurements"),
    "simulator.core": ("topologies", "workloads", "simulator.collectives", "simulator.network",
                       "simulator.cli", "simulator.validation", "simulator.calibration", "simulator.measurements"),
    "simulator.network": ("topologies", "workloads", "simulator.collectives", "simulator.cli",
                          "simulator.validation", "simulator.calibration", "simulator.measurements"),
    "simulator.collectives": ("simulator.cli", "simulator.validation", "simulator.calibration",
                              "simulator.measurements"),
    "simulator.measurements": ("simulator.cli", "simulator.validation", "simulator.calibration"),
    "simulator.calibration": ("simulator.cli",),
    "simulator.validation": ("simulator.cli",),
}


def _modules() -> list[tuple[str, Path]]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out.append((name, path))
    return out


def _imports(tree: ast.AST) -> list[tuple[str, ast.AST]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node))
    return found


@pytest.mark.parametrize(("module", "path"), _modules(), ids=lambda x: str(x))
def test_imports_go_one_way(module, path):
    """Each module imports only what its layer may see."""
    rules = [bad for prefix, bad in FORBIDDEN.items() if module == prefix or module.startswith(prefix + ".")]
    tree = ast.parse(path.read_text())
    for imported, _ in _imports(tree):
        for forbidden in (f for group in rules for f in group):
            assert not (imported == forbidden or imported.startswith(forbidden + ".")), (
                f"{module} imports {imported}, which its layer must not see"
            )


@pytest.mark.parametrize(("module", "path"), _modules(), ids=lambda x: str(x))
def test_no_function_local_imports(module, path):
    """Imports sit at the top of the module, never inside a function (no hidden cycles)."""
    tree = ast.parse(path.read_text())
    for func in ast.walk(tree):
        if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(func):
                assert not isinstance(node, ast.Import | ast.ImportFrom), (
                    f"{module}.{func.name} imports inside the function (line {node.lineno})"
                )
