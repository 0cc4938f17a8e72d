"""Hugging Face ``transformers`` models: what one is, where its layers and self-attention modules
are, and how its attention implementation is switched and restored.

Nothing here imports ``transformers``: a model can only be one once ``transformers`` is imported.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from torch import nn

__all__ = [
    "attention_implementation",
    "attention_modules",
    "enclosing_layer",
    "hidden_layers",
    "is_huggingface_model",
    "restore_attention_implementations",
    "switch_attention_implementation",
    "using_attention_implementation",
]

#: What :func:`switch_attention_implementation` saves: each (sub-)model and its implementation.
SavedImplementations = list[tuple[nn.Module, Any]]


def is_huggingface_model(model: nn.Module) -> bool:
    """Whether ``model`` is a ``transformers.PreTrainedModel`` (without importing transformers)."""
    transformers = sys.modules.get("transformers")
    return transformers is not None and isinstance(model, transformers.PreTrainedModel)


@functools.cache
def _routes_through_interface(cls: type) -> bool:
    """Whether ``cls.forward`` dispatches to ``transformers``' attention-function interface."""
    try:
        source = inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return False
    return "ALL_ATTENTION_FUNCTIONS" in source


def attention_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The self-attention modules of ``model`` that use the ``AttentionInterface``, in depth order,
    with their qualified names; cross-attention modules are left out."""
    found = []
    for name, module in model.named_modules():
        if not _routes_through_interface(type(module)):
            continue
        cross = getattr(module, "is_cross_attention", False) or "cross" in name.lower()
        if not cross and "Cross" not in type(module).__name__:
            found.append((name, module))
    return found


def enclosing_layer(model: nn.Module, name: str) -> nn.Module:
    """The layer holding the module called ``name``: the element of the nearest ``ModuleList``
    above it (``encoder.layer.3`` for BERT's ``encoder.layer.3.attention.self``).

    Raises:
        ValueError: when no ``ModuleList`` holds the module.
    """
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if isinstance(model.get_submodule(".".join(parts[: end - 1])), nn.ModuleList):
            return model.get_submodule(".".join(parts[:end]))
    raise ValueError(f"the attention module {name!r} is not inside a list of layers")


def hidden_layers(model: nn.Module) -> list[nn.Module]:
    """The model's stack of ``config.num_hidden_layers`` layers: its first ``ModuleList`` of exactly
    that many modules (``encoder.layer`` in BERT, ``h`` in GPT-2); empty when none (ALBERT, whose
    layers share one module)."""
    num_layers = getattr(getattr(model, "config", None), "num_hidden_layers", None)
    if not num_layers:
        return []
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) == num_layers:
            return list(module)
    return []


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
