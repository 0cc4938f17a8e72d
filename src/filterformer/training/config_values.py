"""Typed values for configuration dataclasses: from files, dicts and ``key=value`` text.

One code path checks every value against its field's type hint, so a config file, a Python dict
and a command-line override are validated the same way, and every error names the field. No
number anywhere in a config may be NaN or infinite, free-form mappings (``task_options``,
``model.attention_options``) included.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable
from typing import Any, Union

import yaml

from ..checks import check_finite_numbers

__all__ = [
    "check_fields",
    "check_value",
    "dataclass_from_dict",
    "describe_type",
    "field_hints",
    "parse_assignments",
    "parse_text",
]

_NULL_WORDS = ("null", "none", "~")


def field_hints(cls: type) -> dict[str, Any]:
    """The resolved type hint of every field of dataclass ``cls``."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def describe_type(hint: Any) -> str:
    """A readable name for a type hint, e.g. ``an integer or null``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(describe_type(a) for a in args)
    if hint is type(None):
        return "null"
    if origin is tuple:
        return "a list"
    if origin is dict or hint is dict:
        return "a mapping"
    names = {int: "an integer", float: "a finite number", bool: "true/false", str: "a string"}
    if hint in names:
        return names[hint]
    if dataclasses.is_dataclass(hint):
        return f"a mapping of {hint.__name__} fields"
    return "any value"


def check_value(value: Any, hint: Any, name: str) -> Any:
    """``value`` as the type ``hint`` asks for; ValueError naming ``name`` when it is not one.

    Integers are accepted where numbers are expected; lists become tuples; mappings become
    nested dataclasses. NaN and infinities are refused, in free-form mappings too
    (:func:`~filterformer.checks.check_finite_numbers`).
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    # First, whatever the hint: the error names the very key that holds the NaN.
    check_finite_numbers(name, value)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return check_value(value, option, name)
            except ValueError:
                continue
    elif dataclasses.is_dataclass(hint):
        if isinstance(value, hint):
            return value
        if isinstance(value, dict):
            return dataclass_from_dict(hint, value, prefix=f"{name}.")
    elif origin is tuple and isinstance(value, (list, tuple)):
        items = args[:1] * len(value) if len(args) == 2 and args[1] is Ellipsis else args
        if len(items) == len(value):
            return tuple(
                check_value(v, h, f"{name}[{i}]")
                for i, (v, h) in enumerate(zip(value, items, strict=True))
            )
    elif (origin is dict or hint is dict) and isinstance(value, dict):
        return dict(value)
    elif hint in (bool, int) and type(value) is hint:  # exact: True is no integer here
        return value
    elif hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an integer beyond any float
            raise ValueError(f"{name} must be a finite number; got {value}") from None
    elif hint is str and isinstance(value, str):
        return value
    raise ValueError(f"{name} must be {describe_type(hint)}; got {value!r}")


def parse_text(text: str, hint: Any = Any) -> Any:
    """A command-line value as a typed value: YAML scalars and lists (``[1, 3]``), ``1e-3``,
    ``inf`` and ``nan`` read as numbers (the last two for :func:`check_value` to refuse, naming
    the option), and plain text wherever the hint takes a string."""
    takes_string = hint is str or (
        typing.get_origin(hint) in (Union, types.UnionType) and str in typing.get_args(hint)
    )
    if takes_string and text.strip().lower() not in _NULL_WORDS:
        return text
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(value, str):
        # YAML 1.1 reads "1e-3" (no dot) and "inf" as text; a number is what anyone typing it
        # means.
        try:
            return float(value)
        except ValueError:
            return value
    return value


def parse_assignments(items: Iterable[str], what: str = "--task-option") -> dict[str, Any]:
    """``KEY=VALUE`` texts as a mapping, each value typed by :func:`parse_text` (a YAML scalar or
    list); a key given twice keeps its last value.

    Args:
        items: texts such as ``patch_size=4`` or ``sizes=[1, 2]``.
        what: the option the texts came from, named in errors.

    Raises:
        ValueError: naming ``what`` for a text without ``=`` or with an empty key.
    """
    values = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{what} must be KEY=VALUE; got {item!r}")
        values[key.strip()] = parse_text(text)
    return values


def dataclass_from_dict(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    """Build dataclass ``cls`` from plain data, checking every key; the values are checked once,
    by the class's ``__post_init__`` calling :func:`check_fields`.

    Raises:
        ValueError: for an unknown key (listing the valid ones) or a value of the wrong type.
    """
    if not isinstance(data, dict):
        raise ValueError(f"{prefix.rstrip('.') or cls.__name__} must be a mapping; got {data!r}")
    hints = field_hints(cls)
    unknown = sorted(set(data) - set(hints))
    if unknown:
        names = ", ".join(f"{prefix}{k}" for k in unknown)
        raise ValueError(f"unknown config key(s) {names}; valid keys: {', '.join(hints)}")
    return cls(**data)  # the class's __post_init__ checks every value (check_fields)


def check_fields(instance: Any, prefix: str = "") -> None:
    """Check (and normalise, see :func:`check_value`) every field of a dataclass instance in
    place; call it first thing in ``__post_init__``."""
    for name, hint in field_hints(type(instance)).items():
        setattr(instance, name, check_value(getattr(instance, name), hint, f"{prefix}{name}"))
