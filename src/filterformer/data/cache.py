"""Where generated data and downloaded sources live, and atomic writes into it
(:mod:`filterformer.atomic_files`).

The cache root is, in order: an explicit ``cache_dir``, the ``FILTERFORMER_CACHE`` environment
variable, ``~/.cache/filterformer``. Generated datasets go to ``<root>/<generator>/``; source files
fetched by ``scripts/setup.sh`` (wheels, sdists, unpacked Debian packages) to ``<root>/sources/``.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..atomic_files import atomic_write, atomic_write_leftovers

__all__ = [
    "CACHE_ENV_VAR",
    "atomic_write",
    "atomic_write_leftovers",
    "cache_key",
    "cache_root",
    "cached_arrays",
    "sources_dir",
]

CACHE_ENV_VAR = "FILTERFORMER_CACHE"


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache root: ``cache_dir``, else ``$FILTERFORMER_CACHE``, else ~/.cache/filterformer."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE_ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "filterformer"


def sources_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """Where ``scripts/setup.sh`` puts the source files the loaders read (``<root>/sources``)."""
    return cache_root(cache_dir) / "sources"


def cache_key(**params: object) -> str:
    """A short stable name for a set of generator parameters (JSON, sorted keys, SHA-1)."""
    text = json.dumps(params, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def cached_arrays(
    path: Path, create: Callable[[], dict[str, np.ndarray]]
) -> dict[str, np.ndarray]:
    """Load the arrays stored at ``path`` (``.npz``), creating and storing them on first use.

    A stored file that cannot be read back (truncated by a full disk, damaged) is only a cache:
    it is created again and replaced, with a warning naming it.
    """
    if path.is_file():
        try:
            with np.load(path, allow_pickle=False) as stored:
                return {name: stored[name] for name in stored.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
            warnings.warn(f"the cached data {path} is damaged ({type(err).__name__}: {err}); "
                          "creating it again", stacklevel=2)
    arrays = create()

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:  # a file object keeps numpy from appending ".npz"
            np.savez(f, **arrays)

    atomic_write(path, write)
    return arrays
