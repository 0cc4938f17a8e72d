"""The parameters a method adds to a model, native or patched, each labelled with its method.

A method's own parameters are few and start at values that make it a no-op or a known filter
(GFSA's ``w0, w1, wK = 0, 1, 0``, AGF's ``p = 0``); AdamW moves a parameter by at most about the
summed learning rate, so they are what ``optimizer.coefficient_lr`` may train faster and what a
run's activity (:mod:`filterformer.training.method_activity`) follows:

======== ===================================================================================
method   parameters
======== ===================================================================================
gfsa     the learned coefficients among ``w0``, ``w1``, ``wK`` of every GFSA layer
neutreno a learnable ``neutreno_lambda`` of every layer NeuTRENO acts on (those of the
         method's ``layers``, natively and patched alike; every layer without a list)
agf      ``p`` of every AGF layer (its filter coefficients are ``θ = [1, tanh(p)]``)
samsa    ``support_scores`` of every SAMSA layer
fusion   every parameter of the layer fusion (:class:`~filterformer.nn.LayerFusion`)
======== ===================================================================================

On a model patched by :func:`filterformer.patch` they are exactly
:func:`~filterformer.patching.patched_parameters`. Projections a method shares with softmax
attention's kind (AGF's ``W_Σ``, SAMSA's scorer and support tokens) are not listed: they are
ordinary weights, at ordinary scales.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from .attention import AttentionBase
from .nn.fusion import LayerFusion

__all__ = ["ATTENTION_COEFFICIENTS", "METHOD_LABELS", "MethodParameter", "method_parameters"]

#: Per attention method (an :class:`~filterformer.attention.AttentionBase`'s ``method``), the
#: coefficients its modules add; NeuTRENO's λ may be on any of them.
ATTENTION_COEFFICIENTS: dict[str, tuple[str, ...]] = {
    "gfsa": ("w0", "w1", "wK"),
    "agf": ("p",),
    "samsa": ("support_scores",),
}
#: A patch's attention parameters by attribute name (GFSA's coefficients, NeuTRENO's λ).
_PATCHED_COEFFICIENTS = {"w0": "gfsa", "w1": "gfsa", "wK": "gfsa", "neutreno_lambda": "neutreno"}
#: What each method's parameters are called in sentences, in report order.
METHOD_LABELS: dict[str, str] = {
    "gfsa": "GFSA coefficients (w0, w1, wK)",
    "neutreno": "NeuTRENO's λ",
    "agf": "AGF's filter coefficients (p)",
    "samsa": "SAMSA's support scores",
    "fusion": "layer-fusion weights",
}


@dataclass(frozen=True)
class MethodParameter:
    """One parameter a method adds.

    Attributes:
        name: its qualified name in ``model.named_parameters()``.
        method: the method that adds it, a key of :data:`METHOD_LABELS`.
        parameter: the parameter itself.
    """

    name: str
    method: str
    parameter: nn.Parameter


def _native_kinds(model: nn.Module) -> dict[int, str]:
    """``id(parameter) -> method`` for the package's own modules in ``model``."""
    kinds: dict[int, str] = {}
    for module in model.modules():
        if isinstance(module, LayerFusion):
            kinds.update({id(p): "fusion" for p in module.parameters()})
        elif isinstance(module, AttentionBase):
            own = dict(module.named_parameters(recurse=False))
            names = ATTENTION_COEFFICIENTS.get(module.method, ())
            kinds.update({id(own[name]): module.method for name in names if name in own})
            if "neutreno_lambda" in own:
                kinds[id(own["neutreno_lambda"])] = "neutreno"
    return kinds


def _patched_kinds(model: nn.Module) -> dict[int, str]:
    """``id(parameter) -> method`` for what :func:`filterformer.patch` added anywhere in
    ``model`` (a patched model may sit inside another, as under a task head)."""
    # Imported here: patching imports the optimiser module, which lists these parameters.
    from .patching.state import get_patch_state

    kinds: dict[int, str] = {}
    states = {id(s): s for m in model.modules() if (s := get_patch_state(m)) is not None}
    for state in states.values():
        fused = {id(p) for p in state.fusion.parameters()} if state.fusion is not None else set()
        for module, name in state.new_parameters:
            param = getattr(module, name)
            kinds[id(param)] = "fusion" if id(param) in fused else _PATCHED_COEFFICIENTS[name]
    return kinds


def method_parameters(model: nn.Module) -> list[MethodParameter]:
    """Every parameter a method adds to ``model``, in ``named_parameters`` order.

    Args:
        model: a filterformer model, a patched Hugging Face or timm model, or any module holding
            either (frozen parameters are listed too).

    Returns:
        One :class:`MethodParameter` each; empty for a plain softmax model.
    """
    kinds = {**_native_kinds(model), **_patched_kinds(model)}
    return [MethodParameter(name, kinds[id(param)], param)
            for name, param in model.named_parameters() if id(param) in kinds]
