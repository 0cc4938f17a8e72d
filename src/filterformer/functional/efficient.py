"""Efficient Attention (Shen et al., 2021): the linear-cost base of GFSA and AGF.

``Ā ≈ ρq(Q) ρk(K)ᵀ`` with ρq a softmax over each token's features and ρk a softmax over tokens for
each feature (METHODS.md §1). Every row of that Ā sums to 1, and ``ĀV = ρq(Q) (ρk(K)ᵀ V)`` costs
``O(N·d²)``: nothing N×N is formed.
"""

from __future__ import annotations

from torch import Tensor

from .masks import check_key_padding_mask, check_qkv

__all__ = ["efficient_attention", "efficient_feature_maps"]


def efficient_feature_maps(
    q: Tensor, k: Tensor, key_padding_mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """ρq(Q) and ρk(K) of Efficient Attention.

    Args:
        q: ``(B, h, N, d)``.
        k: ``(B, h, S, d)``.
        key_padding_mask: ``(B, S)`` bool, True at real tokens; padded keys get weight 0.

    Returns:
        ``(rho_q, rho_k)``: ``rho_q`` ``(B, h, N, d)`` with rows summing to 1, ``rho_k``
        ``(B, h, S, d)`` with columns summing to 1 over real tokens (all 0 in a sample with none).
    """
    rho_q = q.softmax(dim=-1)
    mask = check_key_padding_mask(key_padding_mask, k.shape[0], k.shape[-2])
    if mask is None:
        return rho_q, k.softmax(dim=-2)
    real = mask[:, None, :, None]
    # A sample without real tokens keeps its keys open (finite softmax) and is zeroed after.
    has_real = real.any(dim=-2, keepdim=True)
    rho_k = k.masked_fill(~real & has_real, float("-inf")).softmax(dim=-2) * real
    return rho_q, rho_k


def efficient_attention(
    q: Tensor, k: Tensor, v: Tensor, key_padding_mask: Tensor | None = None
) -> Tensor:
    """Efficient Attention ``ρq(Q) (ρk(K)ᵀ V)``.

    Args:
        q: ``(B, h, N, d)`` queries.
        k: ``(B, h, S, d)`` keys.
        v: ``(B, h, S, d_v)`` values.
        key_padding_mask: ``(B, S)`` bool, True at real tokens.

    Returns:
        ``(B, h, N, d_v)``; 0 for a sample whose keys are all padding.
    """
    check_qkv(q, k, v)
    rho_q, rho_k = efficient_feature_maps(q, k, key_padding_mask)
    return rho_q @ (rho_k.transpose(-1, -2) @ v)
