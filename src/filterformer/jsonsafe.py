"""Plain data that any JSON reader accepts: JSON has no NaN or infinity."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["finite_json"]


def finite_json(value: Any) -> Any:
    """``value`` with every non-finite float, at any depth of dicts and lists, made None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value
