"""Pooling a token sequence into one vector per sample, ignoring padding."""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["POOLINGS", "SequencePooling", "masked_mean"]

POOLINGS = ("mean", "first", "attention")


def masked_mean(x: Tensor, padding_mask: Tensor | None) -> Tensor:
    """Mean over real tokens: ``(B, N, D)``, ``(B, N)`` bool -> ``(B, D)`` (0 with none)."""
    if padding_mask is None:
        return x.mean(dim=1)
    weights = padding_mask.to(x.dtype).unsqueeze(-1)
    return (x * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)


class SequencePooling(nn.Module):
    """``(B, N, D)`` -> ``(B, D)``.

    Modes: ``mean`` over real tokens; ``first`` token (a [CLS]-style token); ``attention``: a
    learned score per token, softmax over real tokens, weighted sum. ``mean`` and ``attention``
    pool a sample without real tokens to 0, whatever its padding holds.
    """

    def __init__(self, mode: str, dim: int) -> None:
        super().__init__()
        if mode not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}; got {mode!r}")
        self.mode = mode
        if mode == "attention":
            self.score = nn.Linear(dim, 1)

    def forward(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        if self.mode == "mean":
            return masked_mean(x, padding_mask)
        if self.mode == "first":
            return x[:, 0]
        scores = self.score(x).squeeze(-1)
        if padding_mask is None:
            return (scores.softmax(dim=-1).unsqueeze(-1) * x).sum(dim=1)
        weights = scores.masked_fill(~padding_mask, torch.finfo(scores.dtype).min).softmax(dim=-1)
        # Padded weights already underflow to 0 beside a real token; a sample with none would
        # otherwise average its padding.
        weights = weights * padding_mask
        return (weights.unsqueeze(-1) * x).sum(dim=1)

    def extra_repr(self) -> str:
        return f"mode={self.mode!r}"
