"""How far tokens are from being identical (METHODS.md §5–§6).

The subspace ``M = {1·cᵀ}`` of matrices whose tokens are all equal is where over-smoothing ends.
The distance to it, ``d_M(H) = ‖H − 1·mean(H)ᵀ‖_F``, is the quantity the layer-norm paper bounds
per layer; it is also the high-frequency part of the signal ``H`` on the complete graph, whose
low-frequency part is the mean token: ``(I − 11ᵀ/N)H`` and ``(11ᵀ/N)H``.
"""

from __future__ import annotations

from torch import Tensor

from .tokens import check_hidden, masked_tokens

__all__ = ["frequency_energy", "high_low_frequency_ratio", "identical_token_distance"]


def frequency_energy(hidden: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Norms of the high- and low-frequency parts of ``H`` and of ``H``, over real tokens.

    Args:
        hidden: ``(B, N, D)``, or ``(L, B, N, D)`` for a stack of layers.
        mask: ``(B, N)`` bool, True at real tokens.

    Returns:
        ``(high, low, total)``, each ``(..., B)``: ``‖(I − 11ᵀ/n)H‖_F``, ``‖(11ᵀ/n)H‖_F`` and
        ``‖H‖_F``; NaN for a sample with no real token.
    """
    mask = check_hidden(hidden, mask)
    tokens = masked_tokens(hidden, mask)
    count = mask.sum(dim=-1).to(hidden.dtype)
    mean = tokens.sum(dim=-2) / count[..., None]
    high = masked_tokens(tokens - mean[..., None, :], mask).norm(dim=(-1, -2))
    low = mean.norm(dim=-1) * count.sqrt()
    total = tokens.norm(dim=(-1, -2))
    empty = count == 0
    return (t.masked_fill(empty, float("nan")) for t in (high, low, total))


def identical_token_distance(
    hidden: Tensor, mask: Tensor | None = None, *, relative: bool = False
) -> Tensor:
    """Distance to the identical-token subspace, ``d_M(H) = ‖H − 1·mean(H)ᵀ‖_F``, per sample.

    Args:
        hidden: ``(B, N, D)``, or ``(L, B, N, D)`` for a stack of layers.
        mask: ``(B, N)`` bool, True at real tokens; the mean and the norm cover real tokens only.
        relative: divide by ``‖H‖_F`` (0 = every token identical, 1 = tokens average to 0).

    Returns:
        ``(B,)`` or ``(L, B)``; NaN for a sample with no real token (and, when ``relative``, for
        one whose tokens are all 0).
    """
    high, _, total = frequency_energy(hidden, mask)
    return high / total if relative else high


def high_low_frequency_ratio(hidden: Tensor, mask: Tensor | None = None) -> Tensor:
    """High- to low-frequency energy of a layer's output, ``‖(I − 11ᵀ/N)Y‖ / ‖(11ᵀ/N)Y‖``.

    Over-smoothing drives it to 0: only the mean token (frequency 0) survives.

    Args:
        hidden: ``(B, N, D)``, or ``(L, B, N, D)`` for a stack of layers.
        mask: ``(B, N)`` bool, True at real tokens; N counts real tokens only.

    Returns:
        ``(B,)`` or ``(L, B)``; ``inf`` when the tokens average to 0, NaN with no real token.
    """
    high, low, _ = frequency_energy(hidden, mask)
    return high / low
