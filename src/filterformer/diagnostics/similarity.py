"""Cosine similarities that expose over-smoothing (METHODS.md §6).

Tokens that grow alike with depth (Guo et al.; NeuTRENO's appendix E.3) and attention maps that
repeat from one layer to the next (NeuTRENO's Fig. 5).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..functional import check_key_padding_mask
from .tokens import check_hidden, masked_tokens

__all__ = ["attention_map_similarity", "token_cosine_similarity"]


def token_cosine_similarity(hidden: Tensor, mask: Tensor | None = None) -> Tensor:
    """Mean cosine similarity over pairs of distinct real tokens, per sample.

    ``1/(n(n−1)) Σ_{i≠j} cos(h_i, h_j)`` over the ``n`` real tokens of each sample. With unit
    vectors ``u_i`` the pair sum is ``‖Σ u_i‖² − Σ‖u_i‖²``, so no N×N matrix is formed. A
    token of norm 0 has cosine 0 with every other token.

    Args:
        hidden: ``(B, N, D)``, or ``(L, B, N, D)`` for a stack of layers.
        mask: ``(B, N)`` bool, True at real tokens; None means all tokens are real.

    Returns:
        ``(B,)``, or ``(L, B)`` for a stack; NaN for a sample with fewer than two real tokens.
    """
    mask = check_hidden(hidden, mask)
    norms = hidden.norm(dim=-1, keepdim=True)
    unit = masked_tokens(hidden / norms.clamp_min(torch.finfo(hidden.dtype).tiny), mask)
    total = unit.sum(dim=-2)
    self_terms = unit.square().sum(dim=(-1, -2))
    count = mask.sum(dim=-1).to(hidden.dtype)
    pairs = count * (count - 1)
    similarity = (total.square().sum(dim=-1) - self_terms) / pairs.clamp_min(1)
    return similarity.masked_fill(pairs == 0, float("nan"))


def attention_map_similarity(
    first: Tensor, second: Tensor, mask: Tensor | None = None
) -> Tensor:
    """Cosine similarity of two layers' attention maps, per head, averaged over heads.

    Each head's map is read as one vector over (query, key) pairs of real tokens; head ``i`` of
    one layer is compared with head ``i`` of the other, as in NeuTRENO's Fig. 5.

    Args:
        first: ``(B, h, N, N)`` attention maps of one layer.
        second: ``(B, h, N, N)`` those of another layer (usually the next one).
        mask: ``(B, N)`` bool, True at real tokens.

    Returns:
        ``(B,)``; NaN for a sample whose maps are 0 over its real tokens.
    """
    for name, maps in (("first", first), ("second", second)):
        if maps.dim() != 4 or maps.shape[-1] != maps.shape[-2]:
            raise ValueError(f"{name} must have shape (B, h, N, N); got {tuple(maps.shape)}")
    if first.shape != second.shape:
        raise ValueError(
            f"first and second must have the same shape; got {tuple(first.shape)} and "
            f"{tuple(second.shape)}"
        )
    if mask is not None:
        mask = check_key_padding_mask(mask, first.shape[0], first.shape[-1]).to(first.device)
        pairs = (mask[:, :, None] & mask[:, None, :])[:, None]
        first, second = first.masked_fill(~pairs, 0.0), second.masked_fill(~pairs, 0.0)
    dot = (first * second).sum(dim=(-1, -2))
    norms = first.norm(dim=(-1, -2)) * second.norm(dim=(-1, -2))
    cosine = dot / norms
    return cosine.mean(dim=-1)
