"""NeuTRENO's fidelity term (Nguyen et al., NeurIPS 2023; METHODS.md §2)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from .coefficient_dtype import as_terms_dtype, terms_dtype

__all__ = ["check_neutreno_lambda", "neutreno"]


def check_neutreno_lambda(lam: Any) -> float:
    """Return NeuTRENO's λ as a float if it is a finite number ``>= 0``, else ValueError.

    The papers use λ in (0, 1] (0.6 vision, 0.4 language modelling) and 0 disables the term; a
    negative λ pushes the output away from V⁰, the opposite of the method, and NaN or ±inf would
    make every later layer's output non-finite. Larger-than-1 values are allowed (the term stays
    well defined) but outside what the papers tried.
    """
    if (
        isinstance(lam, bool)
        or not isinstance(lam, (int, float))
        or not math.isfinite(lam)
        or lam < 0
    ):
        raise ValueError(
            "neutreno_lambda must be a finite number >= 0 (the papers use λ in (0, 1]: 0.6 "
            f"vision, 0.4 language; 0 disables the term); got {lam!r}"
        )
    return float(lam)


def neutreno(attended: Tensor, values: Tensor, first_values: Tensor, lam: float | Tensor) -> Tensor:
    """``attended + λ·(V⁰ − V)``, per head and position.

    With grouped-query attention the values may keep their key/value heads: query head ``i``
    reads key/value head ``i // (h / h_kv)``, and ``V⁰ − V`` is formed once per key/value head
    and broadcast to its query heads, with no copy of the values per query head.

    Args:
        attended: ``(B, h, N, d)`` output of any attention (before the output projection).
        values: ``(B, h, N, d)``, or ``(B, h_kv, N, d)`` with ``h_kv`` dividing ``h``: this
            layer's values at the same positions.
        first_values: values of the first attention layer of the same forward pass (not
            detached), shaped like ``values``.
        lam: scalar, or ``(h,)`` for a per-head λ (a learned one: cast to the terms' dtype, so
            that under autocast the sum stays in the half precision of ``attended`` and
            ``V⁰ − V``, as without the term; its gradient reaches λ in λ's own dtype).

    Returns:
        ``(B, h, N, d)`` in the promotion of ``attended``'s and ``V⁰ − V``'s dtypes.

    Raises:
        ValueError: when ``values`` has a number of heads that does not divide ``h``.
    """
    heads, kv_heads = attended.shape[1], values.shape[1]
    if heads % kv_heads:
        raise ValueError(f"values have {kv_heads} heads, which does not divide the {heads} "
                         "heads of the attended output")
    group = heads // kv_heads
    difference = first_values - values
    if group > 1:  # (B, h_kv, h / h_kv, N, d): each key/value head beside its query heads
        batch, _, length, dim = attended.shape
        attended = attended.reshape(batch, kv_heads, group, length, dim)
        difference = difference.unsqueeze(2)
    if isinstance(lam, Tensor):
        lam = as_terms_dtype(lam, terms_dtype(attended, difference))
        if lam.dim() == 1:
            lam = lam.view(1, kv_heads, group, 1, 1) if group > 1 else lam.view(1, -1, 1, 1)
        out = torch.addcmul(attended, lam, difference)
    else:  # a float λ scales inside the addition: no scalar tensor, one operation fewer
        out = torch.add(attended, difference, alpha=lam)
    return out.reshape(batch, heads, length, dim) if group > 1 else out
