"""NeuTRENO's fidelity term (Nguyen et al., NeurIPS 2023; METHODS.md §2)."""

from __future__ import annotations

from torch import Tensor

__all__ = ["neutreno"]


def neutreno(attended: Tensor, values: Tensor, first_values: Tensor, lam: float | Tensor) -> Tensor:
    """``attended + λ·(V⁰ − V)``, per head and position.

    Args:
        attended: ``(B, h, N, d)`` output of any attention (before the output projection).
        values: ``(B, h, N, d)`` this layer's values at the same positions.
        first_values: ``(B, h, N, d)`` values of the first attention layer of the same forward
            pass (not detached).
        lam: scalar, or ``(h,)`` for a per-head λ.

    Returns:
        ``(B, h, N, d)``.
    """
    if isinstance(lam, Tensor) and lam.dim() == 1:
        lam = lam.view(1, -1, 1, 1)
    return attended + lam * (first_values - values)
