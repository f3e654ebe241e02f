"""The import direction stays one-way (DESIGN.md section 2, STYLE.md).

specs -> topology graph + plan -> engine -> metrics -> reports: `topologies/` and `workloads/`
never import each other or the simulator (except the shared `simulator.core`), the network engine
knows nothing of topologies or collectives, and no module hides an import inside a function except
a heavy dependency that only some commands need (STYLE.md: so `clustersim --help` and `predict` start fast).
"""

from __future__ import annotations

import ast
import subprocess
import sys
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


# the heavy dependencies (and the modules that import them at their top) that a function may import where
# a command needs them; nothing else is imported inside a function
HEAVY = ("scipy", "distributed", "dask", "plotly", "pyarrow", "simulator.report.html",
         "importlib.metadata")  # the last: 50 ms at start, read only by --version
# what the app itself, and a plain `predict`, must not load
NOT_AT_START = ("scipy", "dask", "distributed", "plotly", "networkx", "simpy", "pyarrow")
NOT_FOR_PREDICT = ("scipy", "dask", "distributed", "plotly", "pyarrow")


def _is_heavy(name: str) -> bool:
    return any(name == heavy or name.startswith(heavy + ".") for heavy in HEAVY)


@pytest.mark.parametrize(("module", "path"), _modules(), ids=lambda x: str(x))
def test_no_function_local_imports(module, path):
    """Imports sit at the top of the module, never inside a function (no hidden cycles), except a heavy
    dependency imported where the command that needs it runs."""
    tree = ast.parse(path.read_text())
    for func in ast.walk(tree):
        if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(func):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                    assert all(_is_heavy(name) for name in names), (
                        f"{module}.{func.name} imports inside the function (line {node.lineno})"
                    )


def _loaded_after(statement: str) -> set[str]:
    """The top-level packages and modules in sys.modules after `statement`, in a fresh interpreter."""
    code = f"{statement}\nimport sys\nprint('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return set(out.stdout.split())


def _offenders(loaded: set[str], banned: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == b or m.startswith(b + ".") for b in banned))


def test_app_imports_no_heavy_dependency():
    """Importing the app (what `clustersim --help` does) loads none of scipy, dask, plotly, networkx, simpy:
    each command's module is imported when that command runs."""
    assert _offenders(_loaded_after("import simulator.cli.app"), NOT_AT_START) == []


def test_app_help_loads_no_command_module():
    """`clustersim --help` lists the commands without importing their modules."""
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom simulator.cli.app import app\n"
            "CliRunner().invoke(app, ['--help'])")
    loaded = _loaded_after(code)
    assert _offenders(loaded, NOT_AT_START) == []
    assert _offenders(loaded, ("simulator.cli.predict", "simulator.cli.calibrate", "simulator.cli.sweep")) == []


def test_predict_command_imports_no_optional_heavy_dependency():
    """The predict and scale commands' module loads neither scipy (the calibration fit, the topology
    summary's max-flow), Dask, plotly nor pyarrow: those come with calibrate, topology show, sweep
    --scheduler and --report."""
    assert _offenders(_loaded_after("import simulator.cli.predict"), NOT_FOR_PREDICT) == []


def test_import_simulator_is_light():
    """`import simulator` loads none of the heavy dependencies."""
    assert _offenders(_loaded_after("import simulator"), NOT_AT_START) == []
