"""Argument checks shared by every layer: one wording for integers, probabilities, choices and
output directories."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "check_choice",
    "check_finite_numbers",
    "check_integer",
    "check_known_options",
    "check_positive",
    "check_probability",
    "check_writable_directory",
]


def check_integer(
    name: str, value: Any, *, minimum: int = 1, optional: bool = False, hint: str = ""
) -> Any:
    """Return ``value`` if it is an integer (not a bool) ``>= minimum`` (or None if ``optional``).

    Raises:
        ValueError: ``"<name> must be a positive integer[<hint>][ or None]; got <value>"``
            (``"an integer >= <minimum>"`` for other minimums).
    """
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        none = " or None" if optional else ""
        raise ValueError(f"{name} must be {what}{hint}{none}; got {value!r}")
    return value


def check_positive(name: str, value: Any) -> float:
    """Return ``value`` as a float if it is a finite number ``> 0``, else ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        math.isfinite(value) and value > 0
    ):
        raise ValueError(f"{name} must be a positive finite number; got {value!r}")
    return float(value)


def check_finite_numbers(name: str, value: Any) -> Any:
    """Return ``value`` if no float in it, at any depth of mappings, lists and tuples, is NaN or
    infinite (an option such as ``lr: .inf`` that would train to NaN).

    Raises:
        ValueError: ``"<name>[.key][[index]] must be a finite number; got <value>"``.
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number; got {value}")
    if isinstance(value, Mapping):
        for key, item in value.items():
            check_finite_numbers(f"{name}.{key}", item)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            check_finite_numbers(f"{name}[{index}]", item)
    return value


def check_probability(name: str, value: Any) -> float:
    """Return ``value`` if it is a number in ``[0, 1)`` (a dropout rate), else ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1); got {value!r}")
    return float(value)


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> Any:
    """Return ``value`` if it is one of ``choices``, else ValueError listing them."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}; got {value!r}")
    return value


def check_writable_directory(name: str, path: str | os.PathLike) -> Path:
    """Return ``path`` as a Path if files can be written under it, else ValueError; nothing is
    created.

    An existing ``path`` must be a directory this process may write in; a missing one must be
    creatable: its nearest existing ancestor is a directory this process may write in.
    Permissions are asked of the system (``os.access``), so a read-only file system fails and
    root passes wherever it may write.

    Raises:
        ValueError: ``"<name> <path> ..."`` saying why: it or an ancestor is a file (not a
            directory), no write permission, or the path cannot be inspected.
    """
    path = Path(path)
    try:
        existing = path
        while not os.path.lexists(existing) and existing != existing.parent:
            existing = existing.parent
        is_dir = existing.is_dir()
    except OSError as err:  # e.g. an ancestor without search permission
        raise ValueError(f"{name} {path} cannot be used: {err.strerror} ({err.filename})") from None
    if existing == path and not is_dir:
        raise ValueError(f"{name} {path} exists and is not a directory; choose a directory")
    if not is_dir:
        raise ValueError(f"{name} {path} cannot be created: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{name} {path} is not writable: no permission to write in {existing}")
    return path


def check_known_options(options: Iterable[str], valid: Sequence[str], owner: str) -> None:
    """Raise ValueError naming every option of ``options`` not in ``valid``, and the valid ones;
    ``owner`` says whose options they are (``attention 'gfsa'``, ``method 'neutreno'``)."""
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(map(repr, unknown))} for {owner}; "
                         f"valid options: {', '.join(valid) or 'none'}")
