"""The attention function a patched Hugging Face model runs, and the state it keeps per layer.

``transformers`` hands every attention call to a function registered in its
``AttentionInterface``, with the calling module and its ``q``, ``k``, ``v`` (already rotated and
cached). Registering :func:`filterformer_attention` under :data:`ATTENTION_NAME`, with
``transformers``' SDPA masks under the same name, patches any model that routes its attention
through that interface, without copying model code. A module's GFSA filter is its
:class:`HuggingFaceAttentionPatch` child's
:class:`~filterformer.attention.graph_filter.GraphFilter` (the one native GFSA owns too), so
optimisers and ``state_dict`` see its coefficients.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ..attention.graph_filter import GraphFilter
from ..functional import attend, attention_matrix, repeat_heads
from ..functional.masks import masked_entries
from ..functional.sdpa_backends import growing_keys_kernels
from ..optim import exclude_from_weight_decay
from .state import PatchContext, PatchState, PowerCache

__all__ = [
    "ATTENTION_NAME",
    "PATCH_ATTRIBUTE",
    "HuggingFaceAttentionPatch",
    "filterformer_attention",
    "register_attention_function",
]

#: The name under which the attention function and its masks are registered in ``transformers``.
ATTENTION_NAME = "filterformer"
#: The child module of a patched attention module that holds its patch.
PATCH_ATTRIBUTE = "filterformer"
#: Attention-function arguments of model features the patched kernels do not implement.
UNSUPPORTED_ARGUMENTS = ("softcap", "s_aux", "position_bias", "cache")


class HuggingFaceAttentionPatch(nn.Module, GraphFilter):
    """Filterformer's part of one Hugging Face attention module.

    Args:
        state: the model's patch state.
        layer: the layer this module computes, or None when one module serves several layers
            (ALBERT), whose calls are then counted in order.
        num_heads: query heads h; GFSA's coefficients are per query head.
        gfsa: whether this module gets a graph filter (coefficients ``w0, w1, wK`` of shape
            ``(h,)`` at 0, 1, 0, plain attention), with the spec's GFSA options.
        like: a parameter of the module, whose dtype and device the coefficients take.
        learnable_lambda: whether this module learns NeuTRENO's λ: an ``(h,)`` parameter
            ``neutreno_lambda`` initialised to ``state.spec.neutreno_lambda`` (else that float).
    """

    def __init__(
        self,
        state: PatchState,
        layer: int | None,
        num_heads: int,
        *,
        gfsa: bool,
        like: Tensor,
        learnable_lambda: bool = False,
    ) -> None:
        super().__init__()
        spec = state.spec
        self.state = state
        self.layer = layer
        self.num_heads = num_heads
        self.has_gfsa = gfsa
        if gfsa:
            self.init_graph_filter(num_heads, **spec.graph_filter_options(), like=like)
        self.neutreno_lambda: float | Tensor = spec.neutreno_lambda
        if learnable_lambda:
            init = torch.full((num_heads,), spec.neutreno_lambda, dtype=like.dtype)
            lam = nn.Parameter(init.to(like.device))
            self.neutreno_lambda = exclude_from_weight_decay(lam)

    def layer_index(self, context: PatchContext) -> int:
        """The layer this call computes (counting calls where the module is shared)."""
        if self.layer is not None:
            return self.layer
        index = context.calls
        context.calls += 1
        if index >= self.state.num_layers:
            raise ValueError(
                f"a shared attention module ran more than the model's {self.state.num_layers} "
                "layers in one forward pass; call the patched model itself, without gradient "
                "checkpointing"
            )
        return index

    def filter_response(self, sigma: Tensor) -> Tensor:
        """:meth:`GraphFilter.filter_response`, for a module patched with GFSA.

        Raises:
            ValueError: for a module patched without GFSA.
        """
        if not self.has_gfsa:
            raise ValueError(f"layer {self.layer} was patched without GFSA; it has no filter")
        return super().filter_response(sigma)

    def extra_repr(self) -> str:
        spec = self.state.spec
        text = f"method={spec.name!r}, layer={self.layer}, num_heads={self.num_heads}"
        if self.has_gfsa:
            text += f", {self.graph_filter_repr()}"
        if spec.uses_neutreno:
            lam = "learnable" if spec.neutreno_learnable else spec.neutreno_lambda
            text += f", neutreno_lambda={lam}"
            if spec.neutreno_warmup:
                text += f", neutreno_warmup={spec.neutreno_warmup}"
        return text


def register_attention_function() -> None:
    """Register :func:`filterformer_attention` and SDPA-style masks under ``ATTENTION_NAME``."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(ATTENTION_NAME, filterformer_attention)
    # SDPA's masks: boolean (True = attend), or None when a causal flag or nothing will do.
    AttentionMaskInterface.register(ATTENTION_NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


def _sdpa_attention(
    module: nn.Module, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
    **kwargs: Any,
) -> tuple[Tensor, Tensor | None]:
    """``transformers``' own SDPA attention, for layers the patch leaves as they are."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    return ALL_ATTENTION_FUNCTIONS["sdpa"](module, query, key, value, attention_mask, **kwargs)


def filterformer_attention(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[Tensor, Tensor | None]:
    """GFSA and/or NeuTRENO in the signature of ``transformers``' attention functions.

    Args:
        module: the calling attention module; its :class:`HuggingFaceAttentionPatch` child says
            what to do. A module without one (an unpatched model sharing the config) gets
            ``transformers``' SDPA attention.
        query: ``(B, h, L, d)``.
        key: ``(B, h_kv, S, d)``, with every cached position; h is a multiple of h_kv.
        value: ``(B, h_kv, S, d_v)``.
        attention_mask: SDPA-style mask broadcastable to ``(B, h, L, S)`` (bool, True = attend,
            or additive), or None.
        dropout: attention dropout. GFSA's two fused calls cannot share dropped probabilities,
            so GFSA layers drop their filtered output instead.
        scaling: score scale; ``1/sqrt(d)`` when None.
        is_causal: causal masking when no mask is given; the module's ``is_causal`` when None.
        **kwargs: the model's other arguments (``output_attentions`` returns the explicit maps).

    Returns:
        ``(B, L, h, d_v)`` outputs, and the ``(B, h, L, S)`` operator applied to V (``H̃`` for
        GFSA layers without past keys, ``Ā`` otherwise) when ``output_attentions`` is set, else
        None.
    """
    # transformers' cache grows by a key every decoding step: on CUDA, keep SDPA off the
    # kernels that build a plan per key length (functional.sdpa_backends), every layer alike.
    with growing_keys_kernels(query, key):
        return _attention(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
            is_causal=is_causal, **kwargs,
        )


def _attention(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    dropout: float,
    scaling: float | None,
    is_causal: bool | None,
    **kwargs: Any,
) -> tuple[Tensor, Tensor | None]:
    """:func:`filterformer_attention` under its choice of SDPA kernels."""
    patch = module._modules.get(PATCH_ATTRIBUTE)
    if not isinstance(patch, HuggingFaceAttentionPatch):
        return _sdpa_attention(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
            is_causal=is_causal, **kwargs,
        )
    spec, context = patch.state.spec, patch.state.context
    layer = patch.layer_index(context)
    use_gfsa = patch.has_gfsa and spec.selects(layer)
    # NeuTRENO's first layer runs here whether it is selected or not: it provides V⁰.
    use_neutreno = spec.uses_neutreno and (layer == 0 or spec.selects(layer))
    want_maps = bool(kwargs.get("output_attentions"))
    if not (use_gfsa or use_neutreno or want_maps):
        return _sdpa_attention(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
            is_causal=is_causal, **kwargs,
        )
    unsupported = [name for name in UNSUPPORTED_ARGUMENTS if kwargs.get(name) is not None]
    if unsupported:
        raise ValueError(
            f"{type(module).__name__} passes {unsupported} to its attention function; patched "
            "layers support plain softmax attention with masks, causal or not, and grouped-query "
            "attention"
        )
    if query.shape[1] % key.shape[1]:
        raise ValueError(
            f"query heads ({query.shape[1]}) must be a multiple of key/value heads "
            f"({key.shape[1]})"
        )
    # Keys and values stay grouped: the kernels read each key/value head for its query heads.
    heads = query.shape[1]
    causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    # A mask, when given, already holds causality (and padding); without one, the flag does.
    causal = bool(causal) and attention_mask is None
    query_len, key_len = query.shape[-2], key.shape[-2]
    if use_gfsa:
        # Decoding keeps ĀV at past positions; the efficient base (encoders only) never decodes.
        store = None
        if patch.base == "efficient":
            attention_mask = _key_padding_form(attention_mask)
        else:
            store = _power_store(context, layer, query_len, key_len, key)
        out = patch.graph_filter(
            query, key, value, attn_mask=attention_mask, is_causal=causal, scale=scaling,
            dropout_p=dropout, past=store,
        )
    else:
        out = attend(
            query, key, value, attn_mask=attention_mask, is_causal=causal, dropout_p=dropout,
            scale=scaling,
        )
    if use_neutreno:
        lam = patch.neutreno_lambda if spec.selects(layer) else None
        # The new positions' values keep their key/value heads; the term broadcasts them.
        out = context.neutreno(out, value[..., key_len - query_len :, :], lam)
    maps = None
    if want_maps:
        maps = attention_matrix(
            query, repeat_heads(key, heads), attn_mask=attention_mask, is_causal=causal,
            scale=scaling,
        )
        if use_gfsa and query_len == key_len:
            maps = patch.filter_of(maps)
    if out.dtype != query.dtype:
        out = out.to(query.dtype)
    return out.transpose(1, 2).contiguous(), maps


def _key_padding_form(attention_mask: Tensor | None) -> Tensor | None:
    """An encoder's ``(B, 1, L, S)`` mask as the ``(B, 1, 1, S)`` key-padding mask that GFSA's
    efficient base takes: a key is real where some query may attend it. (The patch refuses the
    efficient base on causal models, whose masks are more than padding.)"""
    if attention_mask is None:
        return None
    real = ~masked_entries(attention_mask)
    return real.any(dim=-2, keepdim=True).any(dim=1, keepdim=True)


def _power_store(
    context: PatchContext, layer: int, query_len: int, key_len: int, key: Tensor
) -> PowerCache:
    """This layer's store of ``ĀV``, given the new positions' keys: fresh for a pass without
    past keys, else the one the decoding cache carries, checked to match the cache's past."""
    past = key_len - query_len
    if past == 0:
        store = context.powers[layer] = PowerCache()
    else:
        store = context.powers.get(layer)
        _check_past(store, layer, query_len, past, key)
    store.append_key(key[..., past:, :])
    return store


#: What every refusal of a decoding cache ends with.
_DECODE_AS_SUPPORTED = (
    "GFSA's cached ĀV follows the cache's own reorder_cache, batch_select_indices, "
    "batch_repeat_interleave, crop and reset (beam search, assisted decoding, greedy or sampled "
    "generate(), your own loop); decode with the cache the patched model returned, changed only "
    "through those, or pass use_cache=False"
)


def _check_past(
    store: PowerCache | None, layer: int, query_len: int, past: int, key: Tensor
) -> None:
    """Refuse a decoding cache whose ``past`` positions are not those ``store`` holds ``ĀV`` for,
    saying what changed the cache behind the patch's back. ``key``: ``(B, h, past + L, d)``."""
    where = (
        f"GFSA layer {layer} is decoding {query_len} new position(s) after {past} cached ones, "
        "but "
    )
    if store is None or store.length == 0:
        raise ValueError(
            where + "holds no ĀV for them: the cache was filled before the model was patched or "
            "by another model, rebuilt from another cache's tensors (a new cache object, e.g. a "
            "model's own _reorder_cache or DynamicCache(ddp_cache_data)), or cannot carry "
            f"attributes. {_DECODE_AS_SUPPORTED}"
        )
    batch, kept = key.shape[0], store.last_key.shape[0]
    if batch != kept:
        raise ValueError(
            where + f"the cache's batch has {batch} rows and its ĀV {kept}: the batch was changed "
            "through the cache's layers (e.g. cache.layers[i].batch_select_indices(...) or "
            f".batch_repeat_interleave(...)), which the patch cannot see. {_DECODE_AS_SUPPORTED}"
        )
    if store.length != past:
        raise ValueError(
            where + f"holds ĀV for {store.length}: the cache was cropped or extended through its "
            "layers (e.g. cache.layers[i].crop(...) or .update(...)), which the patch cannot see. "
            f"{_DECODE_AS_SUPPORTED}"
        )
    if not torch.equal(store.last_key, key[:, :1, past - 1 : past, :]):
        raise ValueError(
            where + "its last cached key is not the one this layer's ĀV was computed with: the "
            "cache was reordered or overwritten through its layers (e.g. "
            "cache.layers[i].reorder_cache(...)), which the patch cannot see. "
            f"{_DECODE_AS_SUPPORTED}"
        )
