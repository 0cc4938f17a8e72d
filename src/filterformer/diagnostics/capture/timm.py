"""Capture from timm Vision Transformers through ``forward_intermediates`` (timm ≥ 1.0).

``forward_intermediates`` returns every block's output; the embedding output ``H_0`` is the first
block's input, read by a hook. timm's ``Attention`` computes an explicit map only when its fused
kernel is off, and then passes it through ``attn_drop``: turning ``fused_attn`` off for the pass
and hooking ``attn_drop`` yields ``Ā`` without touching the model's code. Blocks patched with the
package's attention (:func:`filterformer.patching.patch`) record ``Ā`` and their filter (GFSA's
``H̃``) through the forward pass's context instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
from torch import Tensor, nn

from ...attention import AttentionBase, AttentionContext
from ...families import TIMM
from .batch import batch_mask, model_device
from .captured import CapturedForward
from .norms import record_norm_stds, smallest_norm_stds

__all__ = ["IMAGE_KEYS", "capture_timm"]

#: Batch keys read as the image tensor when the batch is a dict.
IMAGE_KEYS = ("images", "inputs", "pixel_values", "x")


def _request_maps(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    # Runs after a patch's own pre-hook, which hands the layer the pass's shared context.
    context = kwargs.get("context")
    if context is None:
        context = kwargs["context"] = AttentionContext()
    context.output_attentions = True
    return args, kwargs


@contextmanager
def _record_attention(blocks: Sequence[nn.Module]) -> Iterator[tuple[list[Tensor], list[Tensor]]]:
    """Record every block's ``Ā`` and filter: timm's ``Attention`` through ``attn_drop``, the
    package's attention (a patched block) through its context."""
    attentions: list[Tensor] = []
    filters: list[Tensor] = []

    def record_timm(module: nn.Module, args: tuple, out: Tensor) -> None:
        attentions.append(args[0])
        filters.append(args[0])

    def record_package(module: nn.Module, args: tuple, kwargs: dict, out: Tensor) -> None:
        maps = kwargs["context"].attention_maps[-1]
        attentions.append(maps.attention)
        filters.append(maps.filter)

    modules = [getattr(block, "attn", None) for block in blocks]
    for attn in modules:
        if not isinstance(attn, AttentionBase) and not (
            isinstance(getattr(attn, "attn_drop", None), nn.Module) and hasattr(attn, "fused_attn")
        ):
            raise ValueError(
                "attention maps need timm's Attention (fused_attn, attn_drop) or the package's "
                f"attention in every block; a block has {type(attn).__name__} (pass "
                "attentions=False)"
            )
    handles, fused = [], []
    try:
        for attn in modules:
            if isinstance(attn, AttentionBase):
                handles.append(attn.register_forward_pre_hook(_request_maps, with_kwargs=True))
                handles.append(attn.register_forward_hook(record_package, with_kwargs=True))
            else:
                fused.append((attn, attn.fused_attn))
                attn.fused_attn = False
                handles.append(attn.attn_drop.register_forward_hook(record_timm))
        yield attentions, filters
    finally:
        for handle in handles:
            handle.remove()
        for attn, value in fused:
            attn.fused_attn = value


def capture_timm(
    model: nn.Module, batch: Tensor | Mapping[str, Any], *, attentions: bool = False,
    norms: bool = True,
) -> CapturedForward:
    """Run a timm ViT and collect its intermediates; every token (class token included) is real.

    Args:
        model: a timm ``VisionTransformer`` (``forward_intermediates``, ``blocks``).
        batch: images ``(B, C, H, W)``, or a dict holding them under one of
            :data:`IMAGE_KEYS`.
        attentions: also return the attention maps of every block.
        norms: record each block's ``σ1``, ``σ2``.

    Returns:
        :class:`CapturedForward`; ``filters`` are ``Ā`` in timm's blocks and the filter applied
        to the values (GFSA's ``H̃``) in patched ones.
    """
    images = batch
    if isinstance(batch, Mapping):
        images = next((batch[k] for k in IMAGE_KEYS if batch.get(k) is not None), None)
        if images is None:
            raise ValueError(
                f"batch must hold images under one of {IMAGE_KEYS}; got keys {sorted(batch)}"
            )
    images = images.to(model_device(model))
    blocks = TIMM.layers(model)
    first_input: list[Tensor] = []
    handle = blocks[0].register_forward_pre_hook(lambda m, args: first_input.append(args[0]))
    try:
        maps = _record_attention(blocks) if attentions else nullcontext(([], []))
        with maps as (attention_maps, filter_maps), record_norm_stds(
            blocks if norms else []
        ) as stds:
            intermediates = model.forward_intermediates(
                images, intermediates_only=True, output_fmt="NLC", return_prefix_tokens=True
            )
    finally:
        handle.remove()
    # Each intermediate is (spatial tokens, prefix tokens); the model's order is prefix first.
    outputs = tuple(torch.cat([prefix, spatial], dim=1) for spatial, prefix in intermediates)
    hidden = (first_input[0], *outputs)
    mask = batch_mask(None, hidden[0].shape[0], hidden[0].shape[1], hidden[0].device)
    return CapturedForward(
        hidden_states=hidden,
        mask=mask,
        attentions=tuple(attention_maps) if attentions else None,
        filters=tuple(filter_maps) if attentions else None,
        norm_stds=smallest_norm_stds(stds, mask),
    )

