"""timm Vision Transformers: what one is and where its blocks are.

Nothing here imports timm unless it is already imported: a model can only be one then.
"""

from __future__ import annotations

import sys

from torch import nn

__all__ = ["has_timm_blocks", "is_timm_vision_transformer", "vision_transformer_blocks"]


def is_timm_vision_transformer(model: nn.Module) -> bool:
    """Whether ``model`` is a timm ``VisionTransformer`` (ViT, DeiT, and their subclasses)."""
    if "timm" not in sys.modules:
        return False
    from timm.models.vision_transformer import VisionTransformer

    return isinstance(model, VisionTransformer)


def has_timm_blocks(model: nn.Module) -> bool:
    """Whether ``model`` has timm's block-stack interface: ``forward_intermediates`` and a
    ``blocks`` list. Every timm ``VisionTransformer`` has it, and so do other timm families (Eva,
    BEiT, …), whose layers diagnostics can read although :func:`filterformer.patch` cannot
    change their attention."""
    return callable(getattr(model, "forward_intermediates", None)) and isinstance(
        getattr(model, "blocks", None), nn.Sequential | nn.ModuleList
    )


def vision_transformer_blocks(model: nn.Module) -> list[nn.Module]:
    """The transformer blocks of a timm ViT, in depth order (each with ``attn``, ``norm1``, …)."""
    return list(model.blocks)
