"""Polynomial bases for spectral graph filters (AGF, METHODS.md §3; Appendix F of the AGF paper).

Every basis is evaluated elementwise by its three-term recursion and returned with the order as a
new last axis, so a filter ``g(x) = Σ_k θ_k P_k(x)`` is one matrix product with ``θ``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
from torch import Tensor

from ..checks import check_integer

__all__ = [
    "NAMED_JACOBI_PARAMETERS",
    "POLYNOMIAL_BASES",
    "chebyshev_basis",
    "check_jacobi_parameters",
    "jacobi_basis",
    "jacobi_step",
    "legendre_basis",
    "monomial_basis",
    "polynomial_basis",
    "polynomial_series",
]

#: Bases a spectral filter can be expanded in.
POLYNOMIAL_BASES = ("jacobi", "legendre", "chebyshev", "monomial")
#: The Jacobi parameters ``(a, b)`` each named Jacobi family fixes.
NAMED_JACOBI_PARAMETERS = {"legendre": (0.0, 0.0), "chebyshev": (-0.5, -0.5)}


def _check_order(K: int) -> int:
    check_integer("K", K, minimum=0, hint=" (the highest polynomial order)")
    return K


def check_jacobi_parameters(K: int, a: float, b: float) -> tuple[int, float, float]:
    """Validate ``(K, a, b)`` for the Jacobi recursion.

    The step to order k divides by ``k(k+a+b)(2k+a+b−2)``; a pair (a, b) for which that vanishes at
    some ``2 ≤ k ≤ K`` (e.g. ``a + b = −2``, or ``a + b = −3`` with K ≥ 3) has no recursion.

    Returns:
        ``(K, a, b)`` with a and b as floats.

    Raises:
        ValueError: naming K, a or b.
    """
    _check_order(K)
    for name, value in (("a", a), ("b", b)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
                value):
            raise ValueError(f"{name} must be a finite real number; got {value!r}")
    a, b = float(a), float(b)
    for k in range(2, K + 1):
        for factor in (k + a + b, 2 * k + a + b - 2):
            if abs(factor) < 1e-12:
                raise ValueError(
                    f"the Jacobi recursion with a={a}, b={b} divides by zero at order k={k} "
                    f"(k + a + b or 2k + a + b − 2 vanishes); choose a, b with a + b > −2 "
                    f"(e.g. legendre a=b=0, chebyshev a=b=−0.5) or K < {k}"
                )
    return K, a, b


def jacobi_step(k: int, a: float, b: float) -> tuple[float, float, float]:
    """``(w_k, w'_k, w''_k)`` of the Jacobi recursion ``P_k = (w_k x + w'_k) P_{k−1} − w''_k
    P_{k−2}`` (see :func:`jacobi_basis`); for k = 1, ``P_1 = (a−b)/2 + (a+b+2)/2·x`` as
    ``((a+b+2)/2, (a−b)/2, 0)``. Parameters already checked."""
    if k == 1:
        return (a + b + 2) / 2, (a - b) / 2, 0.0
    s = 2 * k + a + b
    return (
        s * (s - 1) / (2 * k * (k + a + b)),
        (s - 1) * (a * a - b * b) / (2 * k * (k + a + b) * (s - 2)),
        (k + a - 1) * (k + b - 1) * s / (k * (k + a + b) * (s - 2)),
    )


def _jacobi_terms(x: Tensor, K: int, a: float, b: float) -> Iterator[Tensor]:
    """Yield ``P_0(x) .. P_K(x)`` one at a time, holding only the last two (parameters checked)."""
    previous, current = None, torch.ones_like(x)
    yield current
    if K >= 1:
        w, w_shift, _ = jacobi_step(1, a, b)
        previous, current = current, w_shift + w * x
        yield current
    for k in range(2, K + 1):
        w, w_shift, w_prev = jacobi_step(k, a, b)
        previous, current = current, (w * x + w_shift) * current - w_prev * previous
        yield current


def _monomial_terms(x: Tensor, K: int) -> Iterator[Tensor]:
    """Yield ``1, x, …, x^K`` one at a time."""
    current = torch.ones_like(x)
    yield current
    for _ in range(K):
        current = current * x
        yield current


def _basis_terms(x: Tensor, K: int, basis: str, a: float, b: float) -> Iterator[Tensor]:
    """Yield the terms of the basis named ``basis``, after checking every argument."""
    if basis not in POLYNOMIAL_BASES:
        raise ValueError(f"basis must be one of {POLYNOMIAL_BASES}; got {basis!r}")
    if basis == "monomial":
        return _monomial_terms(x, _check_order(K))
    a, b = NAMED_JACOBI_PARAMETERS.get(basis, (a, b))
    return _jacobi_terms(x, *check_jacobi_parameters(K, a, b))


def jacobi_basis(x: Tensor, K: int, a: float = 1.0, b: float = 1.0) -> Tensor:
    """Jacobi polynomials ``P_0^{(a,b)}(x) .. P_K^{(a,b)}(x)`` (METHODS.md §3).

    ``P_0 = 1``, ``P_1 = (a−b)/2 + (a+b+2)/2·x`` and for k ≥ 2
    ``P_k = (w_k x + w'_k) P_{k−1} − w''_k P_{k−2}`` with
    ``w_k = (2k+a+b)(2k+a+b−1) / (2k(k+a+b))``,
    ``w'_k = (2k+a+b−1)(a²−b²) / (2k(k+a+b)(2k+a+b−2))``,
    ``w''_k = (k+a−1)(k+b−1)(2k+a+b) / (k(k+a+b)(2k+a+b−2))``.
    (The AGF paper prints ``2k+a+b+1`` in ``w_k``; the standard normalisation, that of
    ``scipy.special.eval_jacobi``, has ``2k+a+b−1``.)

    Args:
        x: ``(...)`` points, any shape.
        K: the highest order (≥ 0).
        a, b: the Jacobi parameters α, β.

    Returns:
        ``(..., K+1)``: entry k is ``P_k(x)``.

    Raises:
        ValueError: if K is not a non-negative integer or the recursion divides by zero.
    """
    K, a, b = check_jacobi_parameters(K, a, b)
    return torch.stack(list(_jacobi_terms(x, K, a, b)), dim=-1)


def legendre_basis(x: Tensor, K: int) -> Tensor:
    """Legendre polynomials ``P_0 .. P_K``: Jacobi with ``a = b = 0``. Returns ``(..., K+1)``."""
    return jacobi_basis(x, K, *NAMED_JACOBI_PARAMETERS["legendre"])


def chebyshev_basis(x: Tensor, K: int) -> Tensor:
    """Jacobi polynomials with ``a = b = −½``: Chebyshev ``T_k`` up to the standard scaling.

    ``P_k^{(−½,−½)} = T_k · C(2k, k) / 4^k``; the constant per order is absorbed by the learned
    coefficient, and this scaling keeps the family on the Jacobi recursion. Returns ``(..., K+1)``.
    """
    return jacobi_basis(x, K, *NAMED_JACOBI_PARAMETERS["chebyshev"])


def monomial_basis(x: Tensor, K: int) -> Tensor:
    """Monomials ``1, x, …, x^K`` (the non-orthogonal baseline basis). Returns ``(..., K+1)``."""
    _check_order(K)
    return torch.stack(list(_monomial_terms(x, K)), dim=-1)


def polynomial_basis(
    x: Tensor, K: int, basis: str = "jacobi", a: float = 1.0, b: float = 1.0
) -> Tensor:
    """The basis named ``basis`` (one of :data:`POLYNOMIAL_BASES`) at ``x``.

    Args:
        x: ``(...)`` points.
        K: the highest order.
        basis: ``"jacobi"``, ``"legendre"``, ``"chebyshev"`` or ``"monomial"``.
        a, b: Jacobi parameters, used by ``"jacobi"`` only.

    Returns:
        ``(..., K+1)``.
    """
    return torch.stack(list(_basis_terms(x, K, basis, a, b)), dim=-1)


def polynomial_series(
    x: Tensor, coefficients: Tensor, basis: str = "jacobi", a: float = 1.0, b: float = 1.0
) -> Tensor:
    """``Σ_k c_k P_k(x)`` elementwise, accumulated along the recursion.

    Equal to ``polynomial_basis(x, K, basis, a, b) @ coefficients`` but never holds the
    ``(..., K+1)`` stack: memory stays a few copies of ``x`` whatever K is.

    Args:
        x: ``(...)`` points.
        coefficients: ``(K+1,)`` one per order.
        basis, a, b: as in :func:`polynomial_basis`.

    Returns:
        ``(...)``, the shape of ``x``.
    """
    if coefficients.dim() != 1 or coefficients.numel() < 1:
        raise ValueError(
            f"coefficients must have shape (K+1,) with K >= 0; got {tuple(coefficients.shape)}"
        )
    coefficients = coefficients.to(x.dtype)
    terms = _basis_terms(x, coefficients.numel() - 1, basis, a, b)
    total = coefficients[0] * next(terms)
    for k, term in enumerate(terms, start=1):
        total = total + coefficients[k] * term
    return total
