"""GFSA: graph-filter self-attention (Choi et al., NeurIPS 2024; METHODS.md §1).

``H̃ = w0·I + w1·Ā + wK·(Ā + (K−1)(Ā² − Ā))`` applied to V, per head. The default path never forms
an N×N matrix: ``Y1 = ĀV`` and ``Y2 = ĀY1 = Ā²V`` are two fused attention calls with the same mask.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

from ..checks import check_integer, check_probability
from .coefficient_dtype import as_terms_dtype, terms_dtype
from .efficient import efficient_feature_maps
from .fused import fused
from .gfsa_triton import SWITCH, gfsa_triton_applies, gfsa_triton_combine
from .masks import check_qkv, key_padding_from_attn_mask
from .softmax import attend, repeat_heads

__all__ = [
    "GFSA_BASES",
    "PastPowers",
    "attention_powers",
    "gfsa",
    "gfsa_combine",
    "gfsa_filter",
    "gfsa_response",
]

GFSA_BASES = ("softmax", "efficient")


class PastPowers(Protocol):
    """What decoding keeps of GFSA's signals at past positions (a layer's decoding cache).

    ``Ā^{n+1}V`` at a new position mixes ``Ā^n V`` at every position before it, which causality
    makes final once computed.
    """

    def append_power(self, n: int, power: Tensor) -> Tensor:
        """Append the new positions' ``Ā^n V``; return ``Ā^n V`` at every key position."""
        ...


def check_order(K: int) -> int:
    """Validate GFSA's order K (an integer ≥ 2)."""
    return check_integer("K", K, minimum=2, hint=" (the papers search 2..10)")


def _check_coefficients(w0: Tensor, w1: Tensor, wK: Tensor, heads: int) -> list[Tensor]:
    out = []
    for name, w in (("w0", w0), ("w1", w1), ("wK", wK)):
        # A tensor as it is: as_tensor of a parameter under inference mode dispatches a `to`.
        w = w if isinstance(w, Tensor) else torch.as_tensor(w)
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

    The sum is formed in the terms' dtype (the promotion of ``values``, ``first_power`` and
    ``last_power``'s), the coefficients cast to it: under autocast the attention passes return
    half precision, and so does the filter, as softmax attention does, with no float32 copy of
    its ``(B, h, N, d)`` terms in the forward or the backward. The coefficients' gradients reach
    them in their own dtype. On CUDA the mix is one Triton kernel forward and one backward where
    :func:`~filterformer.functional.gfsa_triton.gfsa_triton_applies` (it sums in float32 and
    rounds once), else eager operations or, on large CUDA inputs without Triton, a compiled
    region.

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
    dtype = terms_dtype(values, first_power, last_power)
    # Taylor form regrouped by term: w0·V + (w1 + (2−K)·wK)·ĀV + (K−1)·wK·Ā²V, two fused passes.
    first_factor, last_factor = (0, 1) if exact_power else (2 - K, K - 1)
    terms = (values, first_power, last_power)
    if gfsa_triton_applies(*terms, w0, w1, wK):
        return SWITCH.run(
            lambda: gfsa_triton_combine(*terms, w0.view(-1), w1.view(-1), wK.view(-1),
                                        first_factor, last_factor, dtype),
            lambda: _mix_terms(*terms, w0, w1, wK, first_factor, last_factor, dtype),
        )
    return _mix_terms(*terms, w0, w1, wK, first_factor, last_factor, dtype)


#: GFSA's combination is three elementwise terms: fusing them saves less GPU time than a
#: compiled call costs the host until inputs are large (at B=4, h=16, N=1024, d=64, 4M
#: elements, an H100's GFSA step waited on the host: 0.58 ms of GPU time, 2.13 ms of wall time).
#: Where Triton's kernels run (:mod:`~filterformer.functional.gfsa_triton`) they take its place.
@fused(min_elements=2**23)
def _mix_terms(
    values: Tensor, first: Tensor, last: Tensor, w0: Tensor, w1: Tensor, wK: Tensor,
    first_factor: int, last_factor: int, dtype: torch.dtype,
) -> Tensor:
    """:func:`gfsa_combine` after its checks: ``w0·V + (w1 + first_factor·wK)·first +
    last_factor·wK·last``, coefficients ``(1, h, 1, 1)`` combined in their own dtype and cast
    to ``dtype``, the terms'. One fused region on CUDA: the coefficients' arithmetic and the
    three terms become one kernel (two backward)."""
    # The constant factors ride on the operations (add's alpha, addcmul's value): forming the
    # weights is one operation, or none without a first factor (each a host cost on short
    # inputs).
    first_weight = w1 if first_factor == 0 else torch.add(w1, wK, alpha=first_factor)
    w0, first_weight, wK = (as_terms_dtype(w, dtype) for w in (w0, first_weight, wK))
    out = torch.addcmul(w0 * values, first_weight, first)
    return torch.addcmul(out, wK, last, value=last_factor)


def mix_terms_eagerly(
    values: Tensor, first: Tensor, last: Tensor, w0: Tensor, w1: Tensor, wK: Tensor,
    first_factor: float, last_factor: float, dtype: torch.dtype,
) -> Tensor:
    """The eager combination with ``(h,)`` coefficients: the reference of (and the ``create_graph``
    backward through) :func:`~filterformer.functional.gfsa_triton.gfsa_triton_combine`, whose
    arguments it takes."""
    w0, w1, wK = (w.view(1, -1, 1, 1) for w in (w0, w1, wK))
    return _mix_terms.eager(values, first, last, w0, w1, wK, first_factor, last_factor, dtype)


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
    query_offset: int | None = None,
) -> list[Tensor]:
    """``[ĀV, Ā²V, …, Ā^n V]`` at the query positions, by ``n`` chained fused attention calls.

    Masks apply to every call; ``Ā^n`` keeps them without re-masking since masked columns of
    ``Ā`` are 0.

    Args:
        q: ``(B, h, L, d)``; k: ``(B, h_kv, S, d)``; v: ``(B, h_kv, S, d_v)``, where h_kv is h or
            a divisor of it (grouped-query attention, as in :func:`attend`).
        num_powers: n ≥ 1.
        extend: while decoding (L < S), ``extend(n, y)`` maps the new positions' ``Ā^n V`` to its
            values at all S key positions (the cached past followed by ``y``). Without it the
            problem must be square.
        query_offset: the key position of the first query, as in :func:`attend`.

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
            is_causal=is_causal, scale=scale, query_offset=query_offset,
        )
        powers.append(power)
        if n < num_powers:
            signal = power if extend is None else extend(n, power)
            # Later signals differ per query head: grouped keys are repeated once for them all.
            k = repeat_heads(k, q.shape[1])
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
    dropout_p: float = 0.0,
    past: PastPowers | None = None,
    query_offset: int | None = None,
) -> Tensor:
    """Graph-filter self-attention ``H̃V`` (METHODS.md §1): the one implementation of GFSA.

    The native module, patched Hugging Face and timm models and the benchmarks all call it.

    Args:
        q: ``(B, h, L, d)`` queries; ``L = S`` except while decoding with ``past``.
        k: ``(B, h_kv, S, d)`` keys; v: ``(B, h_kv, S, d_v)`` values (past positions first);
            h_kv is h or a divisor of it (grouped-query attention, as in
            :func:`~filterformer.functional.attend`).
        w0, w1, wK: ``(h,)`` filter coefficients per head.
        K: filter order, an integer ≥ 2.
        attn_mask: bool (True = attend) or additive float mask broadcastable to ``(B, h, L, S)``,
            as in :func:`torch.nn.functional.scaled_dot_product_attention`; float entries at or
            below :data:`~filterformer.functional.masks.MASKED_SCORE` mask like ``-inf``. With
            ``base="efficient"`` it must be a key-padding mask, broadcastable to ``(B, 1, 1, S)``.
        is_causal: causal masking (softmax base only), aligned bottom-right when ``L < S``.
        exact_power: use the true ``Ā^K V`` (K chained calls) instead of the Taylor stand-in.
        base: ``"softmax"`` (fused SDPA calls) or ``"efficient"`` (linear Efficient Attention).
        key_padding_mask: ``(B, S)`` bool, True at real tokens (an alternative to ``attn_mask``).
        scale: score scale for the softmax base; ``1/sqrt(d)`` when None.
        dropout_p: dropout on the filtered output, in ``[0, 1)`` (two fused calls cannot share
            dropped probabilities); pass 0 in evaluation.
        past: while decoding (``L < S``), the layer's cache of ``Ā^n V`` at the past positions,
            which this call extends with the new ones.
        query_offset: while decoding, the key position of the first query (``S - L`` when
            None): a bucketed cache passes its unused positions after the new ones, masked.

    Returns:
        ``(B, h, L, d_v)``. A row whose keys are all masked has ``Ā = 0``, so it is ``w0·V``.

    Raises:
        ValueError: on bad ranks or shapes, ``K < 2``, an unknown ``base``, fewer queries than
            keys without ``past``, a causal, decoding or per-query mask on the efficient base,
            or ``dropout_p`` outside ``[0, 1)``.
    """
    check_qkv(q, k, v, grouped=True)
    check_order(K)
    check_probability("dropout_p", dropout_p)
    if base not in GFSA_BASES:
        raise ValueError(f"base must be one of {GFSA_BASES}; got {base!r}")
    query_len, key_len = q.shape[-2], k.shape[-2]
    if past is None and query_len != key_len:
        raise ValueError(
            f"gfsa needs as many queries as keys, or the past positions' powers (past=) while "
            f"decoding; got {query_len} queries and {key_len} keys"
        )
    num_powers = K if exact_power else 2
    if base == "efficient":
        if is_causal or past is not None or query_offset is not None:
            raise ValueError("base='efficient' is non-causal only; use base='softmax' for causal")
        if attn_mask is not None:
            padding = key_padding_from_attn_mask(attn_mask, q.shape[0], key_len)
            key_padding_mask = padding if key_padding_mask is None else padding & key_padding_mask
        heads = q.shape[1]
        powers = efficient_attention_powers(
            q, repeat_heads(k, heads), repeat_heads(v, heads), num_powers, key_padding_mask
        )
    else:
        extend = None if past is None else past.append_power
        powers = attention_powers(
            q, k, v, num_powers, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
            is_causal=is_causal, scale=scale, extend=extend, query_offset=query_offset,
        )
    start = key_len - query_len if query_offset is None else query_offset
    if start or query_len != key_len:  # decoding: V at the query positions only
        v = v[..., start : start + query_len, :]
    values = repeat_heads(v, q.shape[1])
    out = gfsa_combine(values, powers[0], powers[-1], w0, w1, wK, K=K, exact_power=exact_power)
    return F.dropout(out, dropout_p) if dropout_p > 0 else out


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
