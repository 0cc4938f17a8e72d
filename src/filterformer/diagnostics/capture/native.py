"""Capture from filterformer's own models: every intermediate is an output on request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor, nn

from ...models import Transformer
from .batch import batch_mask, model_device, to_device
from .captured import CapturedForward
from .norms import record_norm_stds, smallest_norm_stds

__all__ = ["NATIVE_INPUT_KEYS", "backbone", "capture_native"]

#: Batch keys handed to :meth:`~filterformer.models.Transformer.forward`.
NATIVE_INPUT_KEYS = ("input_ids", "inputs", "inputs_embeds", "padding_mask")


def backbone(model: nn.Module) -> Transformer | None:
    """The :class:`~filterformer.models.Transformer` of a model or of a task head wrapping one
    as ``.transformer``; None for any other module."""
    if isinstance(model, Transformer):
        return model
    inner = getattr(model, "transformer", None)
    return inner if isinstance(inner, Transformer) else None


def capture_native(
    model: nn.Module, batch: Mapping[str, Any] | Tensor, *, attentions: bool = False,
    norms: bool = True,
) -> CapturedForward:
    """Run a filterformer model (or task head) and collect its intermediates.

    Args:
        model: a :class:`~filterformer.models.Transformer` or a head with ``.transformer``.
        batch: a dict with ``input_ids`` or ``inputs`` or ``inputs_embeds`` and optionally
            ``padding_mask`` (other keys such as ``labels`` are ignored), or a tensor of
            ``input_ids`` (integers) or ``inputs`` (floats).
        attentions: also record the explicit ``Ā`` and filter matrices (small N only).
        norms: record each block's ``σ1``, ``σ2``.

    Returns:
        :class:`CapturedForward`.
    """
    transformer = backbone(model)
    if transformer is None:
        raise ValueError(
            f"model must be a filterformer Transformer or wrap one as .transformer; "
            f"got {type(model).__name__}"
        )
    batch = to_device(batch, model_device(transformer))
    if isinstance(batch, Tensor):
        batch = {"inputs" if batch.is_floating_point() else "input_ids": batch}
    inputs = {key: batch[key] for key in NATIVE_INPUT_KEYS if batch.get(key) is not None}
    if not set(inputs) - {"padding_mask"}:
        raise ValueError(
            f"batch must hold one of {NATIVE_INPUT_KEYS[:3]}; got keys {sorted(batch)}"
        )
    tokens = next(v for k, v in inputs.items() if k != "padding_mask")
    mask = batch_mask(batch, tokens.shape[0], tokens.shape[1], tokens.device)
    with record_norm_stds(list(transformer.blocks) if norms else []) as stds:
        out = transformer(**inputs, output_hidden_states=True, output_attentions=attentions)
    maps = out.attention_maps
    return CapturedForward(
        hidden_states=out.hidden_states,
        mask=mask,
        attentions=tuple(m.attention for m in maps) if maps else None,
        filters=tuple(m.filter for m in maps) if maps else None,
        norm_stds=smallest_norm_stds(stds, mask),
    )
