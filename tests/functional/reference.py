"""Independent float64 references for the attention kernels: explicit matrices, written out."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def explicit_attention(
    q: Tensor, k: Tensor, *, key_padding: Tensor | None = None, causal: bool = False
) -> Tensor:
    """softmax(QKᵀ/√d) with masked entries at -inf, rows with no key set to 0: (B, h, N, N)."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    allowed = torch.ones(scores.shape, dtype=torch.bool)
    if key_padding is not None:
        allowed = allowed & key_padding[:, None, None, :]
    if causal:
        n = q.shape[-2]
        allowed = allowed & torch.ones(n, n, dtype=torch.bool).tril()
    scores = scores.masked_fill(~allowed, float("-inf"))
    attn = torch.zeros_like(scores)
    for index in torch.nonzero(allowed.any(-1)):
        b, h, i = index.tolist()
        attn[b, h, i] = torch.softmax(scores[b, h, i], dim=-1)
    return attn


def explicit_filter(attn: Tensor, w0: Tensor, w1: Tensor, wK: Tensor, K: int) -> Tensor:
    """H̃ = w0 I + w1 Ā + wK (Ā + (K−1)(Ā² − Ā)), per head, from METHODS.md §1."""
    heads = attn.shape[1]
    eye = torch.eye(attn.shape[-1], dtype=attn.dtype)
    out = torch.empty_like(attn)
    for h in range(heads):
        a = attn[:, h]
        out[:, h] = w0[h] * eye + w1[h] * a + wK[h] * (a + (K - 1) * (a @ a - a))
    return out


def efficient_maps(q: Tensor, k: Tensor, key_padding: Tensor | None = None):
    """ρq: softmax over features; ρk: softmax over real tokens per feature, 0 at padding."""
    rho_q = torch.exp(q) / torch.exp(q).sum(-1, keepdim=True)
    weights = torch.exp(k)
    if key_padding is not None:
        weights = weights * key_padding[:, None, :, None]
    rho_k = weights / weights.sum(-2, keepdim=True)
    return rho_q, rho_k


def relative_error(actual: Tensor, expected: Tensor) -> float:
    return ((actual - expected).norm() / expected.norm().clamp_min(1e-300)).item()
