"""Hugging Face ``transformers`` models: what one is, and where its layers and self-attention
modules are.

Nothing here imports ``transformers``: a model can only be one once ``transformers`` is imported.
"""

from __future__ import annotations

import functools
import inspect
import sys

from torch import nn

__all__ = ["attention_modules", "enclosing_layer", "hidden_layers", "is_huggingface_model"]


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
