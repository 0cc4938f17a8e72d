"""The contract every attention method implements.

Keeps timm's constructor and parameter names (``qkv``, ``proj``) so pretrained state dicts load,
and owns what is shared by every method: projections, head splitting, the NeuTRENO term, masks,
decoding caches and recording explicit maps for diagnostics. A method implements :meth:`attend`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..checks import check_integer, check_probability
from ..functional import (
    attention_matrix,
    check_key_padding_mask,
    check_neutreno_lambda,
    key_padding_from_attn_mask,
)
from ..functional.masks import pad_keys
from ..optim import exclude_from_weight_decay
from .context import AttentionContext, AttentionMaps
from .decoding_cache import LayerCache

__all__ = [
    "AttentionBase", "AttentionInputs", "autocast_dtype", "autocast_input", "merge_heads",
    "split_heads",
]


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """``(B, N, h·d)`` -> ``(B, h, N, d)``."""
    batch, length, width = x.shape
    return x.view(batch, length, num_heads, width // num_heads).transpose(1, 2)


def autocast_dtype(x: Tensor) -> torch.dtype | None:
    """The dtype autocast runs matrix products in on ``x``'s device, or None where it is off."""
    device = x.device.type
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None


def autocast_input(x: Tensor) -> Tensor:
    """``x`` in autocast's dtype where autocast is on for its device and ``x`` is float32, else
    ``x``: each projection that reads it would cast it, once per projection."""
    low = autocast_dtype(x)
    return x.to(low) if low is not None and x.dtype == torch.float32 else x


def merge_heads(x: Tensor) -> Tensor:
    """``(B, h, N, d)`` -> ``(B, N, h·d)``."""
    batch, heads, length, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * head_dim)


@dataclass
class AttentionInputs:
    """What :meth:`AttentionBase.attend` may read besides q, k, v.

    Attributes:
        x: ``(B, N, D)`` the layer's input (normed in a pre-LN block).
        residual: ``(B, N, D)`` the un-normed residual stream (``x`` in a post-LN block).
        padding_mask: ``(B, S)`` bool over keys, True at real tokens (S = N without a cache;
            with one, ``cache.span``: the unused positions of its buffer are False).
        attn_mask: SDPA-style mask broadcastable to ``(B, h, N, S)``, or None.
        is_causal: whether the layer is causal.
        context: the per-forward :class:`AttentionContext`.
        cache: the layer's :class:`LayerCache` while decoding, else None.
        query_offset: while decoding, the key position of the first query (``cache.offset``);
            causal masking places query i at key ``query_offset + i``, which also hides the
            buffer's unused positions after the queries. None without a cache.
    """

    x: Tensor
    residual: Tensor
    padding_mask: Tensor | None
    attn_mask: Tensor | None
    is_causal: bool
    context: AttentionContext
    cache: LayerCache | None
    query_offset: int | None = None


class AttentionBase(nn.Module):
    """Multi-head attention with a pluggable filter.

    A method's constructor spells out this signature, then its own keyword-only options, and
    names those options in :attr:`options`: timm's explicit keyword signature, no ``**kwargs``.

    Args:
        dim: model width D.
        num_heads: heads h; D must be divisible by h.
        qkv_bias: bias on the fused q/k/v projection.
        attn_drop: dropout on attention probabilities (methods that cannot drop probabilities
            apply it to their filtered output, and say so).
        proj_drop: dropout after the output projection.
        causal: whether the layer is causal; methods with ``supports_causal = False`` raise.
        neutreno_lambda: NeuTRENO's λ (METHODS.md §2), a finite number >= 0 (the papers use
            (0, 1]); 0 disables the term.
        neutreno_learnable: learn a per-head λ initialised to ``neutreno_lambda``.
    """

    #: whether the method can run causally (with masks and a decoding cache).
    supports_causal: ClassVar[bool] = True
    #: whether the method takes only key-padding masks (no per-query mask, no score matrix).
    key_padding_only: ClassVar[bool] = False
    #: the registry name, set by :func:`~filterformer.attention.register_attention`.
    method: ClassVar[str] = "base"
    #: the constructor's keyword options besides ``dim`` and ``num_heads``, the method's own
    #: first; a subclass whose constructor adds options lists them here (the registry reads it).
    options: ClassVar[tuple[str, ...]] = (
        "qkv_bias", "attn_drop", "proj_drop", "causal", "neutreno_lambda", "neutreno_learnable",
    )

    def __init__(
        self,
        dim: int,
        num_heads: int = 8,
        qkv_bias: bool = False,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        *,
        causal: bool = False,
        neutreno_lambda: float = 0.0,
        neutreno_learnable: bool = False,
    ) -> None:
        super().__init__()
        check_integer("dim", dim)
        check_integer("num_heads", num_heads)
        if dim % num_heads:
            raise ValueError(f"dim ({dim}) must be divisible by num_heads ({num_heads})")
        check_probability("attn_drop", attn_drop)
        check_probability("proj_drop", proj_drop)
        neutreno_lambda = check_neutreno_lambda(neutreno_lambda)
        if causal and not self.supports_causal:
            raise ValueError(
                f"attention {self.method!r} is non-causal only; use a causal method such as "
                "'softmax' or 'gfsa' for causal models"
            )
        self.dim = dim
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim**-0.5
        self.causal = causal
        self.attn_drop = attn_drop
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)
        if neutreno_learnable:
            lam = nn.Parameter(torch.full((num_heads,), neutreno_lambda))
            self.neutreno_lambda = exclude_from_weight_decay(lam)
        else:
            self.neutreno_lambda = neutreno_lambda

    @property
    def uses_neutreno(self) -> bool:
        return isinstance(self.neutreno_lambda, Tensor) or self.neutreno_lambda != 0.0

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(B, N, D)`` -> q, k, v, each ``(B, h, N, d)``."""
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return tuple(split_heads(t, self.num_heads) for t in (q, k, v))

    def project_queries(self, x: Tensor) -> Tensor:
        """``(B, N, D)`` -> q ``(B, h, N, d)`` alone, as :meth:`project_qkv` gives it."""
        bias = None if self.qkv.bias is None else self.qkv.bias[: self.dim]
        return split_heads(F.linear(x, self.qkv.weight[: self.dim], bias), self.num_heads)

    def projects_own_rows(self, x: Tensor) -> bool:
        """Whether :meth:`attend` would rather project the keys and values it reads from
        ``inputs.x`` ``(B, N, D)`` itself than have every token's projected (a method that reads
        a few rows: SAMSA). False here. Where it says True, :meth:`forward` passes
        ``k = v = None`` whenever nothing else needs this layer's keys and values: no decoding
        cache, no NeuTRENO term, V⁰ already recorded by an earlier layer, no maps recorded."""
        return False

    def _keys_unused(self, x: Tensor, context: AttentionContext, cache: LayerCache | None) -> bool:
        """Whether this call may leave the keys and values of every token unprojected."""
        return (cache is None and not self.uses_neutreno and context.first_values is not None
                and not context.output_attentions and self.projects_own_rows(x))

    def attend(
        self, q: Tensor, k: Tensor | None, v: Tensor | None, inputs: AttentionInputs
    ) -> Tensor:
        """The method: ``(B, h, N, d)`` per-head outputs before the output projection.

        ``q`` covers the positions being computed; ``k`` and ``v`` cover every key (the cached
        past ones too while decoding), or are both None where :meth:`projects_own_rows` lets
        the method project the rows it reads from ``inputs.x``.
        """
        raise NotImplementedError

    def filter_matrix(self, q: Tensor, k: Tensor, inputs: AttentionInputs) -> AttentionMaps:
        """The explicit ``Ā`` and the operator applied to V, ``(B, h, N, N)`` each.

        Softmax attention by default; methods with another filter override it.
        """
        attn = self._explicit_attention(q, k, inputs)
        return AttentionMaps(attention=attn, filter=attn)

    def _explicit_attention(self, q: Tensor, k: Tensor, inputs: AttentionInputs) -> Tensor:
        return attention_matrix(
            q, k, attn_mask=inputs.attn_mask, key_padding_mask=inputs.padding_mask,
            is_causal=inputs.is_causal, scale=self.scale,
        )

    def forward(
        self,
        x: Tensor,
        attn_mask: Tensor | None = None,
        *,
        padding_mask: Tensor | None = None,
        context: AttentionContext | None = None,
        cache: LayerCache | None = None,
        residual: Tensor | None = None,
    ) -> Tensor:
        """Attend.

        Args:
            x: ``(B, N, D)`` input.
            attn_mask: SDPA-style mask broadcastable to ``(B, h, N, S)`` (timm's argument); for
                methods with ``key_padding_only``, a key-padding mask ``(B, 1, 1, S)``.
            padding_mask: ``(B, S)`` bool, True at real tokens; with a cache S covers the past
                (the positions held, ``cache.length`` after this call's).
            context: the per-forward context (NeuTRENO's V⁰, aux losses, recorded maps); a fresh
                one when None, which makes this layer the first.
            cache: this layer's decoding cache (causal layers only).
            residual: the un-normed residual stream, for methods that read it; ``x`` when None.

        Returns:
            ``(B, N, D)``.
        """
        if x.dim() != 3 or x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape (B, N, {self.dim}); got {tuple(x.shape)}")
        if cache is not None and not self.causal:
            raise ValueError("a decoding cache needs a causal attention layer (causal=True)")
        context = AttentionContext() if context is None else context
        x = autocast_input(x)
        if self._keys_unused(x, context, cache):  # attend projects the rows it reads
            q, k, v = self.project_queries(x), None, None
        else:
            q, k, v = self.project_qkv(x)
        keys, values = (k, v) if cache is None else cache.append_kv(k, v)
        held = x.shape[1] if cache is None else cache.length
        if padding_mask is not None:
            check_key_padding_mask(padding_mask, x.shape[0], held)
        if attn_mask is not None and self.key_padding_only:
            padding = key_padding_from_attn_mask(
                attn_mask, x.shape[0], held, method=f"attention {self.method!r}"
            )
            padding_mask = padding if padding_mask is None else padding & padding_mask
            attn_mask = None
        span = held if keys is None else keys.shape[-2]
        inputs = AttentionInputs(
            x=x,
            residual=x if residual is None else residual,
            padding_mask=pad_keys(padding_mask, held, span, name="padding_mask"),
            attn_mask=pad_keys(attn_mask, held, span, name="attn_mask"),
            is_causal=self.causal,
            context=context,
            cache=cache,
            query_offset=None if cache is None else cache.offset,
        )
        out = self.attend(q, keys, values, inputs)
        out = context.neutreno(out, v, self.neutreno_lambda if self.uses_neutreno else None)
        if context.output_attentions:
            context.attention_maps.append(self.filter_matrix(q, keys, inputs))
        return self.proj_drop(self.proj(merge_heads(out)))

    def extra_repr(self) -> str:
        text = f"dim={self.dim}, num_heads={self.num_heads}, causal={self.causal}"
        if self.uses_neutreno:
            lam = self.neutreno_lambda
            text += f", neutreno_lambda={lam if isinstance(lam, float) else 'learnable'}"
        return text
