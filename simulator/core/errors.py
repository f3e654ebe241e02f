"""The one exception family of clustersim.

Every error a user can cause (bad YAML, unknown preset, malformed log, impossible layout) is a
`ClusterSimError`; the CLI turns it into one line on stderr and exit code 2. Anything else that
escapes is a bug (exit code 1).
"""

from __future__ import annotations


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


class CalibrationError(ClusterSimError):
    """A calibration profile is unusable (wrong schema version, other hardware, failed fit)."""
