"""Files written whole or not at all: :func:`atomic_write` writes beside the target and renames.

Shared by every layer that writes files (datasets, checkpoints, run files, saved models).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["atomic_write", "atomic_write_leftovers"]

#: The temporary file of :func:`atomic_write` is ``.<name>.<random>.tmp`` beside its target.
_TMP_SUFFIX = ".tmp"


def atomic_write_leftovers(path: Path) -> list[Path]:
    """The temporary files that interrupted :func:`atomic_write` calls for ``path`` left behind.

    A process killed while writing (SIGKILL, power loss) never reaches the clean-up, so its
    ``.<name>.<random>.tmp`` stays beside ``path``. Only names of that exact form in
    ``path``'s directory are returned, sorted; a missing directory has none. Remove them only
    when no other process may be writing ``path``.
    """
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[A-Za-z0-9_]+{re.escape(_TMP_SUFFIX)}")
    if not path.parent.is_dir():
        return []
    return sorted(p for p in path.parent.iterdir()
                  if pattern.fullmatch(p.name) and p.is_file() and not p.is_symlink())


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Write a file so that readers never see it half-written.

    ``write`` receives a temporary path in the same directory; it is renamed over ``path`` with
    ``os.replace`` only once ``write`` returns, so concurrent writers race harmlessly. A write
    that raises removes its temporary file; one killed outright leaves it, for
    :func:`atomic_write_leftovers` to find.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=_TMP_SUFFIX)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        # mkstemp makes the file private; give it the permissions a plain open() would have
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
