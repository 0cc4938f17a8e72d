"""Patch Hugging Face ``transformers`` models through their attention-function interface.

No model code is copied: every attention module that calls ``ALL_ATTENTION_FUNCTIONS`` gets a
:class:`~filterformer.patching.hf_attention.HuggingFaceAttentionPatch` child, and the model's
attention implementation is switched to :data:`~filterformer.patching.hf_attention.ATTENTION_NAME`
(``unpatch`` switches it back). A forward pre-hook on the base model starts each pass's context
(NeuTRENO's V⁰) and ties GFSA's cached ``ĀV`` to the model's decoding cache, whose reorderings,
batch selections and crops it then follows.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from typing import Any

from torch import nn

from ..attention.graph_filter import check_graph_filter_options
from ..families import (
    HUGGING_FACE,
    attention_implementation,
    enclosing_layer,
    restore_attention_implementations,
    switch_attention_implementation,
)
from ..families.huggingface import TESTED_MODELS
from ..method_spec import MethodSpec
from .fusion import attach_fusion
from .hf_attention import (
    ATTENTION_NAME,
    PATCH_ATTRIBUTE,
    HuggingFaceAttentionPatch,
    register_attention_function,
)
from .state import CachedPowers, PatchState, get_patch_state

__all__ = [
    "MIN_TRANSFORMERS_VERSION",
    "TESTED_MODELS",
    "check_transformers_version",
    "patch_huggingface",
    "transformers_version",
    "unpatch_huggingface",
]

#: The oldest ``transformers`` whose attention and mask interfaces the patch relies on.
MIN_TRANSFORMERS_VERSION = "5.0.0"
#: Where GFSA's per-layer ``ĀV`` rides along on a ``transformers`` decoding cache.
CACHE_ATTRIBUTE = "_filterformer_powers"
#: The cache methods (beam search, assisted decoding, batch expansion, reuse) whose operation
#: GFSA's ``ĀV`` follows: :class:`~filterformer.patching.state.CachedPowers` has each.
FOLLOWED_OPERATIONS = (
    "reorder_cache", "batch_select_indices", "batch_repeat_interleave", "crop", "reset"
)


def transformers_version() -> str:
    """The installed ``transformers`` version."""
    try:
        return importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:  # e.g. a source tree on the path
        import transformers

        return transformers.__version__


def check_transformers_version() -> None:
    """Raise ImportError naming the supported versions when ``transformers`` is too old."""
    from packaging.version import Version

    found = transformers_version()
    if Version(found) < Version(MIN_TRANSFORMERS_VERSION):
        raise ImportError(
            f"patching Hugging Face models needs transformers>={MIN_TRANSFORMERS_VERSION} (its "
            f"attention and mask interfaces); found {found}. Upgrade with "
            f"pip install -U 'transformers>={MIN_TRANSFORMERS_VERSION}'"
        )


def _query_heads(module: nn.Module, config: Any) -> int:
    for attribute in ("num_heads", "num_attention_heads"):
        heads = getattr(module, attribute, None)
        if isinstance(heads, int):
            return heads
    heads = getattr(getattr(module, "config", config), "num_attention_heads", None)
    if not isinstance(heads, int):
        raise ValueError(f"cannot tell how many heads {type(module).__name__} has")
    return heads


def _check_model(model: nn.Module) -> None:
    config = model.config
    if any(getattr(config, flag, False) for flag in ("is_encoder_decoder", "add_cross_attention")):
        raise ValueError(
            f"{type(model).__name__} has cross-attention; patching supports self-attention "
            f"models ({TESTED_MODELS}, or any model whose attention goes through transformers' "
            "AttentionInterface)"
        )
    if not hasattr(model, "set_attn_implementation"):
        raise ValueError(f"{type(model).__name__} cannot switch its attention implementation")


def patch_huggingface(model: nn.Module, spec: MethodSpec) -> PatchState:
    """Patch a ``transformers.PreTrainedModel`` in place.

    Raises:
        ImportError: when ``transformers`` is older than :data:`MIN_TRANSFORMERS_VERSION`.
        ValueError: for models without interface-based self-attention, cross-attention
            models, layer indices the model lacks, or fusion on a causal model.
    """
    check_transformers_version()
    _check_model(model)
    modules = HUGGING_FACE.attention_modules(model)
    if not modules:
        raise ValueError(
            f"{type(model).__name__} has no attention module that goes through transformers' "
            f"AttentionInterface; supported: {TESTED_MODELS}, and any model that does"
        )
    num_layers = getattr(model.config, "num_hidden_layers", None) or len(modules)
    if len(modules) > num_layers:
        raise ValueError(
            f"{type(model).__name__} has {len(modules)} attention modules for {num_layers} "
            "layers; patching supports one attention module per layer, or modules shared by "
            "several layers (ALBERT)"
        )
    spec.check_layers(num_layers)
    state = PatchState(spec, "transformers", model, num_layers)
    state.shared_layers = len(modules) < num_layers
    state.check_checkpointing(_checkpointing(model))
    base = model.base_model
    state.attach(model)
    state.attach(base)
    try:
        state.add_hook(base.register_forward_pre_hook(_start_forward, with_kwargs=True))
        state.add_hook(base.register_forward_hook(_finish_forward))
        if spec.uses_gfsa:
            check_graph_filter_options(spec.attention_options, causal=_is_causal(model, modules))
        if spec.changes_attention:
            _patch_attention(model, state, modules)
        if spec.uses_fusion:
            _patch_fusion(model, state, modules)
    except Exception:
        _restore_attention(state)
        state.undo()
        raise
    return state


def _patch_attention(model: nn.Module, state: PatchState, modules: list) -> None:
    spec = state.spec
    register_attention_function()
    for index, (_, module) in enumerate(modules):
        layer = None if state.shared_layers else index
        selected = state.shared_layers or spec.selects(index)
        patch = HuggingFaceAttentionPatch(
            state, layer, _query_heads(module, model.config), gfsa=spec.uses_gfsa and selected,
            like=next(module.parameters()),
            learnable_lambda=spec.neutreno_learnable and selected,
        )
        state.add_submodule(module, PATCH_ATTRIBUTE, patch)
        state.add_parameters(patch)
    state.restore["attn_implementation"] = switch_attention_implementation(model, ATTENTION_NAME)
    stuck = sorted({
        type(module).__name__
        for _, module in modules
        if attention_implementation(getattr(module, "config", model.config)) != ATTENTION_NAME
    })
    if stuck:
        raise ValueError(
            f"{type(model).__name__} did not switch {stuck} to the patched attention function; "
            f"supported: {TESTED_MODELS}, and any model whose attention goes through "
            "transformers' AttentionInterface"
        )


def _is_causal(model: nn.Module, modules: list) -> bool:
    return getattr(model.config, "is_decoder", False) or any(
        getattr(module, "is_causal", False) for _, module in modules
    )


def _patch_fusion(model: nn.Module, state: PatchState, modules: list) -> None:
    if _is_causal(model, modules):
        raise ValueError(
            f"fusion is for encoders (BERT, RoBERTa, ALBERT, ViT, …); {type(model).__name__} "
            "is causal"
        )
    layers = [enclosing_layer(model, name) for name, _ in modules]
    attach_fusion(
        state, model, layers, model.config.hidden_size, like=next(model.parameters())
    )


def _restore_attention(state: PatchState) -> None:
    restore_attention_implementations(state.restore.pop("attn_implementation", []))


def unpatch_huggingface(state: PatchState) -> None:
    """Restore the attention implementation, then remove everything the patch added."""
    _restore_attention(state)
    state.undo()


def _checkpointing(model: nn.Module) -> bool:
    """Whether gradient (activation) checkpointing is on, under either name transformers used."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(model), name):
            return bool(getattr(model, name))
    return False


def _start_forward(module: nn.Module, args: tuple, kwargs: dict) -> None:
    state = get_patch_state(module)
    state.check_checkpointing(module.training and _checkpointing(module))
    cache = _decoding_cache(kwargs)
    powers = getattr(cache, CACHE_ATTRIBUTE, None)
    state.start_forward(powers)
    if cache is not None and powers is None:
        _keep_powers(cache, state.context.powers)


def _finish_forward(module: nn.Module, args: tuple, output: Any) -> None:
    state = get_patch_state(module)
    cache = _decoding_cache(output) if isinstance(output, Mapping) else None
    if cache is not None and getattr(cache, CACHE_ATTRIBUTE, None) is None:
        _keep_powers(cache, state.context.powers)
    state.start_forward()  # let go of this pass's tensors


def _decoding_cache(values: Mapping[str, Any]) -> Any:
    """The decoding cache among a forward's keyword arguments or in its output, under either
    name transformers has used: ``cache`` (from 5.24, where ``past_key_values`` is deprecated)
    or ``past_key_values``."""
    fields = getattr(type(values), "__dataclass_fields__", None)
    for name in ("cache", "past_key_values"):
        if fields is not None and name not in fields:
            continue  # a model output declares one name; asking for the other logs a deprecation
        if values.get(name) is not None:
            return values[name]
    return None


def _keep_powers(cache: Any, powers: CachedPowers) -> None:
    """Let ``cache`` carry GFSA's ``ĀV``, and have its own operations apply to it too."""
    try:
        setattr(cache, CACHE_ATTRIBUTE, powers)
    except (AttributeError, TypeError):  # GFSA layers will say so when decoding with it
        return
    for name in FOLLOWED_OPERATIONS:
        method = getattr(cache, name, None)
        if callable(method) and not isinstance(method, _FollowedOperation):
            setattr(cache, name, _FollowedOperation(cache, name, method))


class _FollowedOperation:
    """A cache's method that, once the cache has done its part, does the same to the ``ĀV`` the
    cache carries.

    Set on the cache instance, not its class, so other caches and models are untouched. It holds
    the cache and its method as attributes, not in a closure, so that ``copy.deepcopy`` of the
    cache (reusing a prompt's cache) gives the copy its own, bound to the copy and its ``ĀV``.
    """

    def __init__(self, cache: Any, name: str, method: Any) -> None:
        self.cache = cache
        self.name = name
        self.method = method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self.method(*args, **kwargs)
        powers = getattr(self.cache, CACHE_ATTRIBUTE, None)
        if powers is not None:
            getattr(powers, self.name)(*args, **kwargs)
        return result

    def __repr__(self) -> str:
        return f"{self.method!r}, followed by GFSA's cached ĀV"
