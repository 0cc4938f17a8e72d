"""The files of runs and comparisons, written whole or not at all, and read back with the file
named when one is damaged.

Every ``summary.json``, ``diagnostics.json``, ``cost.json``, ``config.yaml``, ``results.json``,
``results.csv`` and ``report.html`` goes through :func:`write_text` (or :func:`write_json`): the
text is written to a temporary file in the same directory, flushed to disk and renamed over the
target, so a process killed while writing leaves the previous file (or none), never half of one.
Files damaged in another way (a copy cut short, an older version that wrote in place) are
refused on reading by :func:`read_json`, naming the file and how to recover.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..data.cache import atomic_write

__all__ = ["CorruptRunFileError", "read_json", "write_json", "write_text"]


class CorruptRunFileError(ValueError):
    """A run file that cannot be read; the message names it and how to recover.

    Attributes:
        path: the file.
    """

    def __init__(self, path: Path, problem: str, recovery: str) -> None:
        self.path = path
        super().__init__(f"{path} is corrupt ({problem}); {recovery}")


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically and durably; returns the path."""
    path = Path(path)

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())

    atomic_write(path, write)
    return path


def write_json(path: str | os.PathLike, value: Any) -> Path:
    """Write ``value`` as indented JSON atomically (:func:`write_text`); returns the path.

    Raises:
        ValueError: naming ``path`` when ``value`` holds NaN or an infinity (JSON has none:
            pass it through :func:`~filterformer.jsonsafe.finite_json` where such a value
            means "not measured").
    """
    try:
        text = json.dumps(value, indent=1, allow_nan=False)
    except ValueError as err:
        raise ValueError(f"{path} was not written: {err} (NaN or infinity)") from None
    return write_text(path, text)


def read_json(path: str | os.PathLike, *, recovery: str, kind: type = dict) -> Any:
    """The JSON content of ``path``, which must be a ``kind`` (a dict unless told).

    Args:
        path: the file.
        recovery: what the reader can do about a damaged file, e.g. "delete it to recompute
            it"; it ends the error's message.
        kind: the type the whole content must have.

    Raises:
        CorruptRunFileError: naming ``path`` when it cannot be read, is no valid UTF-8 JSON, or
            holds another type than ``kind``.
    """
    path = Path(path)
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CorruptRunFileError(path, f"{type(err).__name__}: {err}", recovery) from None
    if not isinstance(value, kind):
        raise CorruptRunFileError(
            path, f"it holds a {type(value).__name__}, not a {kind.__name__}", recovery
        )
    return value
