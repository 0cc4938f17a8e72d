"""Shared test inputs: random token batches and the same batch with padding inserted."""

from __future__ import annotations

import torch
from torch import Tensor


def random_hidden(batch: int = 3, length: int = 6, dim: int = 5) -> Tensor:
    """``(B, N, D)`` float64 tokens with a shared offset, so cosines are far from 0."""
    return torch.randn(batch, length, dim, dtype=torch.float64) + torch.randn(dim).double()


def insert_padding(hidden: Tensor, extra: int = 3) -> tuple[Tensor, Tensor, Tensor]:
    """Scatter ``extra`` garbage tokens at random positions of every sample.

    Args:
        hidden: ``(..., B, N, D)`` real tokens.
        extra: padded tokens per sample.

    Returns:
        ``(padded, mask, positions)``: ``(..., B, N + extra, D)`` with large random values at
        the padded positions, the ``(B, N + extra)`` mask, and ``(B, N)`` the positions of the
        real tokens (in order).
    """
    *lead, batch, length, dim = hidden.shape
    total = length + extra
    padded = 100 * torch.randn(*lead, batch, total, dim, dtype=hidden.dtype)
    mask = torch.zeros(batch, total, dtype=torch.bool)
    positions = torch.stack([torch.randperm(total)[:length].sort().values for _ in range(batch)])
    for b in range(batch):
        mask[b, positions[b]] = True
        padded[..., b, positions[b], :] = hidden[..., b, :, :]
    return padded, mask, positions


def pad_filters(filters: Tensor, positions: Tensor, total: int) -> Tensor:
    """Embed ``(B, h, n, n)`` filters into ``(B, h, total, total)`` at ``positions`` (garbage
    elsewhere)."""
    batch, heads = filters.shape[:2]
    padded = 100 * torch.randn(batch, heads, total, total, dtype=filters.dtype)
    for b in range(batch):
        index = positions[b]
        padded[b][:, index[:, None], index[None, :]] = filters[b]
    return padded


def row_stochastic(*shape: int) -> Tensor:
    """Random non-negative matrices with rows summing to 1, float64."""
    return torch.rand(*shape, dtype=torch.float64).softmax(dim=-1)
