"""AGF: attentive graph filter in the singular-value domain (Wi et al.; METHODS.md §3).

Per head ``Y = (U ⊙ G)(Vsᵀ V)`` with ``U = ρq(Q)`` and ``Vs = ρk(K)`` Efficient Attention's feature
maps and ``G = Σ_k θ_k P_k(S)`` a token-specific polynomial filter of learned singular values
``S ∈ (0, 1)``. ``O(N·d²)`` time, ``O(N·d + d²)`` memory: nothing N×N is formed.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .efficient import efficient_feature_maps
from .fused import fused
from .masks import check_key_padding_mask, check_qkv
from .polynomials import polynomial_series

__all__ = [
    "agf",
    "agf_attend",
    "agf_coefficients",
    "agf_factors",
    "agf_filter",
    "agf_layer",
    "agf_orthogonality",
    "agf_response",
]


def agf_coefficients(p: Tensor) -> Tensor:
    """θ from its free parameters: ``θ_0 = 1`` (fixed), ``θ_k = tanh(p_k)``.

    With ``p = 0`` the filter is ``G = P_0 = 1`` and AGF is exactly Efficient Attention.

    Args:
        p: ``(K,)`` free parameters.

    Returns:
        ``(K+1,)``.
    """
    if p.dim() != 1:
        raise ValueError(f"p must have shape (K,); got {tuple(p.shape)}")
    return torch.cat([p.new_ones(1), torch.tanh(p)])


def agf_response(
    s: Tensor, theta: Tensor, *, basis: str = "jacobi", a: float = 1.0, b: float = 1.0
) -> Tensor:
    """The filter ``G = Σ_{k=0..K} θ_k P_k(s)``, elementwise.

    Also the filter's frequency response when ``s`` is a grid of singular values.

    Args:
        s: ``(...)`` singular values, in ``(0, 1)`` for AGF.
        theta: ``(K+1,)`` coefficients.
        basis: one of :data:`~filterformer.functional.polynomials.POLYNOMIAL_BASES`.
        a, b: Jacobi parameters (``basis="jacobi"`` only).

    Returns:
        ``(...)``, the shape of ``s``.
    """
    if theta.dim() != 1 or theta.numel() < 1:
        raise ValueError(f"theta must have shape (K+1,) with K >= 0; got {tuple(theta.shape)}")
    return polynomial_series(s, theta, basis, a, b)


def agf_attend(
    rho_q: Tensor, rho_k: Tensor, v: Tensor, g: Tensor, products_dtype: torch.dtype | None = None
) -> Tensor:
    """``(ρq ⊙ G)(ρkᵀ V)``, associated right to left so nothing N×N is formed.

    Args:
        rho_q: ``(B, h, N, d)`` U, rows summing to 1.
        rho_k: ``(B, h, S, d)`` Vs, columns summing to 1 over real tokens, 0 at padding.
        v: ``(B, h, S, d_v)`` values.
        g: ``(B, h, N, d)`` the token-specific filter.
        products_dtype: the dtype of the two matrix products (and of the result); ``ρq ⊙ G``
            is formed in the factors' dtype first. The factors' dtype when None.

    Returns:
        ``(B, h, N, d_v)``.
    """
    low = rho_q.dtype if products_dtype is None else products_dtype
    return (rho_q * g).to(low) @ (rho_k.to(low).transpose(-1, -2) @ v.to(low))


def agf(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    s: Tensor,
    theta: Tensor,
    *,
    basis: str = "jacobi",
    a: float = 1.0,
    b: float = 1.0,
    key_padding_mask: Tensor | None = None,
) -> Tensor:
    """AGF's per-head output ``(U ⊙ G)(Vsᵀ V)`` (METHODS.md §3).

    Args:
        q: ``(B, h, N, d)`` the U projection (queries).
        k: ``(B, h, S, d)`` the Vs projection (keys).
        v: ``(B, h, S, d_v)`` values.
        s: ``(B, h, N, d)`` singular values ``sigmoid(X W_Σ)``.
        theta: ``(K+1,)`` filter coefficients (see :func:`agf_coefficients`).
        basis, a, b: the polynomial basis (see :func:`agf_response`).
        key_padding_mask: ``(B, S)`` bool, True at real tokens; padded tokens get Vs = 0.

    Returns:
        ``(B, h, N, d_v)``.
    """
    check_qkv(q, k, v)
    if s.shape != q.shape:
        raise ValueError(f"s must have the shape of q {tuple(q.shape)}; got {tuple(s.shape)}")
    rho_q, rho_k = efficient_feature_maps(q, k, key_padding_mask)
    return agf_attend(rho_q, rho_k, v, agf_response(s, theta, basis=basis, a=a, b=b))


def agf_factors(
    q: Tensor,
    k: Tensor,
    singular_logits: Tensor,
    theta: Tensor,
    key_padding_mask: Tensor | None = None,
    *,
    basis: str = "jacobi",
    a: float = 1.0,
    b: float = 1.0,
) -> tuple[Tensor, Tensor, Tensor]:
    """U, Vs and G of an AGF layer, each ``(B, h, N, d)``, in float32 at least.

    Args:
        q, k: ``(B, h, N, d)`` the U and Vs projections.
        singular_logits: ``(B, h, N, d)`` ``X W_Σ`` before the sigmoid.
        theta: ``(K+1,)`` filter coefficients.
        key_padding_mask: ``(B, N)`` bool, True at real tokens.
        basis, a, b: the polynomial basis (see :func:`agf_response`).

    Returns:
        ``(rho_q, rho_k, g)``.
    """
    wide = torch.promote_types(q.dtype, torch.float32)
    rho_q, rho_k = efficient_feature_maps(q.to(wide), k.to(wide), key_padding_mask)
    s = torch.sigmoid(singular_logits.to(wide))
    return rho_q, rho_k, agf_response(s, theta.to(wide), basis=basis, a=a, b=b)


@fused
def agf_layer(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    singular_logits: Tensor,
    theta: Tensor,
    key_padding_mask: Tensor | None = None,
    *,
    basis: str = "jacobi",
    a: float = 1.0,
    b: float = 1.0,
    orthogonality: bool = True,
    products_dtype: torch.dtype | None = None,
) -> tuple[Tensor, Tensor | None]:
    """An AGF layer's whole filter, from the projections to the output and the regulariser.

    ``S = sigmoid(singular_logits)``, ``G = Σ_k θ_k P_k(S)``, ``(U ⊙ G)(Vsᵀ V)`` and, when
    ``orthogonality``, :func:`agf_orthogonality` of U and Vs. The feature maps and the filter are
    computed in float32 at least (float64 stays float64; softmax feature maps and polynomials of S
    lose too much in half precision), whatever the inputs' dtype; the matrix products reduce over
    the N tokens, and run in ``products_dtype`` where one is given (under autocast, its half
    precision: on a GPU, tensor cores instead of float32 arithmetic). On CUDA it runs as a fused
    region (:func:`~filterformer.functional.fused.fused`): the chain of elementwise operations
    becomes a few kernels around the ``d×d`` products.

    Args:
        q, k: ``(B, h, N, d)`` the U and Vs projections (queries, keys).
        v: ``(B, h, N, d_v)`` values.
        singular_logits: ``(B, h, N, d)`` ``X W_Σ`` split into heads, before the sigmoid.
        theta: ``(K+1,)`` filter coefficients (see :func:`agf_coefficients`).
        key_padding_mask: ``(B, N)`` bool, True at real tokens.
        basis, a, b: the polynomial basis (see :func:`agf_response`).
        orthogonality: whether to compute the regulariser.
        products_dtype: the dtype of the matrix products and of ``out`` (the wide dtype when
            None).

    Returns:
        ``(out, reg)``: ``(B, h, N, d_v)`` in ``products_dtype`` (else the wide dtype), and the
        regulariser (a scalar, float32 at least) or None.
    """
    rho_q, rho_k, g = agf_factors(
        q, k, singular_logits, theta, key_padding_mask, basis=basis, a=a, b=b
    )
    low = rho_q.dtype if products_dtype is None else products_dtype
    out = agf_attend(rho_q, rho_k, v, g, low)
    reg = None
    if orthogonality:
        reg = agf_orthogonality(rho_q.to(low), rho_k.to(low), key_padding_mask)
    return out, reg


def agf_orthogonality(
    rho_q: Tensor, rho_k: Tensor, padding_mask: Tensor | None = None
) -> Tensor:
    """The orthogonality regulariser ``mean|UᵀU − I| + mean|Vsᵀ Vs − I|`` (METHODS.md §3).

    Means over the d×d entries, batch and heads. Padded rows of U are left out (as Vs already is
    0 there), so the value does not depend on padding. Softmax rows/columns cannot be orthonormal:
    the minimum is above 0 and the term acts as a stabiliser.

    Args:
        rho_q: ``(B, h, N, d)`` U.
        rho_k: ``(B, h, N, d)`` Vs.
        padding_mask: ``(B, N)`` bool, True at real tokens.

    Returns:
        A scalar, in float32 at least.
    """
    mask = check_key_padding_mask(padding_mask, rho_q.shape[0], rho_q.shape[-2])
    if mask is not None:
        rho_q = rho_q * mask[:, None, :, None]
    # The products may run in half precision; the distance to I is taken in float32 at least.
    wide = torch.promote_types(rho_q.dtype, torch.float32)
    eye = torch.eye(rho_q.shape[-1], dtype=wide, device=rho_q.device)
    gram_u = (rho_q.transpose(-1, -2) @ rho_q).to(wide)
    gram_v = (rho_k.transpose(-1, -2) @ rho_k).to(wide)
    return (gram_u - eye).abs().mean() + (gram_v - eye).abs().mean()


def agf_filter(rho_q: Tensor, rho_k: Tensor, g: Tensor) -> Tensor:
    """The explicit N×S operator ``(U ⊙ G) Vsᵀ`` AGF applies to V.

    For diagnostics and references on small N only: this allocates the full matrix.

    Args:
        rho_q: ``(B, h, N, d)``.
        rho_k: ``(B, h, S, d)``.
        g: ``(B, h, N, d)``.

    Returns:
        ``(B, h, N, S)``.
    """
    return (rho_q * g) @ rho_k.transpose(-1, -2)
