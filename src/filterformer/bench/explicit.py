"""The GFSA authors' formulation, as a benchmark baseline only (not a library kernel).

The released GFSA code materialises the attention matrix and its square:
``A = softmax(QKᵀ/√d)``, ``A @ A``, ``H̃ = w0·I + w1·A + wK·(A + (K−1)(A·A − A))`` and returns
``H̃ V``. That is ``O(N³)`` time and several ``N×N`` matrices per head; the library's
:func:`~filterformer.functional.gfsa` computes the same output with two fused attention calls.
"""

from __future__ import annotations

from torch import Tensor

from ..functional import attention_matrix, gfsa_filter

__all__ = ["explicit_gfsa"]


def explicit_gfsa(
    q: Tensor, k: Tensor, v: Tensor, w0: Tensor, w1: Tensor, wK: Tensor, *, K: int
) -> Tensor:
    """GFSA with explicit ``N×N`` matrices, as the authors ship it (benchmark reference).

    Args:
        q, k, v: ``(B, h, N, d)``.
        w0, w1, wK: ``(h,)`` filter coefficients.
        K: the filter order (≥ 2).

    Returns:
        ``(B, h, N, d)``, equal to ``gfsa(q, k, v, w0, w1, wK, K=K)`` up to rounding.
    """
    attn = attention_matrix(q, k)
    return gfsa_filter(attn, w0, w1, wK, K=K) @ v
