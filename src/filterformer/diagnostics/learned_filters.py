"""The filters a model has learned, as responses over graph frequencies σ ∈ [0, 1].

GFSA's ``g(σ) = w0 + w1σ + wK(σ + (K−1)(σ² − σ))`` per head and layer (METHODS.md §1, the
paper's Fig. 7) and AGF's polynomial ``G(σ) = Σ_k θ_k P_k(σ)`` per layer (METHODS.md §3).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..functional import POLYNOMIAL_BASES, agf_response, gfsa_response

__all__ = [
    "LearnedFilter",
    "agf_filter_responses",
    "agf_polynomial_responses",
    "frequency_points",
    "gfsa_filter_responses",
]


@dataclass
class LearnedFilter:
    """One layer's learned filter.

    Attributes:
        name: the module's qualified name in the model.
        sigma: ``(M,)`` graph frequencies in ``[0, 1]``.
        response: ``(h, M)`` one curve per head (``(1, M)`` for a filter shared by heads).
    """

    name: str
    sigma: Tensor
    response: Tensor


def frequency_points(num_points: int = 101, dtype: torch.dtype = torch.float64) -> Tensor:
    """``num_points`` evenly spaced graph frequencies from 0 to 1, ``(M,)``."""
    if isinstance(num_points, bool) or not isinstance(num_points, int) or num_points < 2:
        raise ValueError(f"num_points must be an integer >= 2; got {num_points!r}")
    return torch.linspace(0.0, 1.0, num_points, dtype=dtype)


def _gfsa_order(module: nn.Module) -> int | None:
    """K of a GFSA layer: its own ``K``, or its patch's (a patched Hugging Face module keeps the
    coefficients and reads K from the patch request); None for any other module."""
    coefficients = (getattr(module, name, None) for name in ("w0", "w1", "wK"))
    if not all(isinstance(w, Tensor) for w in coefficients):
        return None
    order = getattr(module, "K", None)
    if order is None:
        order = getattr(getattr(getattr(module, "state", None), "spec", None), "K", None)
    return order if isinstance(order, int) else None


def _is_agf(module: nn.Module) -> bool:
    return getattr(module, "basis", None) in POLYNOMIAL_BASES and isinstance(
        getattr(module, "theta", None), Tensor
    )


@torch.no_grad()
def gfsa_filter_responses(model: nn.Module, num_points: int = 101) -> list[LearnedFilter]:
    """``g(σ)`` of every GFSA layer of ``model``, in module order.

    A layer is any submodule with ``w0``, ``w1``, ``wK`` tensors of shape ``(h,)`` and an
    integer ``K`` of its own or of its patch (:class:`~filterformer.attention.GraphFilterAttention`
    and layers patched by :func:`filterformer.patching.patch` alike). With ``exact_power=True``
    the high-order term is ``σ^K`` itself, not the Taylor stand-in.

    Args:
        model: any module.
        num_points: frequencies sampled in ``[0, 1]``.

    Returns:
        One :class:`LearnedFilter` per GFSA layer, ``response`` ``(h, M)``; empty when none.
    """
    sigma = frequency_points(num_points)
    curves = []
    for name, module in model.named_modules():
        order = _gfsa_order(module)
        if order is None:
            continue
        w0, w1, wK = (getattr(module, n).detach().double().cpu() for n in ("w0", "w1", "wK"))
        exact = bool(getattr(module, "exact_power", False))
        response = gfsa_response(sigma, w0, w1, wK, K=order, exact_power=exact)
        curves.append(LearnedFilter(name=name, sigma=sigma, response=response))
    return curves


def agf_polynomial_responses(
    theta: Tensor, basis: str = "jacobi", a: float = 1.0, b: float = 1.0, num_points: int = 101
) -> tuple[Tensor, Tensor]:
    """AGF's learned filters ``G(σ) = Σ_k θ_k P_k(σ)`` on a grid of singular values.

    Args:
        theta: ``(K+1,)`` coefficients, ``θ_0`` first, or ``(L, K+1)`` for L layers.
        basis: one of ``jacobi``, ``legendre``, ``chebyshev``, ``monomial``.
        a, b: Jacobi parameters (``basis="jacobi"`` only).
        num_points: frequencies sampled in ``[0, 1]``.

    Returns:
        ``(sigma, response)``: ``(M,)`` and ``(L, M)`` (``L = 1`` for a single ``theta``).
    """
    theta = torch.as_tensor(theta, dtype=torch.float64)
    if theta.dim() not in (1, 2):
        raise ValueError(f"theta must have shape (K+1,) or (L, K+1); got {tuple(theta.shape)}")
    sigma = frequency_points(num_points)
    rows = theta.reshape(-1, theta.shape[-1])
    response = torch.stack([agf_response(sigma, row, basis=basis, a=a, b=b) for row in rows])
    return sigma, response


@torch.no_grad()
def agf_filter_responses(model: nn.Module, num_points: int = 101) -> list[LearnedFilter]:
    """``G(σ)`` of every AGF layer of ``model`` (one curve per layer: heads share θ).

    A layer is any submodule with a ``theta`` tensor and a ``basis`` name (with ``a``, ``b``),
    as :class:`~filterformer.attention.AttentiveGraphFilterAttention` has.

    Returns:
        One :class:`LearnedFilter` per AGF layer, ``response`` ``(1, M)``; empty when none.
    """
    curves = []
    for name, module in model.named_modules():
        if _is_agf(module):
            sigma, response = agf_polynomial_responses(
                module.theta.detach().cpu(), module.basis, getattr(module, "a", 1.0),
                getattr(module, "b", 1.0), num_points,
            )
            curves.append(LearnedFilter(name=name, sigma=sigma, response=response))
    return curves
