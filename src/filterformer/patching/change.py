"""How much a patch changes what a pretrained model computes before it trains: ``patch_change``.

GFSA's filter starts as the layer's attention and ``concat`` fusion as the last layer, so those
patches leave the outputs as they were; NeuTRENO's term acts from the start unless its λ warms up
from 0 (``neutreno_warmup``). :func:`patch_change` measures the difference on a batch, for any
patch and any model, so that a run can say what its step 0 is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..families import HUGGING_FACE, family_of
from ..nn import masked_mean

__all__ = ["PatchChange", "final_hidden_states", "patch_change"]


@dataclass(frozen=True)
class PatchChange:
    """The change of a model's final hidden states ``H`` (original) to ``H'`` (patched) on one
    batch, over its real tokens (those ``attention_mask`` keeps; all of them without a mask).

    Attributes:
        relative_change: ``‖H' − H‖_F / ‖H‖_F``; 0 for a model that computes what it did.
        pooled_cosine: the mean over the batch of the cosine similarity between the two models'
            mean-pooled final hidden states; 1 for a model that computes what it did.
        tokens: how many real tokens the figures are over.
    """

    relative_change: float
    pooled_cosine: float
    tokens: int


def final_hidden_states(model: nn.Module, inputs: Mapping[str, Any] | Tensor) -> Tensor:
    """The ``(B, N, D)`` final hidden states of ``model`` on ``inputs``, as its family's adapter
    reads them (:meth:`~filterformer.families.ModelFamily.final_hidden_states`).

    A timm ViT's are ``forward_features(inputs)``; a Hugging Face model's are its
    ``last_hidden_state``, or the last of its ``hidden_states`` where its output has no
    ``last_hidden_state`` (models with a task head). A model of neither family is called as a
    Hugging Face model is.

    Args:
        model: a Hugging Face model (called as ``model(**inputs)``) or a timm ViT
            (``model.forward_features(inputs)``).
        inputs: the model's keyword arguments (``input_ids``, ``attention_mask``, ...) or, for
            a timm ViT, its ``(B, C, H, W)`` images.
    """
    return (family_of(model) or HUGGING_FACE).final_hidden_states(model, inputs)


@torch.no_grad()
def patch_change(
    original: nn.Module, patched: nn.Module, inputs: Mapping[str, Any] | Tensor
) -> PatchChange:
    """How much ``patched`` changes the final hidden states of ``original`` on ``inputs``.

    Both models run in eval mode (no dropout), then go back to the mode they were in::

        original = copy.deepcopy(model)
        patch(model, "neutreno", neutreno_lambda=0.4)
        patch_change(original, model, batch).relative_change  # about 1.1 on all-MiniLM-L6-v2

    Args:
        original: the model before the patch (a copy: :func:`~filterformer.patching.patch`
            changes the model in place).
        patched: the patched model (or any model taking the same inputs).
        inputs: a batch (:func:`final_hidden_states`); its ``attention_mask``, when given,
            says which tokens are real (padding is left out of both figures).

    Returns:
        A :class:`PatchChange`.

    Raises:
        ValueError: when ``original`` is ``patched`` (the model was patched in place, so the
            original is gone), when the two models' final hidden states differ in shape, or
            when either holds a non-finite value at a real token.
    """
    if original is patched:
        raise ValueError("original and patched are one model: patch() changes a model in place, "
                         "so pass a copy made before patching (copy.deepcopy(model)) as original")
    before = _in_eval_mode(original, inputs)
    after = _in_eval_mode(patched, inputs)
    if before.shape != after.shape:
        raise ValueError(f"the final hidden states of original {tuple(before.shape)} and patched "
                         f"{tuple(after.shape)} differ in shape; patched must take the same inputs")
    mask = inputs.get("attention_mask") if isinstance(inputs, Mapping) else None
    real = None if mask is None else mask.to(before.device).bool()
    before, after = before.double(), after.double()
    for name, states in (("original", before), ("patched", after)):
        kept = states if real is None else states[real]
        if not torch.isfinite(kept).all():
            raise ValueError(f"the {name} model's final hidden states are not finite at real "
                             "tokens; no change can be measured")
    difference = after - before
    if real is not None:
        before_real, difference = before[real], difference[real]
    else:
        before_real = before
    pooled_cosine = torch.nn.functional.cosine_similarity(
        masked_mean(after, real), masked_mean(before, real), dim=-1
    ).mean()
    relative = (difference.norm() / before_real.norm()).item()
    if not math.isfinite(relative):
        raise ValueError("the original model's final hidden states are 0 at every real token; "
                         "a relative change is not defined")
    tokens = before_real.numel() // before.shape[-1]
    return PatchChange(relative, pooled_cosine.item(), tokens)


def _in_eval_mode(model: nn.Module, inputs: Mapping[str, Any] | Tensor) -> Tensor:
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        return final_hidden_states(model, inputs)
    finally:
        for module, training in modes:
            module.training = training
