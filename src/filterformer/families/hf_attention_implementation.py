"""A Hugging Face model's attention implementation (``"sdpa"``, ``"eager"``, …): read, switched
for the patch or for a pass that needs attention maps, and restored.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from torch import nn

__all__ = [
    "attention_implementation",
    "restore_attention_implementations",
    "switch_attention_implementation",
    "using_attention_implementation",
]

#: What :func:`switch_attention_implementation` saves: each (sub-)model and its implementation.
SavedImplementations = list[tuple[nn.Module, Any]]


def attention_implementation(config: Any) -> str | None:
    """The attention implementation a model's ``config`` selects (``"sdpa"``, ``"eager"``, …)."""
    return getattr(config, "_attn_implementation", None)


def _implementations(model: nn.Module) -> SavedImplementations:
    """The model and every sub-model with a config of its own, with their implementations."""
    return [
        (sub, attention_implementation(sub.config))
        for sub in model.modules()
        if hasattr(sub, "set_attn_implementation") and hasattr(sub, "config")
    ]


def restore_attention_implementations(saved: SavedImplementations) -> None:
    """Give every (sub-)model in ``saved`` its implementation back, where it changed."""
    for sub, implementation in saved:
        if attention_implementation(sub.config) != implementation:
            sub.set_attn_implementation(implementation)


def switch_attention_implementation(model: nn.Module, name: str) -> SavedImplementations:
    """Switch ``model`` (and its sub-models) to the attention implementation ``name``.

    Returns:
        What :func:`restore_attention_implementations` needs to undo the switch; a switch that
        raises is undone before the error propagates.
    """
    saved = _implementations(model)
    try:
        model.set_attn_implementation(name)
    except Exception:
        restore_attention_implementations(saved)
        raise
    return saved


@contextmanager
def using_attention_implementation(model: nn.Module, name: str) -> Iterator[None]:
    """Run the body with ``model`` switched to the attention implementation ``name``."""
    saved = switch_attention_implementation(model, name)
    try:
        yield
    finally:
        restore_attention_implementations(saved)
