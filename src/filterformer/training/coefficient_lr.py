"""``optimizer.coefficient_lr``: the learning rate of the parameters a method adds.

Spelled as a learning rate (``0.01``), as a multiple of ``optimizer.lr`` (``"10x"``), or null for
``optimizer.lr`` itself. A multiple follows ``optimizer.lr`` wherever it is changed (``--set
optimizer.lr=…``, a comparison's budget), which a fixed rate does not.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

__all__ = ["KEY", "normalize_coefficient_lr", "resolve_coefficient_lr"]

#: The key, named in every error.
KEY = "optimizer.coefficient_lr"
_SPELLINGS = ("a learning rate >= 0 (e.g. 0.01), a multiple of optimizer.lr written like '10x', "
              "or null (optimizer.lr itself)")


def _refuse(value: Any) -> ValueError:
    return ValueError(f"{KEY} must be {_SPELLINGS}; got {value!r}")


def _yaml_number(text: str) -> float | None:
    """YAML's own spellings of numbers (``.nan``, ``-.inf``), which ``float`` does not read."""
    try:
        number = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return float(number) if type(number) in (int, float) else None


def _number(text: str, value: Any) -> float:
    try:
        number = float(text)
    except ValueError:
        number = _yaml_number(text)
        if number is None:
            raise _refuse(value) from None
    if not math.isfinite(number):
        # As every other number of a config says it.
        raise ValueError(f"{KEY} must be a finite number; got {value!r}")
    if number < 0:
        raise _refuse(value)
    return number


def _plain(number: float) -> str:
    """``10.0`` as ``10``, ``2.5`` as ``2.5``: the shortest text that reads back the same."""
    text = repr(number)
    return text[:-2] if text.endswith(".0") else text


def normalize_coefficient_lr(value: float | str | None) -> float | str | None:
    """One spelling per setting: a number (numeric text read as one) or ``"<multiple>x"``.

    Raises:
        ValueError: naming ``optimizer.coefficient_lr`` and its spellings, for anything else, a
            negative value, NaN or an infinity.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise _refuse(value)
    if isinstance(value, (int, float)):
        return _number(str(float(value)), value)
    if not isinstance(value, str):
        raise _refuse(value)
    text = value.strip().lower()
    if text.endswith("x"):
        return f"{_plain(_number(text[:-1], value))}x"
    return _number(text, value)


def resolve_coefficient_lr(value: float | str | None, lr: float) -> float | None:
    """The learning rate a normalised ``value`` means beside ``optimizer.lr = lr`` (None: the
    methods' parameters stay in the shared groups at ``lr``)."""
    if value is None or isinstance(value, float):
        return value
    return _number(value[:-1], value) * lr
