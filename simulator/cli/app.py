"""The `clustersim` command: one Typer app, each command group in its own module.

Exit codes: 0 ok, 2 bad input (one line naming what and where), 1 internal
error (a bug: the traceback is shown).
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.console import Console

from simulator.cli.common import print_message
from simulator.cli.lazy_group import LazyCommand, lazy_group
from simulator.core.errors import ClusterSimError

# Each command's module (which has `register(app)`) is imported when the command runs or shows its help, so
# `clustersim --help` and a plain `predict` do not pay for scipy, dask or plotly. The summary is what the
# listing shows: the start of the command's help (tests/cli/test_cli_conventions.py checks it).
COMMANDS = {
    "collective": LazyCommand("simulator.cli.collective",
                              "Predict an NCCL collective over a size sweep, printed like nccl-tests."),
    "validate": LazyCommand("simulator.cli.validate", "Predict every row of every log listed in a manifest "
                            "(or of one log) and report the error on time."),
    "calibrate": LazyCommand("simulator.cli.calibrate",
                             "Fit the collective model's parameters to measured nccl-tests logs."),
    "crossval": LazyCommand("simulator.cli.calibrate",
                            "Fit on some logs of a cluster and report the error on the others."),
    "predict": LazyCommand("simulator.cli.predict",
                           "Predict one training step: time, throughput, MFU, GPU idle time, memory."),
    "scale": LazyCommand("simulator.cli.predict", "Scaling-efficiency curve: predict the same job (same "
                         "per-GPU micro-batch and accumulation) at several node counts."),
    "plan": LazyCommand("simulator.cli.plan", "Find the fastest layouts of a training job."),
    "schema": LazyCommand("simulator.cli.schema", "Print the JSON Schema of an input file: scenario, topology, "
                          "training, model, sweep (default: scenario)."),
    "validate-training": LazyCommand("simulator.cli.validate_training", "Predict each published training case "
                                     "that the tool can express and compare with the source."),
    "compare": LazyCommand("simulator.cli.compare", "Compare scenarios: predict each and print the differences "
                           "that matter, relative to the first."),
    "sweep": LazyCommand("simulator.cli.sweep", "Run a sweep: every scenario of SWEEP.yaml (a base scenario "
                         "and axes to vary), one row each."),
    "presets": LazyCommand("simulator.cli.topology", "List the topology presets: GPUs per node, GPU, intra-node "
                           "link, network and description."),
    "topology": LazyCommand("simulator.cli.topology", "Inspect cluster topologies."),
    "import": LazyCommand("simulator.cli.import_cmd", "Turn another tool's training config into a scenario YAML for "
                          "`clustersim predict`."),
}

app = typer.Typer(
    cls=lazy_group(COMMANDS),
    rich_markup_mode=None,
    name="clustersim",
    help="Cluster scaling simulator: NCCL collectives and training steps on GPU clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    """--version: the installed distribution's version, from its metadata."""
    if value:
        import importlib.metadata  # a twentieth of a second at start: only --version reads it

        try:
            version = importlib.metadata.version("clustersim")
        except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
            version = "unknown (not installed)"
        print(f"clustersim {version}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version, help="Print the version and exit.")] = False) -> None:
    """Cluster scaling simulator: NCCL collectives and training steps on GPU clusters."""


_err = Console(stderr=True)
# Usage errors (missing option, bad integer): click's ClickException, or the one of the click copy that
# typer >= 0.26 vendors (typer._click), reached through a public typer exception's bases.
USAGE_ERRORS: tuple[type[Exception], ...] = tuple(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException" and issubclass(c, Exception))


def main() -> None:
    """Console-script entry point: run the app, turning input errors into exit code 2."""
    try:
        code = app(standalone_mode=False)
    except ClusterSimError as exc:
        print_message(_err, "error", "bold red", exc)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        _err.print("aborted")
        sys.exit(130)
    except USAGE_ERRORS as exc:  # exit code 2, click's message
        usage: Any = exc  # either click's ClickException: both have show() and exit_code
        usage.show()
        sys.exit(usage.exit_code)
    except OSError as exc:  # standard output failed (a full disk under `> results.json`); files report their own
        # (a closed pipe, `| head -1`, click ends quietly with exit code 1 itself)
        where = exc.filename or "standard output"
        print_message(_err, "error", "bold red", f"{where}: {exc.strerror or exc}")
        sys.exit(2)
    if code == 130:  # Ctrl-C: typer returns the exit code instead of raising when not standalone
        _err.print("aborted")
    if isinstance(code, int) and code:
        sys.exit(code)


if __name__ == "__main__":
    main()
