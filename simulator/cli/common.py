"""Helpers shared by CLI commands: reading user files, showing user text, parsing sizes and environments."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from simulator.core.errors import ConfigError
from simulator.core.input_file import read_input_text
from simulator.core.units import parse_count, parse_gbps, parse_size
from simulator.core.yaml_text import load_yaml_text

T = TypeVar("T")


def printable(text: object) -> str:
    """User text (a name, a file name, a message echoing them) fit for a terminal: control and format
    characters written as Python escapes (ESC as \\x1b, a newline as \\n, U+202E as \\u202e), so a name cannot
    retitle, recolour or rewrite the user's terminal, nor split a one-line message."""
    shown = str(text)
    if shown.isprintable():
        return shown
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in shown)


def plain(text: object, style: str = "") -> Text:
    """User text for rich (a table title or cell): printable() and never read as console markup, so a name
    holding `[/x]` or `[bold]` is shown as written."""
    return Text(printable(text), style=style)


# stdout's width when it is a file or a pipe: rich would wrap tables at 80 columns there, splitting words
# ("InfiniBan / d"); no table the commands print is wider than this, so none of their cells is wrapped
PIPED_WIDTH = 1000


def table_console(min_width: int = 0) -> Console:
    """Standard output for tables: a terminal's own width (at least `min_width`); a file or a pipe, where
    nothing is there to fit, PIPED_WIDTH, so every row stays on one line and can be read by a script."""
    console = Console()
    if not console.is_terminal:
        return Console(width=PIPED_WIDTH)
    return console if console.width >= min_width else Console(width=min_width)


def print_message(console: Console, label: str, style: str, message: object) -> None:
    """One line `label: message` on `console` (stderr for errors and warnings), the label styled, the
    message shown as plain text."""
    console.print(Text.assemble((f"{label}:", style), " ", plain(message)), highlight=False, soft_wrap=True)


def write_text(path: Path, text: str, what: str) -> None:
    """Write a user's output file whole or not at all: through a temporary file in its folder, renamed
    over `path` once written, so a full disk or a read-only folder leaves no partial file (and an old
    file at `path` as it was); a device or pipe is written directly. ConfigError naming it when the
    folder is missing or unwritable."""
    check_writable(path, what)
    tmp: str | None = None
    try:
        if path.exists() and not path.is_file():  # a device or a pipe (/dev/null, /dev/stdout): written as it is,
            path.write_text(text, encoding="utf-8")  # never renamed over
            return
        handle, tmp = tempfile.mkstemp(dir=path.resolve().parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as a plain open() would create it (mkstemp makes it 0600)
        os.replace(tmp, path)
    except OSError as exc:
        raise ConfigError(f"cannot write {what} {path}: {exc.strerror}") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def check_writable(path: Path | None, what: str) -> None:
    """ConfigError, before anything is written, when `path` (if given) cannot be a file to write: its
    folder missing, or a directory in its place. Commands writing several files check all first."""
    if path is None:
        return
    if not path.resolve().parent.is_dir():
        raise ConfigError(f"cannot write {what} {path}: no directory {path.parent}")
    if path.is_dir():
        raise ConfigError(f"cannot write {what} {path}: it is a directory")


def read_yaml(path: Path, what: str) -> Any:
    """Read and parse a user's YAML file; ConfigError naming it on a missing file or bad YAML."""
    return load_yaml_text(read_input_text(path, what), str(path))


def _parsed(parse: Callable[[str], T], text: str, flag: str) -> T:
    """`parse(text)`; its ValueError as a ConfigError naming the flag."""
    try:
        return parse(text)
    except ValueError as exc:
        raise ConfigError(f"{flag}: {exc}") from None


def size_option(text: str, flag: str) -> int:
    """A byte size flag (-b/-e) as nccl-tests takes it; ConfigError names the flag."""
    return _parsed(parse_size, text, flag)


def count_option(text: str | None, flag: str) -> int | None:
    """A count flag (4K, 16M, 4Mi: parse_count); None stays None; ConfigError naming the flag otherwise."""
    return None if text is None else _parsed(parse_count, text, flag)


def gbps_option(text: str | None, flag: str) -> float | None:
    """A link-speed flag in Gbit/s (400, 400G, 400Gbps, 50GB/s: parse_gbps); None stays None; ConfigError
    naming the flag otherwise."""
    return None if text is None else _parsed(parse_gbps, text, flag)


def parse_env(text: str | None, option: str = "--env") -> dict[str, str]:
    """'NCCL_ALGO=ring NCCL_PROTO=simple' -> dict; ConfigError naming `option` on a token without '='."""
    env: dict[str, str] = {}
    for token in (text or "").split():
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ConfigError(f"{option}: expected NAME=VALUE, got {token!r}")
        env[key] = value
    return env


def reflowed(help_text: str) -> str:
    """A command's help with each prose paragraph on one line, so the terminal wraps it to its width
    (the help texts are wrapped in the source; Typer keeps their line breaks). Paragraphs whose lines
    are indented (examples, commands) keep their lines."""
    paragraphs = help_text.strip("\n").split("\n\n")
    return "\n\n".join(
        paragraph if any(line.startswith(" ") for line in paragraph.splitlines())
        else " ".join(line.strip() for line in paragraph.splitlines())
        for paragraph in paragraphs)


# a mixture of experts' routing (workloads.spec.RoutingSpec), shared by `predict` and `plan`
MoeImbalanceOpt = Annotated[float | None, typer.Option(
    help="Routed tokens on the busiest expert-parallel rank over the mean rank's (>= 1; 1: balanced); with "
    "expert parallelism the step runs at the busiest rank's pace.")]
CapacityFactorOpt = Annotated[float | None, typer.Option(
    help="Expert capacity in units of its balanced share; tokens beyond it are dropped (default: dropless).")]
