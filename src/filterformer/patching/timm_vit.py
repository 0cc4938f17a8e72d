"""Patch timm's ``VisionTransformer`` (ViT, DeiT) by swapping in the package's attention modules.

Each patched block's ``attn`` becomes a :class:`~filterformer.attention.GraphFilterAttention` (or
a :class:`~filterformer.attention.SoftmaxAttention` carrying NeuTRENO) that keeps timm's own
``qkv`` and ``proj`` modules, so the pretrained weights are shared, not copied, and state dict
names do not change. ``unpatch`` puts the original modules back (with whatever the shared weights
learned meanwhile). A pre-hook on the first block starts each pass's context (NeuTRENO's V⁰).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ..attention import AttentionBase, build_attention
from ..families import TIMM
from ..families.timm import SUPPORTED
from ..method_spec import MethodSpec
from .fusion import attach_fusion
from .state import PatchState, get_patch_state

__all__ = ["SUPPORTED", "patch_timm"]


def patch_timm(model: nn.Module, spec: MethodSpec) -> PatchState:
    """Patch a timm ``VisionTransformer`` in place.

    Raises:
        ValueError: for attention variants other than timm's plain ``Attention`` (qk-norm,
            scale-norm, gated, other head widths), or layer indices the model lacks.
    """
    blocks = TIMM.layers(model)
    spec.check_layers(len(blocks))
    state = PatchState(spec, "timm", model, len(blocks))
    state.check_checkpointing(model.grad_checkpointing)
    state.attach(model)
    try:
        state.attach(blocks[0])
        state.add_hook(blocks[0].register_forward_pre_hook(_start_forward))
        if spec.changes_attention:
            _replace_attention(state, blocks)
        if spec.uses_fusion:
            attach_fusion(state, model, blocks, model.embed_dim, like=next(model.parameters()))
        state.attach(blocks[-1])
        state.add_hook(blocks[-1].register_forward_hook(_finish_forward))
    except Exception:
        state.undo()
        raise
    return state


def _replace_attention(state: PatchState, blocks: list[nn.Module]) -> None:
    spec = state.spec
    for index, block in enumerate(blocks):
        layer = spec.for_layer(index)
        # The first layer always runs the package's attention under NeuTRENO: it provides V⁰.
        if layer.attention == "softmax" and not (
            spec.uses_neutreno and (index == 0 or spec.selects(index))
        ):
            continue
        attention = _filter_attention(block.attn, index, spec)
        state.add_submodule(block, "attn", attention)
        state.add_parameters(attention)
        state.attach(attention)
        state.add_hook(attention.register_forward_pre_hook(_pass_context, with_kwargs=True))


def _check_supported(attn: nn.Module, index: int) -> None:
    from timm.models.vision_transformer import Attention

    if type(attn) is not Attention:
        raise ValueError(f"block {index} uses {type(attn).__name__}; supported: {SUPPORTED}")
    dim = attn.qkv.in_features
    problems = [
        name
        for name, unsupported in (
            ("qk_norm", not isinstance(attn.q_norm, nn.Identity)),
            ("scale_norm", not isinstance(getattr(attn, "norm", nn.Identity()), nn.Identity)),
            ("gated", getattr(attn, "gate", None) is not None),
            ("attn_head_dim", attn.num_heads * attn.head_dim != dim),
            ("dim_out", attn.proj.out_features != dim),
        )
        if unsupported
    ]
    if problems:
        raise ValueError(
            f"block {index}'s Attention uses {problems}, which patching does not support; "
            f"supported: {SUPPORTED}, without qk_norm, scale_norm, gated, attn_head_dim or dim_out"
        )


def _filter_attention(attn: nn.Module, index: int, spec: MethodSpec) -> AttentionBase:
    """The package's attention module equivalent to timm's ``attn``, sharing its weights: the
    one a native model builds for layer ``index`` of ``spec``."""
    _check_supported(attn, index)
    layer = spec.for_layer(index)
    attention = build_attention(
        layer.attention, attn.qkv.in_features, attn.num_heads,
        qkv_bias=attn.qkv.bias is not None, attn_drop=attn.attn_drop.p,
        proj_drop=attn.proj_drop.p, neutreno_lambda=layer.neutreno_lambda,
        neutreno_learnable=layer.neutreno_learnable, **layer.options,
    )
    weight = attn.qkv.weight
    attention.to(device=weight.device, dtype=weight.dtype)
    attention.qkv, attention.proj = attn.qkv, attn.proj
    return attention.train(attn.training)


def _start_forward(module: nn.Module, args: tuple) -> None:
    state = get_patch_state(module)
    state.check_checkpointing(state.model.training and state.model.grad_checkpointing)
    state.start_forward()


def _finish_forward(module: nn.Module, args: tuple, output: Any) -> None:
    get_patch_state(module).start_forward()  # let go of this pass's tensors


def _pass_context(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Adapt timm's ``attn(x, attn_mask, is_causal)`` call to the package's attention."""
    if len(args) > 2:
        args, kwargs = args[:2], {**kwargs, "is_causal": args[2]}
    if kwargs.pop("is_causal", False):
        raise ValueError("patched timm attention is non-causal; got is_causal=True")
    kwargs["context"] = get_patch_state(module).context
    return args, kwargs
