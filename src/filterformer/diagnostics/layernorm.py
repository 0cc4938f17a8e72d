"""The layer-norm view of over-smoothing (Shi et al., ICLR 2022; METHODS.md §5).

In a post-LN block the distance to the identical-token subspace shrinks per layer by at most
``v = (1+s²)(1+√λ·h·s)/(σ1σ2)``, where ``σ1`` and ``σ2`` are the smallest per-token standard
deviations of the two LayerNorms' inputs. Large ``σ1σ2`` means faster over-smoothing.
"""

from __future__ import annotations

from torch import Tensor

from ..functional import check_key_padding_mask
from .tokens import check_hidden

__all__ = ["smallest_over_tokens", "smallest_token_std", "token_std"]


def token_std(inputs: Tensor) -> Tensor:
    """Each token's standard deviation over features, the biased estimate LayerNorm divides by
    (without its ``eps``): ``(..., N, D)`` -> ``(..., N)``."""
    return inputs.std(dim=-1, correction=0)


def smallest_over_tokens(values: Tensor, mask: Tensor | None = None) -> Tensor:
    """The smallest per-token value over each sample's real tokens.

    Args:
        values: ``(B, N)`` or ``(L, B, N)``.
        mask: ``(B, N)`` bool, True at real tokens.

    Returns:
        ``(B,)`` or ``(L, B)``; NaN for a sample with no real token.
    """
    if mask is None:
        return values.amin(dim=-1)
    mask = check_key_padding_mask(mask, values.shape[-2], values.shape[-1]).to(values.device)
    smallest = values.masked_fill(~mask, float("inf")).amin(dim=-1)
    return smallest.masked_fill(~mask.any(dim=-1), float("nan"))


def smallest_token_std(inputs: Tensor, mask: Tensor | None = None) -> Tensor:
    """The smallest standard deviation over features of any real token, per sample (``σ1`` or
    ``σ2`` when ``inputs`` is a LayerNorm's input).

    Args:
        inputs: ``(B, N, D)`` a LayerNorm's input, or ``(L, B, N, D)`` for a stack of layers.
        mask: ``(B, N)`` bool, True at real tokens.

    Returns:
        ``(B,)`` or ``(L, B)``; NaN for a sample with no real token.
    """
    mask = check_hidden(inputs, mask, name="inputs")
    return smallest_over_tokens(token_std(inputs), mask)
