"""The one exception family of clustersim.

Every error a user can cause (bad YAML, unknown preset, malformed log, impossible layout) is a
`ClusterSimError`; the CLI turns it into one line on stderr and exit code 2. Anything else that
escapes is a bug (exit code 1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pydantic costs a tenth of a second to import; `clustersim --help` does not need it
    from pydantic import ValidationError


class ClusterSimError(Exception):
    """Base of every error caused by input: the message says what was wrong and where."""


class ConfigError(ClusterSimError):
    """A spec, preset or scenario field is invalid (the message names the field path)."""


class TopologyError(ClusterSimError):
    """A topology cannot be built or routed (unknown preset, partition, missing device)."""


class LogParseError(ClusterSimError):
    """An nccl-tests log cannot be read; carries the file and the 1-based line number."""

    def __init__(self, source: str, line_no: int, message: str) -> None:
        self.source = source
        self.line_no = line_no
        super().__init__(f"{source}:{line_no}: {message}")


def config_error_from(exc: ValidationError, source: str) -> ConfigError:
    """One line from a pydantic ValidationError: the source, the first field's path and message."""
    errors = exc.errors()
    if errors and not errors[0]["loc"] and errors[0]["input"] is None:
        return ConfigError(f"{source}: empty (expected a mapping of fields)")
    if errors and not errors[0]["loc"] and not isinstance(errors[0]["input"], dict):  # a list or a bare value
        return ConfigError(f"{source}: expected a mapping of fields, got {type(errors[0]['input']).__name__}")
    # a field that takes a name or a mapping (a preset or an inline spec): when a mapping was given, the
    # mapping's own error is the one to show, not "should be a valid string"
    first = next((e for e in errors if e["type"] != "string_type"), errors[0])
    # pydantic names the union member it tried ("str", "TopologySpec"); our field names are lower case
    where = ".".join(str(part) for part in first["loc"] if not _union_member(part))
    message = str(first["msg"]).removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    # a check across fields (a model validator) has no location: its message names the fields
    return ConfigError(f"{source}: {where + ': ' if where else ''}{message}{more}")


def _union_member(part: object) -> bool:
    """A location part that names a union member pydantic tried ('str', 'TopologySpec',
    'function-after[_check(), TopologySpec]'), not a field: our field names are lower-case words."""
    return isinstance(part, str) and (part == "str" or part[:1].isupper() or "[" in part)


class CalibrationError(ClusterSimError):
    """A calibration profile is unusable (wrong schema version, other hardware, failed fit)."""
