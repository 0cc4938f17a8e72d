"""GFSA: graph-filter self-attention (Choi et al., NeurIPS 2024; METHODS.md §1).

``H̃ = w0·I + w1·Ā + wK·(Ā + (K−1)(Ā² − Ā))`` applied to V, per head. The default path never forms
an N×N matrix: ``Y1 = ĀV`` and ``Y2 = ĀY1 = Ā²V`` are two fused attention calls with the same mask.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
from torch import Tensor

from .attention import attend
from .efficient import efficient_feature_maps
from .masks import check_qkv

__all__ = [
    "GFSA_BASES",
    "attention_powers",
    "gfsa",
    "gfsa_combine",
    "gfsa_filter",
    "gfsa_response",
]

GFSA_BASES = ("softmax", "efficient")


def check_order(K: int) -> int:
    """Validate GFSA's order K (an integer ≥ 2)."""
    if isinstance(K, bool) or not isinstance(K, int) or K < 2:
        raise ValueError(f"K must be an integer >= 2 (the papers search 2..10); got {K!r}")
    return K


def _check_coefficients(w0: Tensor, w1: Tensor, wK: Tensor, heads: int) -> list[Tensor]:
    out = []
    for name, w in (("w0", w0), ("w1", w1), ("wK", wK)):
        w = torch.as_tensor(w)
        if w.shape != (heads,):
            raise ValueError(f"{name} must have shape (heads,) = ({heads},); got {tuple(w.shape)}")
        out.append(w.view(1, heads, 1, 1))
    return out


def gfsa_combine(
    values: Tensor,
    first_power: Tensor,
    last_power: Tensor,
    w0: Tensor,
    w1: Tensor,
    wK: Tensor,
    *,
    K: int,
    exact_power: bool = False,
) -> Tensor:
    """Mix the filter's terms: ``w0·V + w1·ĀV + wK·(ĀV + (K−1)(Ā²V − ĀV))``.

    Args:
        values: ``(B, h, N, d)``, V at the query positions.
        first_power: ``ĀV``, ``(B, h, N, d)``.
        last_power: ``Ā²V`` (Taylor form) or ``Ā^K V`` (``exact_power=True``).
        w0, w1, wK: ``(h,)`` coefficients.
        K: the filter order.
        exact_power: whether ``last_power`` already is ``Ā^K V``.

    Returns:
        ``(B, h, N, d)``.
    """
    w0, w1, wK = _check_coefficients(w0, w1, wK, values.shape[1])
    # Taylor form regrouped by term: w0·V + (w1 + (2−K)·wK)·ĀV + (K−1)·wK·Ā²V, two fused passes.
    first_weight, last_weight = (w1, wK) if exact_power else (w1 + (2 - K) * wK, (K - 1) * wK)
    out = torch.addcmul(w0 * values, first_weight, first_power)
    return torch.addcmul(out, last_weight, last_power)


def attention_powers(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    num_powers: int,
    *,
    attn_mask: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    extend: Callable[[int, Tensor], Tensor] | None = None,
) -> list[Tensor]:
    """``[ĀV, Ā²V, …, Ā^n V]`` at the query positions, by ``n`` chained fused attention calls.

    Masks apply to every call; ``Ā^n`` keeps them without re-masking since masked columns of
    ``Ā`` are 0.

    Args:
        q: ``(B, h, L, d)``; k: ``(B, h, S, d)``; v: ``(B, h, S, d_v)``.
        num_powers: n ≥ 1.
        extend: while decoding (L < S), ``extend(n, y)`` maps the new positions' ``Ā^n V`` to its
            values at all S key positions (the cached past followed by ``y``). Without it the
            problem must be square.

    Returns:
        n tensors of shape ``(B, h, L, d_v)``.
    """
    if extend is None and q.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"powers of Ā need as many queries as keys; got {q.shape[-2]} and {k.shape[-2]}"
        )
    powers, signal = [], v
    for n in range(1, num_powers + 1):
        power = attend(
            q, k, signal, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
            is_causal=is_causal, scale=scale,
        )
        powers.append(power)
        signal = power if extend is None or n == num_powers else extend(n, power)
    return powers


def efficient_attention_powers(
    q: Tensor, k: Tensor, v: Tensor, num_powers: int, key_padding_mask: Tensor | None = None
) -> list[Tensor]:
    """``[ĀV, …, Ā^n V]`` for Efficient Attention's ``Ā = ρq ρkᵀ`` in ``O(N·d²)`` each.

    ``Ā^n V = ρq (ρkᵀρq)^{n−1} (ρkᵀV)``: only ``d×d`` matrices between the two ends.
    """
    rho_q, rho_k = efficient_feature_maps(q, k, key_padding_mask)
    if rho_q.shape[-2] != rho_k.shape[-2]:
        raise ValueError("powers of Ā need as many queries as keys")
    mix = rho_k.transpose(-1, -2) @ rho_q  # (B, h, d, d)
    context = rho_k.transpose(-1, -2) @ v  # (B, h, d, d_v)
    powers = []
    for n in range(num_powers):
        if n:
            context = mix @ context
        powers.append(rho_q @ context)
    return powers


def gfsa(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    w0: Tensor,
    w1: Tensor,
    wK: Tensor,
    *,
    K: int,
    attn_mask: Tensor | None = None,
    is_causal: bool = False,
    exact_power: bool = False,
    base: Literal["softmax", "efficient"] = "softmax",
    key_padding_mask: Tensor | None = None,
    scale: float | None = None,
) -> Tensor:
    """Graph-filter self-attention ``H̃V`` (METHODS.md §1).

    Args:
        q, k, v: ``(B, h, N, d)`` (v may have its own last size).
        w0, w1, wK: ``(h,)`` filter coefficients per head.
        K: filter order, an integer ≥ 2.
        attn_mask: bool (True = attend) or additive float mask broadcastable to ``(B, h, N, N)``,
            as in :func:`torch.nn.functional.scaled_dot_product_attention`. With
            ``base="efficient"`` only key-padding masks (broadcastable from ``(B, 1, 1, N)``)
            are meaningful.
        is_causal: causal masking (softmax base only).
        exact_power: use the true ``Ā^K V`` (K chained calls) instead of the Taylor stand-in.
        base: ``"softmax"`` (two fused SDPA calls) or ``"efficient"`` (linear Efficient Attention).
        key_padding_mask: ``(B, N)`` bool, True at real tokens (an alternative to ``attn_mask``).
        scale: score scale for the softmax base; ``1/sqrt(d)`` when None.

    Returns:
        ``(B, h, N, d_v)``. Rows whose keys are all masked are 0.

    Raises:
        ValueError: on bad ranks or shapes, ``K < 2``, an unknown ``base`` or a causal request on
            the efficient base.
    """
    check_qkv(q, k, v)
    check_order(K)
    if base not in GFSA_BASES:
        raise ValueError(f"base must be one of {GFSA_BASES}; got {base!r}")
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(f"gfsa needs as many queries as keys; got {q.shape[-2]} and {k.shape[-2]}")
    num_powers = K if exact_power else 2
    if base == "efficient":
        if is_causal:
            raise ValueError("base='efficient' is non-causal only; use base='softmax' for causal")
        key_padding_mask = _efficient_padding(attn_mask, key_padding_mask, q.shape[0], q.shape[-2])
        powers = efficient_attention_powers(q, k, v, num_powers, key_padding_mask)
    else:
        powers = attention_powers(
            q, k, v, num_powers, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
            is_causal=is_causal, scale=scale,
        )
    return gfsa_combine(v, powers[0], powers[-1], w0, w1, wK, K=K, exact_power=exact_power)


def _efficient_padding(
    attn_mask: Tensor | None, key_padding_mask: Tensor | None, batch: int, length: int
) -> Tensor | None:
    """Read a key-padding mask out of an SDPA-style mask for the efficient base."""
    if attn_mask is None:
        return key_padding_mask
    if attn_mask.dim() != 4 or attn_mask.shape[1] != 1 or attn_mask.shape[2] != 1:
        raise ValueError(
            "with base='efficient', attn_mask must be a key-padding mask of shape (B, 1, 1, N); "
            f"got {tuple(attn_mask.shape)}"
        )
    real = attn_mask if attn_mask.dtype == torch.bool else ~torch.isneginf(attn_mask)
    real = real[:, 0, 0, :].expand(batch, length)
    return real if key_padding_mask is None else real & key_padding_mask


def gfsa_filter(
    attn: Tensor,
    w0: Tensor,
    w1: Tensor,
    wK: Tensor,
    *,
    K: int,
    exact_power: bool = False,
) -> Tensor:
    """The explicit filter matrix ``H̃`` from an explicit attention matrix.

    For diagnostics and as the tests' reference: this allocates N×N matrices.

    Args:
        attn: ``(B, h, N, N)`` attention matrix ``Ā``.
        w0, w1, wK: ``(h,)`` coefficients.
        K: filter order.
        exact_power: use ``Ā^K`` instead of the Taylor stand-in.

    Returns:
        ``(B, h, N, N)``.
    """
    if attn.dim() != 4 or attn.shape[-1] != attn.shape[-2]:
        raise ValueError(f"attn must have shape (B, h, N, N); got {tuple(attn.shape)}")
    check_order(K)
    w0, w1, wK = _check_coefficients(w0, w1, wK, attn.shape[1])
    eye = torch.eye(attn.shape[-1], dtype=attn.dtype, device=attn.device)
    if exact_power:
        high = torch.linalg.matrix_power(attn, K)
    else:
        high = attn + (K - 1) * (attn @ attn - attn)
    return w0 * eye + w1 * attn + wK * high


def gfsa_response(
    sigma: Tensor, w0: Tensor, w1: Tensor, wK: Tensor, *, K: int, exact_power: bool = False
) -> Tensor:
    """The learned filter's response ``g(σ) = w0 + w1σ + wK(σ + (K−1)(σ² − σ))``.

    Args:
        sigma: ``(M,)`` graph frequencies (eigen/singular values of Ā) in ``[0, 1]``.
        w0, w1, wK: ``(h,)`` coefficients.
        K: filter order.
        exact_power: the high-order term is ``σ^K`` itself (``exact_power=True`` layers).

    Returns:
        ``(h, M)``.
    """
    check_order(K)
    w0, w1, wK = (torch.as_tensor(w).reshape(-1, 1) for w in (w0, w1, wK))
    high = sigma**K if exact_power else sigma + (K - 1) * (sigma**2 - sigma)
    return w0 + w1 * sigma + wK * high
