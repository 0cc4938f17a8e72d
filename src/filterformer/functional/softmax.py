"""Scaled dot-product attention with explicit mask handling.

The single entry point through which every softmax-based kernel of the package attends, so that
mask semantics (padding, causal, decoding offsets, rows that see no key) live in one place.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.torch_version import TorchVersion

from ..checks import check_probability
from .masks import check_qkv, revive_dead_rows, sdpa_mask
from .sdpa_backends import decoding_kernels

__all__ = ["attend", "attention_matrix", "repeat_heads"]

#: Whether SDPA attends grouped keys and values itself (``enable_gqa``, torch 2.5), reading each
#: key/value head once instead of a copy per query head.
SDPA_GROUPS = TorchVersion(torch.__version__) >= (2, 5)


def repeat_heads(x: Tensor, heads: int) -> Tensor:
    """``(B, h_kv, S, d)`` -> ``(B, heads, S, d)``: each key/value head repeated for its group of
    ``heads / h_kv`` consecutive query heads (grouped-query attention); ``x`` itself when
    ``h_kv = heads``."""
    repeats = heads // x.shape[1]
    return x if repeats == 1 else x.repeat_interleave(repeats, dim=1)


def _fold_masks(
    q: Tensor,
    k: Tensor,
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    is_causal: bool,
    explicit_causal: bool = False,
    query_offset: int | None = None,
) -> tuple[Tensor | None, bool]:
    batch, heads, query_len, _ = q.shape
    return sdpa_mask(
        batch=batch,
        heads=heads,
        query_len=query_len,
        key_len=k.shape[-2],
        dtype=q.dtype,
        device=q.device,
        attn_mask=attn_mask,
        key_padding_mask=key_padding_mask,
        is_causal=is_causal,
        explicit_causal=explicit_causal,
        query_offset=query_offset,
    )


def _may_have_dead_rows(
    q: Tensor,
    k: Tensor,
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    query_offset: int | None,
) -> bool:
    """Whether a folded mask may leave a row without keys: a causal mask alone gives every query
    at a key position >= 0 its own key, so only other masks, or queries before the first key,
    can. Skipping the check saves a decoding step's few small kernels per call."""
    if attn_mask is not None or key_padding_mask is not None:
        return True
    offset = k.shape[-2] - q.shape[-2] if query_offset is None else query_offset
    return offset < 0


def _drop_unused_keys(
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    used: int,
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """k, v and the masks over the first ``used`` keys only: those after the last causal query
    (a bucketed decoding cache's unused positions) would only be masked."""
    if attn_mask is not None and attn_mask.shape[-1] != 1:
        attn_mask = attn_mask[..., :used]
    if key_padding_mask is not None:
        key_padding_mask = key_padding_mask[:, :used]
    return k[..., :used, :], v[..., :used, :], attn_mask, key_padding_mask


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    attn_mask: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    scale: float | None = None,
    query_offset: int | None = None,
) -> Tensor:
    """Softmax attention ``Ā V`` through the fused SDPA kernel; never materialises ``Ā``.

    Args:
        q: ``(B, h, L, d)`` queries.
        k: ``(B, h_k, S, d)`` keys.
        v: ``(B, h_v, S, d_v)`` values. ``h_k`` and ``h_v`` are h, or divisors of it
            (grouped-query attention, see :func:`repeat_heads`); when they are equal, SDPA reads
            the groups without copying them.
        attn_mask: bool (True = attend) or additive float mask broadcastable to ``(B, h, L, S)``.
        key_padding_mask: ``(B, S)`` bool, True at real tokens.
        is_causal: causal masking, aligned bottom-right when ``L < S`` (decoding with a cache).
        dropout_p: dropout on the attention probabilities, in ``[0, 1)``.
        scale: score scale; ``1/sqrt(d)`` when None.
        query_offset: with ``is_causal``, the key position of the first query (a bucketed
            decoding cache: keys after the last query's position are unused, and left out);
            ``S - L`` when None. A call with an offset is a step through a decoding cache (a
            prompt's included): its key length is new every token, so on CUDA it runs on the
            kernels that build nothing per shape
            (:func:`~filterformer.functional.sdpa_backends.decoding_kernels`).

    Returns:
        ``(B, h, L, d_v)``, the same as with k and v repeated to h heads. Rows in which every key
        is masked are exactly 0 (never NaN).

    Raises:
        ValueError: naming the argument: bad ranks or shapes, a bad mask, ``dropout_p`` outside
            ``[0, 1)``.
    """
    check_qkv(q, k, v, grouped=True)
    check_probability("dropout_p", dropout_p)
    decoding = is_causal and query_offset is not None
    if decoding and query_offset + q.shape[-2] < k.shape[-2]:
        k, v, attn_mask, key_padding_mask = _drop_unused_keys(
            k, v, attn_mask, key_padding_mask, query_offset + q.shape[-2]
        )
        query_offset = None  # the queries are now the last ones: SDPA's own alignment
    mask, is_causal = _fold_masks(
        q, k, attn_mask, key_padding_mask, is_causal, query_offset=query_offset
    )
    dead = None
    if mask is not None and _may_have_dead_rows(q, k, attn_mask, key_padding_mask, query_offset):
        mask, dead = revive_dead_rows(mask)
    heads = q.shape[1]
    grouped = {}
    if k.shape[1] != heads or v.shape[1] != heads:
        if SDPA_GROUPS and k.shape[1] == v.shape[1]:
            grouped["enable_gqa"] = True
        else:
            k, v = repeat_heads(k, heads), repeat_heads(v, heads)
    with decoding_kernels(q) if decoding else nullcontext():
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
            **grouped,
        )
    if dead is not None:
        out = out.masked_fill(dead, 0.0)
    return out


def attention_matrix(
    q: Tensor,
    k: Tensor,
    *,
    attn_mask: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
) -> Tensor:
    """The explicit row-stochastic ``Ā = softmax(QKᵀ·scale + mask)``, shape ``(B, h, L, S)``.

    For diagnostics and references on small N: this allocates the full matrix. Rows in which
    every key is masked are 0. Scores and softmax are computed in float32 at least (float64 stays
    float64) and ``Ā`` is returned in q's dtype: in float16, ``QKᵀ`` overflows to ``inf`` for
    large logits (and the softmax to NaN) where :func:`attend`'s fused kernels stay finite.

    Args:
        q: ``(B, h, L, d)`` queries.
        k: ``(B, h, S, d)`` keys.
        attn_mask: bool (True = attend) or additive float mask broadcastable to ``(B, h, L, S)``.
        key_padding_mask: ``(B, S)`` bool, True at real tokens.
        is_causal: causal masking, aligned bottom-right when ``L < S``.
        scale: score scale; ``1/sqrt(d)`` when None.

    Returns:
        ``(B, h, L, S)`` in q's dtype.
    """
    check_qkv(q, k, k)
    wide = torch.promote_types(q.dtype, torch.float32)
    qw, kw = q.to(wide), k.to(wide)
    mask, _ = _fold_masks(qw, kw, attn_mask, key_padding_mask, is_causal, explicit_causal=True)
    scores = (qw @ kw.transpose(-1, -2)) * (q.shape[-1] ** -0.5 if scale is None else scale)
    dead = None
    if mask is not None:
        mask, dead = revive_dead_rows(mask)
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask
    attn = scores.softmax(dim=-1)
    if dead is not None:
        attn = attn.masked_fill(dead, 0.0)
    return attn.to(q.dtype)
