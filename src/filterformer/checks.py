"""Argument checks shared by every layer: one wording for integers, probabilities and choices."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["check_choice", "check_integer", "check_positive", "check_probability"]


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
