"""The position-wise feed-forward network of a Transformer block."""

from __future__ import annotations

from torch import Tensor, nn

__all__ = ["Mlp"]


class Mlp(nn.Module):
    """``Linear(D → r·D) → GELU → Dropout → Linear(r·D → D) → Dropout`` (timm's names).

    Args:
        dim: width D.
        hidden_dim: inner width r·D.
        dropout: dropout after the activation and after the output projection.
    """

    def __init__(self, dim: int, hidden_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """``(..., D)`` -> ``(..., D)``."""
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))
