"""Plain data to and from JSON: no NaN or infinity out, no unknown fields in."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

__all__ = ["finite_json", "reject_unknown_fields"]


def finite_json(value: Any) -> Any:
    """``value`` with every non-finite float, at any depth of dicts and lists, made None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def reject_unknown_fields(cls: type, data: dict[str, Any]) -> None:
    """ValueError naming the keys of ``data`` that are not fields of dataclass ``cls``, and the
    valid ones."""
    valid = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(valid))
    if unknown:
        raise ValueError(f"unknown {cls.__name__} field(s) {unknown}; valid: {valid}")
