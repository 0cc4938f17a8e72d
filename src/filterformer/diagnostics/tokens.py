"""Validation shared by the token metrics: hidden states, their layer stacks and padding masks."""

from __future__ import annotations

import torch
from torch import Tensor

from ..functional import check_key_padding_mask

__all__ = ["check_hidden", "masked_tokens"]


def check_hidden(hidden: Tensor, mask: Tensor | None, name: str = "hidden") -> Tensor:
    """Validate ``(B, N, D)`` or a layer stack ``(L, B, N, D)`` and return the token mask.

    Args:
        hidden: token features of one layer or of a stack of layers.
        mask: ``(B, N)`` bool, True at real tokens; None means every token is real.
        name: the argument's name for error messages.

    Returns:
        ``(B, N)`` bool mask (all True when ``mask`` is None).

    Raises:
        ValueError: on a rank other than 3 or 4, an integer tensor, or a mask of the wrong shape
            or dtype.
    """
    if hidden.dim() not in (3, 4):
        raise ValueError(
            f"{name} must have shape (B, N, D) or, for a stack of layers, (L, B, N, D); "
            f"got {tuple(hidden.shape)}"
        )
    if not hidden.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor; got {hidden.dtype}")
    batch, length = hidden.shape[-3], hidden.shape[-2]
    if mask is None:
        return torch.ones(batch, length, dtype=torch.bool, device=hidden.device)
    return check_key_padding_mask(mask, batch, length).to(hidden.device)


def masked_tokens(hidden: Tensor, mask: Tensor) -> Tensor:
    """``hidden`` with padded tokens set to 0, so sums over tokens cover real tokens only.

    Args:
        hidden: ``(..., B, N, D)``.
        mask: ``(B, N)`` bool, True at real tokens.

    Returns:
        ``(..., B, N, D)``.
    """
    return hidden.masked_fill(~mask[..., None], 0.0)
