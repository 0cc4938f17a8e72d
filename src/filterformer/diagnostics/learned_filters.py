"""The filters a model has learned, as responses over graph frequencies σ ∈ [0, 1].

GFSA's ``g(σ) = w0 + w1σ + wK(σ + (K−1)(σ² − σ))`` per head and layer (METHODS.md §1, the
paper's Fig. 7) and AGF's polynomial ``G(σ) = Σ_k θ_k P_k(σ)`` per layer (METHODS.md §3). Every
layer computes its own response (``filter_response(sigma)``); this module only finds the layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..checks import check_integer
from ..functional import agf_response

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
    check_integer("num_points", num_points, minimum=2)
    return torch.linspace(0.0, 1.0, num_points, dtype=dtype)


def _has_response(module: nn.Module, *coefficients: str) -> bool:
    """Whether ``module`` exposes ``filter_response`` and holds the tensors named."""
    return callable(getattr(module, "filter_response", None)) and all(
        isinstance(getattr(module, name, None), Tensor) for name in coefficients
    )


def _responses(model: nn.Module, num_points: int, *coefficients: str) -> list[LearnedFilter]:
    """Every submodule's ``filter_response`` on :func:`frequency_points`, where the submodule
    holds the ``coefficients`` that mark its kind of filter."""
    sigma = frequency_points(num_points)
    return [
        LearnedFilter(name=name, sigma=sigma, response=module.filter_response(sigma))
        for name, module in model.named_modules()
        if _has_response(module, *coefficients)
    ]


@torch.no_grad()
def gfsa_filter_responses(model: nn.Module, num_points: int = 101) -> list[LearnedFilter]:
    """``g(σ)`` of every GFSA layer of ``model``, in module order.

    A layer is any submodule with ``w0``, ``w1``, ``wK`` tensors of shape ``(h,)`` and a
    ``filter_response`` method (:class:`~filterformer.attention.GraphFilterAttention` and layers
    patched by :func:`filterformer.patching.patch` alike). With ``exact_power=True`` the
    high-order term is ``σ^K`` itself, not the Taylor stand-in.

    Args:
        model: any module.
        num_points: frequencies sampled in ``[0, 1]``.

    Returns:
        One :class:`LearnedFilter` per GFSA layer, ``response`` ``(h, M)``; empty when none.
    """
    return _responses(model, num_points, "w0", "w1", "wK")


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

    A layer is any submodule with a ``theta`` tensor and a ``filter_response`` method, as
    :class:`~filterformer.attention.AttentiveGraphFilterAttention` has.

    Args:
        model: any module.
        num_points: frequencies sampled in ``[0, 1]``.

    Returns:
        One :class:`LearnedFilter` per AGF layer, ``response`` ``(1, M)``; empty when none.
    """
    return _responses(model, num_points, "theta")
