"""Attention masks: validation, combination and the rows that can see no key.

Conventions follow :func:`torch.nn.functional.scaled_dot_product_attention`: a boolean mask is True
where a query may attend to a key, a float mask is added to the scores. Key-padding masks are
boolean ``(B, S)`` with True at real tokens.

Every path reads a float mask the same way: an entry at or below :data:`MASKED_SCORE` masks its key
exactly as ``-inf`` and ``False`` do (Hugging Face writes masks with ``-1e4``, ``-1e9`` or
``finfo(dtype).min``), and a row that sees no key gives 0.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "MASKED_SCORE",
    "causal_mask",
    "check_key_padding_mask",
    "check_qkv",
    "combine_masks",
    "key_padding_from_attn_mask",
    "key_padding_to_attn_mask",
    "masked_entries",
    "pad_keys",
    "sdpa_mask",
]

#: A float mask entry at or below this masks its key, like ``-inf``: beside any attended key its
#: weight ``exp(score)`` underflows to 0 in every floating dtype.
MASKED_SCORE = -1.0e4


def check_qkv(q: Tensor, k: Tensor, v: Tensor, *, grouped: bool = False) -> None:
    """Check that q, k, v are ``(B, h, L, d)``, ``(B, h, S, d)``, ``(B, h, S, d_v)``.

    With ``grouped``, k and v may instead have fewer heads than q, each a divisor of h
    (grouped-query attention: a key/value head serves a group of consecutive query heads).

    Raises:
        ValueError: naming the argument whose rank or shape is wrong.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"{name} must have shape (B, heads, N, head_dim); got rank {t.dim()}")
    (batch, heads, _, _), k_heads, v_heads = q.shape, k.shape[1], v.shape[1]
    if grouped:
        shared = (
            batch == k.shape[0] == v.shape[0]
            and k_heads > 0 and heads % k_heads == 0
            and v_heads > 0 and heads % v_heads == 0
        )
    else:
        shared = batch == k.shape[0] == v.shape[0] and heads == k_heads == v_heads
    if not shared:
        what = "a batch size, and k's and v's heads must divide q's" if grouped else (
            "batch and head sizes"
        )
        raise ValueError(
            f"q, k, v must share {what}; got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share head_dim; got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same length; got {k.shape[-2]} and {v.shape[-2]}")


def check_key_padding_mask(mask: Tensor | None, batch: int, length: int) -> Tensor | None:
    """Validate a ``(B, S)`` key-padding mask (True = real token) and return it as bool."""
    if mask is None:
        return None
    if mask.dim() != 2 or mask.shape[0] != batch or mask.shape[1] != length:
        raise ValueError(
            f"padding mask must have shape (batch, seq_len) = ({batch}, {length}); "
            f"got {tuple(mask.shape)}"
        )
    if mask.dtype != torch.bool:
        raise ValueError(f"padding mask must be bool (True = real token); got {mask.dtype}")
    return mask


def key_padding_to_attn_mask(key_padding_mask: Tensor) -> Tensor:
    """``(B, S)`` key-padding mask -> ``(B, 1, 1, S)`` boolean attention mask."""
    return key_padding_mask[:, None, None, :]


def causal_mask(
    query_len: int,
    key_len: int,
    device: torch.device | None = None,
    *,
    query_offset: int | None = None,
) -> Tensor:
    """Boolean ``(L, S)`` causal mask: query i sits at key position ``query_offset + i``.

    By default the queries are the last L positions (aligned bottom-right, ``query_offset =
    S - L``): a block of new queries decoded after a cache of ``S - L`` past keys sees every past
    key and the new keys up to itself. A bucketed decoding cache passes its keys with unused
    positions after the new ones, and the offset at which the new ones were written: the unused
    positions come after every query, so this mask hides them too.
    """
    offset = key_len - query_len if query_offset is None else query_offset
    keys = torch.arange(key_len, device=device)
    if query_len == 1:  # one decoded token: a single comparison
        return (keys <= offset)[None, :]
    rows = torch.arange(query_len, device=device)[:, None] + offset
    return keys[None, :] <= rows


def pad_keys(mask: Tensor | None, real_len: int, key_len: int, *, name: str) -> Tensor | None:
    """Extend a mask over ``real_len`` keys to ``key_len`` keys, the added ones masked (False, or
    ``-inf`` in a float mask): the unused positions of a bucketed decoding cache.

    Args:
        mask: ``(..., real_len)``, or ``(..., 1)`` broadcast over the keys (returned as it is),
            or None.
        real_len: the keys the mask covers (the positions the cache holds).
        key_len: the keys attended over, ``>= real_len``.
        name: the argument the mask came from, for the error.

    Raises:
        ValueError: naming ``name`` when the mask covers neither ``real_len`` keys nor one.
    """
    if mask is None or key_len == real_len:
        return mask
    if mask.shape[-1] == 1 != real_len:  # broadcast over the keys
        return mask
    if mask.shape[-1] != real_len:
        raise ValueError(
            f"{name} must cover the {real_len} keys held so far (the decoding cache's past and "
            f"the new positions); got shape {tuple(mask.shape)}"
        )
    fill = False if mask.dtype == torch.bool else float("-inf")
    return F.pad(mask, (0, key_len - real_len), value=fill)


def _check_attn_mask(attn_mask: Tensor, batch: int, heads: int, query_len: int, key_len: int):
    target = (batch, heads, query_len, key_len)
    if attn_mask.dim() > 4:
        raise ValueError(f"attn_mask must broadcast to (B, h, L, S) = {target}; got rank > 4")
    shape = (1,) * (4 - attn_mask.dim()) + tuple(attn_mask.shape)
    if any(s not in (1, t) for s, t in zip(shape, target, strict=True)):
        raise ValueError(
            f"attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to (B, h, L, S) = "
            f"{target}"
        )
    if attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
        raise ValueError(f"attn_mask must be bool or floating point; got {attn_mask.dtype}")
    attn_mask = attn_mask.reshape(shape)
    if attn_mask.dtype == torch.bool:
        return attn_mask
    return attn_mask.masked_fill(attn_mask <= MASKED_SCORE, float("-inf"))


def masked_entries(attn_mask: Tensor) -> Tensor:
    """Where an SDPA-style mask forbids attending: ``False``, or a float ``<= MASKED_SCORE``."""
    if attn_mask.dtype == torch.bool:
        return ~attn_mask
    return attn_mask <= MASKED_SCORE


def key_padding_from_attn_mask(
    attn_mask: Tensor, batch: int, key_len: int, *, method: str = "this method"
) -> Tensor:
    """The ``(B, S)`` key-padding mask (True = real) that an SDPA-style padding mask holds.

    For methods that take no per-query mask (Efficient Attention, AGF, SAMSA): ``attn_mask`` must
    broadcast to ``(B, 1, 1, S)`` (a mask that depends on the head or the query is refused).

    Raises:
        ValueError: naming ``attn_mask`` and the shape it must have.
    """
    try:
        mask = _check_attn_mask(attn_mask, batch, 1, 1, key_len)
    except ValueError as error:
        raise ValueError(
            f"{method} masks only keys: pass a padding_mask (B, S), or an attn_mask that "
            f"broadcasts to (B, 1, 1, S) = ({batch}, 1, 1, {key_len}); got attn_mask of shape "
            f"{tuple(attn_mask.shape)} ({error})"
        ) from None
    return ~masked_entries(mask)[:, 0, 0, :].expand(batch, key_len)


def combine_masks(a: Tensor | None, b: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """Combine two SDPA-style masks: boolean AND, or additive sum if either is a float mask."""
    if a is None or b is None:
        return a if b is None else b
    if a.dtype == torch.bool and b.dtype == torch.bool:
        return a & b

    def additive(m: Tensor) -> Tensor:
        if m.dtype != torch.bool:
            return m.to(dtype)
        return torch.zeros((), dtype=dtype, device=m.device).masked_fill(~m, float("-inf"))

    return additive(a) + additive(b)


def sdpa_mask(
    *,
    batch: int,
    heads: int,
    query_len: int,
    key_len: int,
    dtype: torch.dtype,
    device: torch.device,
    attn_mask: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
    is_causal: bool = False,
    explicit_causal: bool = False,
    query_offset: int | None = None,
) -> tuple[Tensor | None, bool]:
    """Fold every mask into what SDPA takes: ``(attn_mask or None, is_causal)``.

    A causal request alone on a square problem stays a flag (so fused kernels keep their fast
    path); with other masks, with fewer queries than keys (decoding), or when
    ``explicit_causal`` asks for it, it is materialised as a boolean mask placing query i at key
    position ``query_offset + i`` (bottom-right aligned, ``S - L``, when None: see
    :func:`causal_mask`). A single bottom-right aligned query masks nothing causally (it sits
    after every key), so decoding one token at a time keeps SDPA's unmasked path and skips the
    dead-row check.
    A float mask comes back in ``dtype`` (SDPA refuses a float64 or half-precision mask beside
    queries of another dtype), its masked entries already ``-inf``.
    """
    if attn_mask is not None:
        attn_mask = _check_attn_mask(attn_mask, batch, heads, query_len, key_len)
        if attn_mask.is_floating_point():
            # Masked entries are -inf by now, which every floating dtype holds.
            attn_mask = attn_mask.to(dtype)
    if key_padding_mask is not None:
        key_padding_mask = check_key_padding_mask(key_padding_mask, batch, key_len)
        attn_mask = combine_masks(key_padding_to_attn_mask(key_padding_mask), attn_mask, dtype)
    if query_offset == key_len - query_len:
        query_offset = None
    if is_causal and query_offset is None and query_len == 1 <= key_len:
        is_causal = False
    if is_causal and (
        explicit_causal or attn_mask is not None or query_len != key_len or query_offset is not None
    ):
        causal = causal_mask(query_len, key_len, device, query_offset=query_offset)
        attn_mask = combine_masks(causal, attn_mask, dtype)
        is_causal = False
    return attn_mask, is_causal


def dead_rows(attn_mask: Tensor) -> Tensor:
    """Rows of a mask in which no key may be attended, shape ``(..., L, 1)``."""
    return masked_entries(attn_mask).all(dim=-1, keepdim=True)


def revive_dead_rows(attn_mask: Tensor) -> tuple[Tensor, Tensor]:
    """Open every key in rows that see none; return the new mask and those rows.

    Softmax over an all-masked row is 0/0. Opening the row keeps the kernel finite (values and
    gradients); the caller zeroes those rows' outputs, which also zeroes their gradients.
    """
    dead = dead_rows(attn_mask)
    if attn_mask.dtype == torch.bool:
        return attn_mask | dead, dead
    return attn_mask.masked_fill(dead, 0.0), dead
