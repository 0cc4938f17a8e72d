"""What one forward pass yields for the diagnostics, whatever the model."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

__all__ = ["CapturedForward"]


@dataclass
class CapturedForward:
    """Intermediates of one forward pass over a batch.

    Attributes:
        hidden_states: the embedding output ``H_0`` then every layer's output ``H_1..H_L``, each
            ``(B, N, D)``.
        mask: ``(B, N)`` bool, True at real tokens.
        attentions: per layer, the attention matrix ``Ā`` ``(B, h, N, N)``; None when not
            captured.
        filters: per layer, the operator applied to the values ``(B, h, N, N)`` (``Ā`` for
            softmax attention, ``H̃`` for GFSA, ``(U⊙G)Vsᵀ`` for AGF); None when not captured.
        norm_stds: per layer, the smallest per-token input std of its LayerNorms in order
            (``σ1``, ``σ2``), each ``(B,)``; None when not captured.
    """

    hidden_states: tuple[Tensor, ...]
    mask: Tensor
    attentions: tuple[Tensor, ...] | None = None
    filters: tuple[Tensor, ...] | None = None
    norm_stds: tuple[tuple[Tensor, ...], ...] | None = None

    @property
    def num_layers(self) -> int:
        """L, the number of layers after the embeddings."""
        return len(self.hidden_states) - 1
