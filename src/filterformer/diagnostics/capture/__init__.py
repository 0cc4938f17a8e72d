"""Capturing hidden states, attention maps and LayerNorm statistics from real models.

:func:`capture` picks the route by the model's kind: filterformer models return everything on
request, Hugging Face models through ``output_hidden_states``/``output_attentions``, timm ViTs
through ``forward_intermediates``, and any other module through hooks on named layers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from torch import nn

from ...families import FAMILIES, family_of
from .batch import batch_mask, to_device
from .captured import CapturedForward
from .hooks import call_model, capture_with_hooks, resolve_layers
from .huggingface import capture_huggingface
from .native import backbone, capture_native
from .norms import layer_norms, record_norm_stds
from .timm import capture_timm

__all__ = [
    "MODEL_KINDS",
    "CapturedForward",
    "backbone",
    "batch_mask",
    "call_model",
    "capture",
    "capture_huggingface",
    "capture_native",
    "capture_timm",
    "capture_with_hooks",
    "layer_norms",
    "model_kind",
    "record_norm_stds",
    "resolve_layers",
    "to_device",
]

#: The kinds of model :func:`capture` handles: filterformer's, each family's, any by hooks.
MODEL_KINDS = ("filterformer", *(family.name for family in FAMILIES), "hooks")


def model_kind(model: nn.Module, layers: Sequence[str] | None = None) -> str:
    """Which of :data:`MODEL_KINDS` ``model`` is captured as (``hooks`` when ``layers`` are named).

    Raises:
        ValueError: for a module of no known kind without ``layers``.
    """
    if layers is not None:
        return "hooks"
    if backbone(model) is not None:
        return "filterformer"
    family = family_of(model)
    if family is not None:
        return family.name
    raise ValueError(
        f"cannot capture from a {type(model).__name__}: supported are filterformer models, "
        "Hugging Face PreTrainedModel and timm ViTs; for any other module pass layers=[names "
        "of its layers]"
    )


def capture(
    model: nn.Module,
    batch: Any,
    *,
    attentions: bool = False,
    norms: bool = True,
    layers: Sequence[str] | None = None,
    forward: Callable[[nn.Module, Any], Any] = call_model,
) -> CapturedForward:
    """One forward pass of ``model`` on ``batch``, with its intermediates.

    Args:
        model: a filterformer model, a Hugging Face model, a timm ViT, or any module with
            ``layers`` named.
        batch: the model's input (see each route for the accepted forms).
        attentions: also capture attention maps (not available through hooks).
        norms: capture the LayerNorms' smallest per-token input std (``σ1``, ``σ2``).
        layers: names of the layers to hook; forces the hook route.
        forward: how the hook route calls the model.

    Returns:
        :class:`CapturedForward`.

    Raises:
        ValueError: for an unsupported model, or ``attentions`` on the hook route.
    """
    kind = model_kind(model, layers)
    if kind == "hooks":
        if attentions:
            raise ValueError("attentions=True needs a filterformer, Hugging Face or timm model; "
                             "hooks on named layers capture hidden states only")
        return capture_with_hooks(model, batch, layers, forward=forward, norms=norms)
    if kind == "filterformer":
        return capture_native(model, batch, attentions=attentions, norms=norms)
    return family_of(model).capture(model, batch, attentions=attentions, norms=norms)
