"""``patch`` / ``unpatch``: GFSA, NeuTRENO and layer fusion on a pretrained model, in place."""

from __future__ import annotations

from typing import Any, TypeVar

from torch import nn

from ..families import family_named, patchable_family
from ..method_spec import MethodSpec, parse_patch
from .neutreno_warmup import attach_neutreno_warmup
from .saved_patch import keep_patch_on_save
from .state import get_patch_state

__all__ = ["patch", "unpatch"]

ModelT = TypeVar("ModelT", bound=nn.Module)


def patch(model: ModelT, method: str | MethodSpec, **options: Any) -> ModelT:
    """Turn a pretrained model's attention into GFSA and/or NeuTRENO, and/or fuse its layers.

    The model is changed in place and returned. What it computes before training depends on
    the method (:func:`~filterformer.patching.patch_change` measures it on a batch):

    - unchanged, up to float round-off: GFSA with ``base="softmax"`` (its filter starts as the
      layer's own attention: ``w0, w1, wK = 0, 1, 0``), ``concat`` fusion (it starts as the last
      layer), and NeuTRENO with ``neutreno_warmup`` (λ starts at 0);
    - changed from the start: NeuTRENO without a warm-up (in a pretrained model ``V⁰ − V`` is
      larger than ``V`` itself: on all-MiniLM-L6-v2, λ = 0.4 changes the final hidden states by
      about 110 %), GFSA with ``base="efficient"`` (another attention), ``max`` and ``gate`` fusion.

    The new parameters are registered on the patched modules (optimisers and ``state_dict`` see
    them), kept out of weight decay, and listed by :func:`patched_parameters`.
    :func:`save_pretrained` (or a Hugging Face model's own ``save_pretrained``) saves the model
    with its patch, and :func:`from_pretrained` loads it back.

    Args:
        model: a Hugging Face ``transformers.PreTrainedModel`` whose attention goes through its
            ``AttentionInterface`` (BERT, RoBERTa, ALBERT, GPT-2, ViT, Llama-style, …), or a
            timm ``VisionTransformer`` (ViT, DeiT).
        method: a :class:`~filterformer.method_spec.MethodSpec` (with no ``options``; the one a
            :class:`~filterformer.models.TransformerConfig` holds patches the same layers), or a
            preset of :mod:`filterformer.methods` that keeps the model's attention:
            ``"gfsa"``, ``"neutreno"``, ``"fusion"`` (encoders), or several joined by ``+``
            (``"gfsa+neutreno"``, ``"gfsa+fusion"``, ``"gfsa+neutreno+fusion"``), parsed with
            its options by :meth:`~filterformer.method_spec.MethodSpec.parse`.
        **options: the spec's options (:func:`~filterformer.method_spec.preset_options`), defaults
            from the presets: GFSA's ``K=3``, ``learn=("w0", "w1", "wK")`` (the learned
            coefficients), ``exact_power=False`` and ``base="softmax"`` (``"efficient"``:
            encoders only); NeuTRENO's ``neutreno_lambda=0.6``, ``neutreno_learnable=False``
            (a per-head λ) and ``neutreno_warmup=0``: ``W > 0`` applies ``λ·min(s / W, 1)``
            after ``s`` optimiser steps, counted by
            :func:`~filterformer.patching.advance_neutreno_warmup` (``filterformer train``
            calls it; other training loops call it after each optimiser step); ``layers=None``,
            0-based indices of the layers that run GFSA and NeuTRENO's λ (all when None; the
            first layer always provides V⁰), as in a model built from a config; ``fusion``, the
            fusion mode (``"concat"``, ``"max"`` or ``"gate"``; ``"concat"`` by default).

    Returns:
        ``model``.

    Raises:
        ValueError: for an unknown method or option, a bad value, an unsupported model, a
            model that is already patched, or one with weights on the meta device (materialise
            it first: the patch's new parameters need values).
        ImportError: for a ``transformers`` older than the supported versions.
    """
    spec = parse_patch(method, **options)
    _refuse_meta(model)
    return _patch(model, spec)


def patch_for_inspection(model: ModelT, method: str | MethodSpec, **options: Any) -> ModelT:
    """:func:`patch`, taking a model on the meta device too: to check that the patch applies
    and to read the names and shapes of the patched model's weights, without memory or time.

    The patch's new parameters get no values on the meta device (``to_empty`` would leave them
    uninitialised), so such a model is for inspection only, never to materialise and run.
    """
    return _patch(model, parse_patch(method, **options))


def _refuse_meta(model: nn.Module) -> None:
    on_meta = [
        name for name, tensor in (*model.named_parameters(), *model.named_buffers())
        if tensor.is_meta
    ]
    if on_meta:
        raise ValueError(
            f"cannot patch a {type(model).__name__} whose weights are on the meta device "
            f"({len(on_meta)} of them, e.g. {on_meta[0]!r}): the patch's new parameters (GFSA's "
            "coefficients, NeuTRENO's λ, the fusion weights) would get no values, and "
            "to_empty() would leave them uninitialised. Materialise the model first "
            "(model.to_empty(device=...), then load its weights), then patch it"
        )


def _patch(model: ModelT, spec: MethodSpec) -> ModelT:
    state = get_patch_state(model)
    if state is not None:
        raise ValueError(
            f"the model is already patched with {state.spec.name!r}; call unpatch(model) first"
        )
    state = patchable_family(model).patch(model, spec)
    if spec.neutreno_warmup:
        try:
            attach_neutreno_warmup(state)
        except Exception:
            unpatch(model)
            raise
    keep_patch_on_save(state)
    return model


def unpatch(model: ModelT) -> ModelT:
    """Undo :func:`patch`: the original modules and attention implementation come back.

    Weights the patched model shares with the original (all pretrained ones) keep whatever they
    learned; the parameters the patch added are dropped.

    Raises:
        ValueError: if ``model`` is not patched.
    """
    state = get_patch_state(model)
    if state is None:
        raise ValueError(f"the {type(model).__name__} is not patched; nothing to undo")
    family_named(state.backend).unpatch(state)
    return model
