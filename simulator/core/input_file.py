"""Reading a user's input file, and the limits every input is held to.

Every command reads its files (scenario, sweep, model, HF config.json, topology, manifest and the logs it
names, training cases, calibration profile) through `read_input_text`, so a device (/dev/zero), a FIFO or
a directory is refused at once instead of read until memory runs out or waited on for ever, and no file
larger than MAX_INPUT_BYTES is read. The limits on what a YAML or JSON document may hold (nesting, values
with aliases expanded, numbers) live here too, so the YAML and JSON loaders enforce the same ones.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from simulator.core.errors import ConfigError

MAX_INPUT_BYTES = 64 * 2**20  # the largest measured nccl-tests log in shared/data is under 1 MiB
MAX_DEPTH = 100  # levels of nesting in a YAML or JSON document; a scenario written inline uses under 10
MAX_VALUES = 100_000  # values (scalars, lists, mappings) in one YAML document, each alias's counted each time
MAX_INT = 2**63 - 1  # integers beyond a 64-bit count are no count a cluster or a model has


def read_input_text(path: Path, what: str) -> str:
    """The text of the regular file `path` (UTF-8, newlines as Python's text mode reads them: \\r\\n and \\r
    become \\n); ConfigError naming `what` and the path when it is missing, not a regular file (a
    directory, device, FIFO or socket: the file is opened without blocking and checked before a byte is
    read), larger than MAX_INPUT_BYTES, unreadable or not UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once instead of waiting for a writer
    except FileNotFoundError:
        raise ConfigError(f"cannot read {what} {path}: not found") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise ConfigError(f"cannot read {what} {path}: it is a directory, not a file")
        raise ConfigError(f"cannot read {what} {path}: not a regular file (a device, FIFO or socket)")
    with os.fdopen(fd, "rb") as stream:
        try:
            data = stream.read(MAX_INPUT_BYTES + 1)  # st_size can be 0 for a file that has content (/proc)
        except OSError as exc:
            raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise ConfigError(f"cannot read {what} {path}: larger than the {MAX_INPUT_BYTES // 2**20} MiB input limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read {what} {path}: not UTF-8 text (byte {exc.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")
