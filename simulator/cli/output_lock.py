"""One writer per output file: a lock file beside it (`results.csv.lock`) naming the writer.

The lock is an exclusive advisory lock (flock) on the lock file, held as long as the writer runs; the
file's text names the holder (pid, host, start time) for whoever is refused. A writer that dies,
even killed outright, releases the lock with it: its lock file is stale and the next writer takes it
over. Where the file system has no advisory locks, the holder's pid decides: a live process on this
host holds it, any other is stale.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from types import TracebackType

from simulator.core.errors import ConfigError

TAKE_ATTEMPTS = 5  # a lock file replaced while being taken (its holder finishing) is tried again
NAME_WAIT_S, NAME_POLL_S = 1.0, 0.02  # a holder that has the lock but has not yet written its name is waited for
NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)  # flock not supported here


def lock_path(output: Path) -> Path:
    """The lock file of `output`: beside it, its name + `.lock`."""
    return output.with_name(output.name + ".lock")


def _holder_text(text: str) -> str:
    try:
        holder = json.loads(text)
        return f"pid {int(holder['pid'])} on {holder['host']}, since {holder['started']}"
    except (ValueError, KeyError, TypeError):
        return "a writer that left no name"


def _holder_name(fd: int) -> str:
    """The lock file's text, waiting up to NAME_WAIT_S for a holder that took the lock an instant ago to write
    its name (it locks first, then writes)."""
    deadline = time.monotonic() + NAME_WAIT_S
    while not (text := os.pread(fd, 4096, 0).decode(errors="replace")).endswith("\n") \
            and time.monotonic() < deadline:
        time.sleep(NAME_POLL_S)
    return text


def _alive_here(text: str) -> bool:
    """Whether the lock text names a live process of this host (other than this one)."""
    try:
        holder = json.loads(text)
        pid, host = int(holder["pid"]), str(holder["host"])
    except (ValueError, KeyError, TypeError):
        return False
    if host != socket.gethostname() or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        pass
    return True


class OutputLock:
    """The lock of one output file, taken on entering (ConfigError naming the holder when another writer
    has it) and removed on leaving; `writer` names what writes it, for the refusal ("sweep")."""

    def __init__(self, output: Path, writer: str) -> None:
        self.output, self.writer, self.path = output, writer, lock_path(output)
        self.fd: int | None = None

    def _refuse(self, text: str) -> ConfigError:
        return ConfigError(f"{self.output} is being written by another {self.writer} ({_holder_text(text)}; lock "
                           f"{self.path}): wait for it to finish, stop it, or write to another file")

    def _take(self) -> int | None:
        """The locked file descriptor, or None when the lock file was replaced meanwhile (try again)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigError(f"cannot write {self.output}: its lock {self.path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            text = _holder_name(fd)
            if exc.errno not in NO_LOCKS or _alive_here(text):
                os.close(fd)
                raise self._refuse(text) from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(self.path))
        except FileNotFoundError:
            same = False
        if not same:  # the holder removed it between our open and our lock: a new one may exist
            os.close(fd)
            return None
        return fd

    def __enter__(self) -> OutputLock:
        for _ in range(TAKE_ATTEMPTS):
            fd = self._take()
            if fd is not None:
                break
        else:
            raise ConfigError(f"cannot write {self.output}: its lock {self.path} keeps changing hands")
        started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        text = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": started}) + "\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, text.encode(), 0)
        self.fd = fd
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()  # before unlocking: whoever opened it meanwhile sees it replaced and tries again
        os.close(self.fd)
        self.fd = None
