"""Attention methods by name: one option selects a method anywhere in the package."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..checks import check_known_options
from .base import AttentionBase

__all__ = [
    "ATTENTION_REGISTRY",
    "attention_names",
    "attention_options",
    "build_attention",
    "get_attention_class",
    "register_attention",
]

ATTENTION_REGISTRY: dict[str, type[AttentionBase]] = {}


def register_attention(name: str) -> Callable[[type[AttentionBase]], type[AttentionBase]]:
    """Class decorator registering an :class:`AttentionBase` subclass under ``name``."""

    def decorator(cls: type[AttentionBase]) -> type[AttentionBase]:
        if not issubclass(cls, AttentionBase):
            raise TypeError(f"{cls.__name__} must subclass AttentionBase")
        if name in ATTENTION_REGISTRY and ATTENTION_REGISTRY[name] is not cls:
            raise ValueError(f"attention {name!r} is already registered")
        cls.method = name
        ATTENTION_REGISTRY[name] = cls
        return cls

    return decorator


def attention_names() -> tuple[str, ...]:
    """The registered method names, sorted."""
    return tuple(sorted(ATTENTION_REGISTRY))


def get_attention_class(name: str) -> type[AttentionBase]:
    """The class registered under ``name``; ValueError listing the valid names otherwise."""
    try:
        return ATTENTION_REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown attention {name!r}; valid choices: {', '.join(attention_names())}"
        ) from None


def build_attention(name: str, dim: int, num_heads: int, **options: Any) -> AttentionBase:
    """Build the attention method ``name``; unknown options raise ValueError naming them."""
    cls = get_attention_class(name)
    check_known_options(options, attention_options(cls), f"attention {name!r}")
    return cls(dim, num_heads, **options)


def attention_options(cls: type[AttentionBase]) -> tuple[str, ...]:
    """Keyword options a method's constructor takes besides ``dim`` and ``num_heads``.

    The class's own declaration (:attr:`AttentionBase.options`): the method's options first,
    then the base's.
    """
    return cls.options
