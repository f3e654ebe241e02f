"""The `clustersim` command: one Typer app, each command group in its own module.

Exit codes (DESIGN.md section 11): 0 ok, 2 bad input (one line naming what and where), 1 internal
error (a bug: the traceback is shown).
"""

from __future__ import annotations

import sys
from importlib import metadata
from typing import Annotated, Any

import click
import typer
from rich.console import Console

from simulator.cli import calibrate, collective, compare, plan, predict, schema, validate, validate_training
from simulator.cli import import_cmd as import_commands
from simulator.cli import sweep as sweep_commands
from simulator.cli import topology as topology_commands
from simulator.cli.common import print_message
from simulator.core.errors import ClusterSimError

app = typer.Typer(
    name="clustersim",
    help="Cluster scaling simulator: NCCL collectives and training steps on GPU clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    """--version: the installed distribution's version, from its metadata."""
    if value:
        try:
            version = metadata.version("clustersim")
        except metadata.PackageNotFoundError:  # run from a checkout that was never installed
            version = "unknown (not installed)"
        print(f"clustersim {version}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version, help="Print the version and exit.")] = False) -> None:
    """Cluster scaling simulator: NCCL collectives and training steps on GPU clusters."""


collective.register(app)
validate.register(app)
calibrate.register(app)
predict.register(app)
plan.register(app)
schema.register(app)
validate_training.register(app)
compare.register(app)
sweep_commands.register(app)
topology_commands.register(app)
import_commands.register(app)

_err = Console(stderr=True)
# Usage errors (missing option, bad integer): click's ClickException, and the one of the click copy
# that typer >= 0.26 vendors (typer._click), reached through a public typer exception's bases.
USAGE_ERRORS: tuple[type[Exception], ...] = (
    click.exceptions.ClickException,
    *(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException" and issubclass(c, Exception)))


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
