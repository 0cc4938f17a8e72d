"""``patch`` / ``unpatch``: GFSA, NeuTRENO and layer fusion on a pretrained model, in place."""

from __future__ import annotations

from typing import Any, TypeVar

from torch import nn

from ..families import is_huggingface_model, is_timm_vision_transformer
from .huggingface import TESTED_MODELS, patch_huggingface, unpatch_huggingface
from .options import parse_patch_spec
from .saved_patch import keep_patch_on_save
from .state import get_patch_state
from .timm_vit import SUPPORTED as TIMM_SUPPORTED
from .timm_vit import patch_timm

__all__ = ["patch", "unpatch"]

ModelT = TypeVar("ModelT", bound=nn.Module)


def patch(model: ModelT, method: str, **options: Any) -> ModelT:
    """Turn a pretrained model's attention into GFSA and/or NeuTRENO, and/or fuse its layers.

    The model is changed in place and returned. At init it computes what it computed before
    (GFSA starts as plain attention, ``concat`` fusion as the last layer); the new parameters are
    registered on the patched modules (optimisers and ``state_dict`` see them), kept out of
    weight decay, and listed by :func:`patched_parameters`. :func:`save_pretrained` (or a Hugging
    Face model's own ``save_pretrained``) saves the model with its patch, and
    :func:`from_pretrained` loads it back.

    Args:
        model: a Hugging Face ``transformers.PreTrainedModel`` whose attention goes through its
            ``AttentionInterface`` (BERT, RoBERTa, ALBERT, GPT-2, ViT, Llama-style, …), or a
            timm ``VisionTransformer`` (ViT, DeiT).
        method: a preset of :mod:`filterformer.methods` that keeps the model's attention:
            ``"gfsa"``, ``"neutreno"``, ``"fusion"`` (encoders), or several joined by ``+``
            (``"gfsa+neutreno"``, ``"gfsa+fusion"``, ``"gfsa+neutreno+fusion"``).
        **options: the names of :class:`~filterformer.models.TransformerConfig` and of
            :class:`~filterformer.attention.GraphFilterAttention` (METHODS.md), defaults from
            the presets: GFSA's ``K=3``, ``learn=("w0", "w1", "wK")`` (the learned
            coefficients), ``exact_power=False`` and ``base="softmax"`` (``"efficient"``:
            encoders only); NeuTRENO's ``neutreno_lambda=0.6`` and ``neutreno_learnable=False``
            (a per-head λ); ``layers=None``, 0-based indices of the layers that use GFSA and
            NeuTRENO (all when None; NeuTRENO's first layer always provides V⁰); ``fusion``,
            the fusion mode (``"concat"``, ``"max"`` or ``"gate"``; ``"concat"`` by default).

    Returns:
        ``model``.

    Raises:
        ValueError: for an unknown method or option, a bad value, an unsupported model, or a
            model that is already patched.
        ImportError: for a ``transformers`` older than the supported versions.
    """
    spec = parse_patch_spec(method, options)
    state = get_patch_state(model)
    if state is not None:
        raise ValueError(
            f"the model is already patched with {state.spec.method!r}; call unpatch(model) first"
        )
    if is_huggingface_model(model):
        state = patch_huggingface(model, spec)
    elif is_timm_vision_transformer(model):
        state = patch_timm(model, spec)
    else:
        raise ValueError(
            f"cannot patch a {type(model).__name__}; supported: Hugging Face transformers models "
            f"({TESTED_MODELS}, or any whose attention goes through AttentionInterface) and "
            f"{TIMM_SUPPORTED}"
        )
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
    if state.backend == "transformers":
        unpatch_huggingface(state)
    else:
        state.undo()
    return model
