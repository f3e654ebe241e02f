"""The `clustersim` command: one Typer app, each command group in its own module.

Exit codes (DESIGN.md section 11): 0 ok, 2 bad input (one line naming what and where), 1 internal
error (a bug: the traceback is shown).
"""

from __future__ import annotations

import sys

import click
import typer
from rich.console import Console

from simulator.cli import calibrate, collective, compare, predict, validate, validate_training
from simulator.cli import sweep as sweep_commands
from simulator.cli import topology as topology_commands
from simulator.core.errors import ClusterSimError

app = typer.Typer(
    name="clustersim",
    help="Cluster scaling simulator: NCCL collectives and training steps on GPU clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
collective.register(app)
validate.register(app)
calibrate.register(app)
predict.register(app)
validate_training.register(app)
compare.register(app)
sweep_commands.register(app)
topology_commands.register(app)

_err = Console(stderr=True)


def main() -> None:
    """Console-script entry point: run the app, turning input errors into exit code 2."""
    try:
        app(standalone_mode=False)
    except ClusterSimError as exc:
        _err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        _err.print("aborted")
        sys.exit(130)
    except click.exceptions.ClickException as exc:  # usage errors: exit code 2, click's message
        exc.show()
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
