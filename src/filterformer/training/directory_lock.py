"""One process at a time in a run or comparison directory.

Two ``train`` or ``compare`` commands on one output directory would train the same runs side
by side, appending to the same metrics and overwriting each other's checkpoints. The first takes
an exclusive ``flock`` on ``<directory>/.filterformer.lock`` and writes its process id and
command line into it; a second is refused, naming that process. The system releases the lock
when its process ends, however it ends (``kill -9`` included), so a lock file left by a dead
process never blocks: the next command takes it and writes its own id. Where ``fcntl`` does not
exist (Windows) directories are not locked.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..checks import check_writable_directory

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILE", "DirectoryInUseError", "directory_lock"]

#: The lock file inside a locked directory.
LOCK_FILE = ".filterformer.lock"


class DirectoryInUseError(ValueError):
    """Another process holds the directory's lock; the message names it.

    Attributes:
        directory: the locked directory.
        holder: what the lock file says of the process holding it (``pid …, started …:
            command``), or None when it could not be read.
    """

    def __init__(self, name: str, directory: Path, holder: str | None) -> None:
        self.directory = directory
        self.holder = holder
        who = f"process {holder}" if holder else "another process"
        super().__init__(
            f"{name} {directory} is in use by {who} (lock {directory / LOCK_FILE}); wait for "
            f"it to end, or choose another {name}"
        )


@contextmanager
def directory_lock(
    directory: str | os.PathLike, *, name: str = "output_dir", command: str | None = None
) -> Iterator[Path]:
    """Hold ``directory`` (created if missing) for this process while the block runs.

    Args:
        directory: the run or comparison directory.
        name: what the directory is called in a refusal (the option that set it).
        command: the command line recorded for a refused process to read (this process's
            own when None).

    Yields:
        The lock file.

    Raises:
        ValueError: when ``directory`` is no directory files can be written under
            (:func:`~filterformer.checks.check_writable_directory`).
        DirectoryInUseError: at once, without waiting, when another process holds the lock.
    """
    directory = check_writable_directory(name, directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    if fcntl is None:  # pragma: no cover - Windows
        yield path
        return
    # Opened without truncating: the holder's record stays readable until the lock is ours.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DirectoryInUseError(name, directory, _holder(fd)) from None
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        if command is None:  # the command line as typed (``python -m …`` included)
            command = shlex.join(getattr(sys, "orig_argv", sys.argv))
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}, started {started}: {command}\n".encode(), 0)
        yield path
    finally:
        # Closing releases the lock; the file stays, for the next holder to overwrite.
        os.close(fd)


def _holder(fd: int) -> str | None:
    text = os.pread(fd, 4096, 0).decode(errors="replace").strip()
    return text or None
