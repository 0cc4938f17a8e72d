"""Plain data to and from JSON: no NaN or infinity out, no unknown fields in."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["finite_json", "first_non_finite", "plain_data", "read_json_object",
           "reject_unknown_fields"]


def finite_json(value: Any) -> Any:
    """``value`` with every non-finite float, at any depth of dicts and lists, made None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def first_non_finite(value: Any, path: str = "") -> tuple[str, float] | None:
    """The first non-finite float in ``value``, at any depth of dicts and lists, with its path
    (``summary[1].difference.test_accuracy.mean``; ``path`` prefixes it); None when every float
    is finite. Reading JSON accepts ``NaN`` and ``Infinity``, which :func:`finite_json` never
    writes: a file holding one was not written by this library."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, value)
    if isinstance(value, dict):
        items = ((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for where, item in items:
        found = first_non_finite(item, where)
        if found is not None:
            return found
    return None


def reject_unknown_fields(cls: type, data: dict[str, Any]) -> None:
    """ValueError naming the keys of ``data`` that are not fields of dataclass ``cls``, and the
    valid ones."""
    valid = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(valid))
    if unknown:
        raise ValueError(f"unknown {cls.__name__} field(s) {unknown}; valid: {valid}")


def plain_data(value: Any) -> Any:
    """Mappings as dicts and tuples as lists, recursively: JSON's and YAML's spelling."""
    if isinstance(value, Mapping):
        return {k: plain_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_data(v) for v in value]
    return value


def read_json_object(path: Path, fields: Sequence[str]) -> dict[str, Any]:
    """The JSON object in the file ``path``, which should hold ``fields`` (named in the error).

    Raises:
        ValueError: naming ``path``, for text that is no JSON or JSON that is no object.
    """
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object with the fields {list(fields)}")
    return data
