"""timm Vision Transformers: what one is and where its blocks are.

Nothing here imports timm unless it is already imported: a model can only be one then.
"""

from __future__ import annotations

import sys

from torch import nn

__all__ = ["is_timm_vision_transformer", "vision_transformer_blocks"]


def is_timm_vision_transformer(model: nn.Module) -> bool:
    """Whether ``model`` is a timm ``VisionTransformer`` (ViT, DeiT, and their subclasses)."""
    if "timm" not in sys.modules:
        return False
    from timm.models.vision_transformer import VisionTransformer

    return isinstance(model, VisionTransformer)


def vision_transformer_blocks(model: nn.Module) -> list[nn.Module]:
    """The transformer blocks of a timm ViT, in depth order (each with ``attn``, ``norm1``, …)."""
    return list(model.blocks)
