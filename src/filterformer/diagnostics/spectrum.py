"""Singular values of token features: dimensional collapse (METHODS.md §6; GFSA's Fig. 2c).

Over-smoothed features concentrate their energy in a few directions: the normalised spectrum
``σ_i/σ_1`` falls fast and the effective rank ``exp(entropy(σ/Σσ))`` (Roy & Vetterli, 2007) is
small.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .tokens import check_hidden, masked_tokens

__all__ = [
    "effective_rank",
    "effective_rank_from_singular_values",
    "gram_singular_values",
    "normalized_spectrum",
    "singular_value_spectrum",
    "singular_values",
]


def singular_values(hidden: Tensor, mask: Tensor | None = None) -> Tensor:
    """Singular values of each sample's ``n × D`` matrix of real tokens, descending.

    Padded tokens are zero rows, which change no singular value: they only lengthen the list
    with zeros.

    Args:
        hidden: ``(B, N, D)``, or ``(L, B, N, D)`` for a stack of layers.
        mask: ``(B, N)`` bool, True at real tokens.

    Returns:
        ``(B, min(N, D))`` or ``(L, B, min(N, D))``, zeros past each sample's rank.
    """
    mask = check_hidden(hidden, mask)
    return torch.linalg.svdvals(masked_tokens(hidden, mask))


def normalized_spectrum(values: Tensor) -> Tensor:
    """``σ_i / σ_1`` for descending singular values ``(..., M)``; all 0 where ``σ_1 = 0``."""
    top = values[..., :1]
    return torch.where(top > 0, values / top.clamp_min(torch.finfo(values.dtype).tiny), 0.0)


def singular_value_spectrum(hidden: Tensor, mask: Tensor | None = None) -> Tensor:
    """Normalised singular-value spectrum ``σ_i/σ_1`` of each sample's real tokens.

    Args:
        hidden: ``(B, N, D)``, or ``(L, B, N, D)`` for a stack of layers.
        mask: ``(B, N)`` bool, True at real tokens.

    Returns:
        ``(B, min(N, D))`` or ``(L, B, min(N, D))``, descending from 1, zeros past each
        sample's rank (all zeros for a sample whose tokens are all 0).
    """
    return normalized_spectrum(singular_values(hidden, mask))


def effective_rank_from_singular_values(values: Tensor) -> Tensor:
    """``exp(entropy(p))`` with ``p = σ/Σσ`` over the last axis; ``0·log 0 = 0``.

    Args:
        values: ``(..., M)`` non-negative singular values.

    Returns:
        ``(...)``, between 1 and the number of non-zero values; NaN when all are 0.
    """
    p = values / values.sum(dim=-1, keepdim=True)
    entropy = -torch.special.xlogy(p, p).sum(dim=-1)
    return entropy.exp()


def effective_rank(hidden: Tensor, mask: Tensor | None = None) -> Tensor:
    """Effective rank of each sample's real tokens (``n × D``): ``exp(entropy(σ/Σσ))``.

    Args:
        hidden: ``(B, N, D)``, or ``(L, B, N, D)`` for a stack of layers.
        mask: ``(B, N)`` bool, True at real tokens.

    Returns:
        ``(B,)`` or ``(L, B)``; NaN for a sample whose tokens are all 0.
    """
    return effective_rank_from_singular_values(singular_values(hidden, mask))


def gram_singular_values(gram: Tensor) -> Tensor:
    """Singular values of a token matrix ``H`` from its Gram matrix ``HᵀH``, descending.

    Lets the spectrum of every token of a dataset be accumulated as a ``D × D`` sum of per-batch
    Gram matrices instead of keeping the tokens.

    Args:
        gram: ``(..., D, D)`` symmetric positive semi-definite.

    Returns:
        ``(..., D)``; rounding-level negative eigenvalues are read as 0. The square root
        magnifies rounding: a zero singular value may read as about ``√ε·σ_1`` (1e-8 in float64).
    """
    if gram.dim() < 2 or gram.shape[-1] != gram.shape[-2]:
        raise ValueError(f"gram must have shape (..., D, D); got {tuple(gram.shape)}")
    eigenvalues = torch.linalg.eigvalsh(gram).clamp_min(0.0)
    return eigenvalues.flip(-1).sqrt()
