"""Capture from Hugging Face ``transformers`` models through their own outputs.

``output_hidden_states=True`` gives the embedding output and every layer's output. Attention
maps need the eager implementation: fused kernels (``sdpa``, flash, flex) return none, so those
are switched to ``eager`` for the pass and restored after. A model patched with its own
registered attention function keeps it, and whatever weights it returns are used.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from torch import nn

from ...families import HUGGING_FACE, attention_implementation, using_attention_implementation
from .batch import batch_mask, model_device, to_device, without_labels
from .captured import CapturedForward
from .norms import record_norm_stds, smallest_norm_stds

__all__ = ["FUSED_IMPLEMENTATIONS", "capture_huggingface"]

#: Attention implementations that return no attention weights.
FUSED_IMPLEMENTATIONS = ("sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")


def eager_attention(model: nn.Module) -> AbstractContextManager[None]:
    """Switch a fused attention implementation to ``eager`` for the duration."""
    if attention_implementation(getattr(model, "config", None)) not in FUSED_IMPLEMENTATIONS:
        return nullcontext()
    return using_attention_implementation(model, "eager")


def capture_huggingface(
    model: nn.Module, batch: Mapping[str, Any], *, attentions: bool = False,
    norms: bool = True,
) -> CapturedForward:
    """Run a Hugging Face model and collect its intermediates.

    Args:
        model: a ``transformers.PreTrainedModel`` (a base model or one with a task head).
        batch: the model's keyword inputs (``input_ids``, ``attention_mask``, ``pixel_values``,
            …); ``labels`` is dropped. ``attention_mask`` (1 at real tokens) is the padding mask.
        attentions: also return the attention maps (switches fused attention to eager).
        norms: record each layer's LayerNorm ``σ1``, ``σ2``.

    Returns:
        :class:`CapturedForward` (``filters`` are the attention maps).
    """
    if not isinstance(batch, Mapping):
        raise ValueError(
            f"batch for a Hugging Face model must be a dict of its inputs; got {type(batch)}"
        )
    batch = to_device(without_labels(batch), model_device(model))
    layers = HUGGING_FACE.layers(model) if norms else []
    switch = eager_attention(model) if attentions else nullcontext()
    with switch, record_norm_stds(layers) as stds:
        out = model(**batch, output_hidden_states=True, output_attentions=attentions,
                    return_dict=True)
    hidden = tuple(out.hidden_states)
    batch_size, length = hidden[0].shape[:2]
    mask = batch_mask(batch, batch_size, length, hidden[0].device)
    maps = tuple(out.attentions) if attentions and out.attentions else None
    return CapturedForward(
        hidden_states=hidden,
        mask=mask,
        attentions=maps,
        filters=maps,
        norm_stds=smallest_norm_stds(stds, mask),
    )

