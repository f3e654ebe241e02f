"""A command group that imports a command's module only when that command runs or shows its help.

`clustersim --help` lists every command from a table of names, modules and one-line summaries, so it
starts in the time typer itself takes; `clustersim predict` imports the predict module and what it
needs, not the calibration fit (scipy), the sweep runner (dask) or the reports (plotly). This is
click's documented pattern for large command-line tools ("Lazily Loading Subcommands").
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import typer
import typer.core
import typer.main


@dataclass(frozen=True)
class LazyCommand:
    """One command of the table: its module (which has `register(app)`) and its summary line."""

    module: str
    summary: str


def load_group(module: str) -> Any:
    """The click group holding the commands that `module.register` adds to a fresh Typer app."""
    holder = typer.Typer()
    importlib.import_module(module).register(holder)
    return typer.main.get_group(holder)


class LazyGroup(typer.core.TyperGroup):
    """The root group: commands registered on the app eagerly, then those of `table`, loaded on use.

    While the group formats its own help it lists the table's summaries without importing anything;
    any other lookup (running a command, `COMMAND --help`, completion, the reference generator) loads
    the command's module.
    """

    table: Mapping[str, LazyCommand] = MappingProxyType({})  # set per subclass by `lazy_group`

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self._listing = False
        self._loaded: dict[str, Any] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        return [*self.table, *(name for name in super().list_commands(ctx) if name not in self.table)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        entry = self.table.get(cmd_name)
        if entry is None:
            return super().get_command(ctx, cmd_name)
        if self._listing:
            return typer.core.TyperCommand(name=cmd_name, help=entry.summary, short_help=entry.summary)
        if entry.module not in self._loaded:
            self._loaded[entry.module] = load_group(entry.module)
        return self._loaded[entry.module].get_command(ctx, cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


def lazy_group(table: dict[str, LazyCommand]) -> type[LazyGroup]:
    """A LazyGroup class over `table` (typer takes the group as a class, not an instance)."""
    return type("ClusterSimGroup", (LazyGroup,), {"table": MappingProxyType(dict(table))})
