"""A method's learned coefficients in the dtype of the terms they scale.

Under autocast a layer's terms (attention outputs, values) are half precision while the
coefficients that weight them (GFSA's w0, w1, wK, a learned NeuTRENO λ) stay float32 parameters;
multiplied as they are, they would promote every ``(B, h, N, d)`` term to float32. Cast to the
terms' dtype instead, the sum stays in it and the coefficients' gradients reach them in their own.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["as_terms_dtype", "terms_dtype"]


def terms_dtype(*terms: Tensor) -> torch.dtype:
    """The promotion of ``terms``' dtypes; :func:`torch.promote_types`, a dispatched operation
    (a host cost on every call), only where they differ."""
    dtype = terms[0].dtype
    for term in terms[1:]:
        if term.dtype != dtype:
            dtype = torch.promote_types(dtype, term.dtype)
    return dtype


def as_terms_dtype(coefficient: Tensor, dtype: torch.dtype) -> Tensor:
    """``coefficient`` in ``dtype``, itself where it already is (no no-op cast dispatched)."""
    return coefficient if coefficient.dtype == dtype else coefficient.to(dtype)
