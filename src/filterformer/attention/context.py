"""State shared by the attention layers of one forward pass."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..functional import neutreno

__all__ = ["AttentionContext", "AttentionMaps"]


@dataclass
class AttentionMaps:
    """Explicit N×N matrices of one layer, recorded on request for diagnostics (small N only).

    Attributes:
        attention: ``(B, h, N, N)`` the attention matrix ``Ā`` (for linear methods, the matrix
            their factors would form).
        filter: ``(B, h, N, N)`` the operator the layer applies to V: ``Ā`` for softmax, ``H̃``
            for GFSA, ``(U⊙G)Vsᵀ`` for AGF.
    """

    attention: Tensor
    filter: Tensor


@dataclass
class AttentionContext:
    """Per-forward state, made by the model and handed to every attention layer.

    Attributes:
        first_values: NeuTRENO's V⁰, ``(B, h, N, d)`` (``(B, h_kv, N, d)`` in a grouped-query
            model): the values of the first attention layer of this pass at the positions being
            computed. Set by that layer.
        output_attentions: whether layers record :class:`AttentionMaps`.
        attention_maps: the recorded maps, one per attention layer in order.
        aux_losses: auxiliary losses by name, as ``(weight, [values])``.
    """

    first_values: Tensor | None = None
    output_attentions: bool = False
    attention_maps: list[AttentionMaps] = field(default_factory=list)
    aux_losses: dict[str, tuple[float, list[Tensor]]] = field(default_factory=dict)

    def neutreno(self, out: Tensor, values: Tensor, lam: float | Tensor | None) -> Tensor:
        """NeuTRENO's V⁰ rule (METHODS.md §2) for the attention layer running now.

        The first layer of the pass provides V⁰ (its values) and keeps its output; every later
        layer with a λ gets ``out + λ·(V⁰ − V)``. Every path (native modules, patched Hugging Face
        and timm models) applies the term through this method.

        Args:
            out: ``(B, h, L, d)`` the layer's attention output before its output projection.
            values: ``(B, h, L, d)`` its values at the same positions (``(B, h_kv, L, d)``, its
                key/value heads, in a grouped-query model: see ``functional.neutreno``).
            lam: λ (a float, or ``(h,)`` per head); None or 0 leaves ``out`` as it is.

        Returns:
            ``(B, h, L, d)``.

        Raises:
            ValueError: when V⁰ was recorded at other positions or heads (a layer called outside
                its model's forward pass, or recomputed by gradient checkpointing).
        """
        if self.first_values is None:
            self.first_values = values
            return out
        if lam is None or (not isinstance(lam, Tensor) and lam == 0.0):
            return out
        if self.first_values.shape != values.shape:
            raise ValueError(
                "NeuTRENO needs V⁰, the first attention layer's values of the same forward pass, "
                f"at the same positions: it holds shape {tuple(self.first_values.shape)} and this "
                f"layer's values have {tuple(values.shape)}; call the model itself (not one of "
                "its layers) and do not use gradient checkpointing"
            )
        return neutreno(out, values, self.first_values, lam)

    def add_aux_loss(self, name: str, value: Tensor, weight: float) -> None:
        """Record a layer's auxiliary loss; same-name losses are averaged, then weighted."""
        entry = self.aux_losses.setdefault(name, (weight, []))
        if entry[0] != weight:
            raise ValueError(f"aux loss {name!r} was added with weights {entry[0]} and {weight}")
        entry[1].append(value)

    def aux_loss(self) -> Tensor | None:
        """``Σ_name weight · mean(values)``, or None when no layer added one."""
        if not self.aux_losses:
            return None
        terms = [weight * torch.stack(values).mean() for weight, values in self.aux_losses.values()]
        return torch.stack(terms).sum()
