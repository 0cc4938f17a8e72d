"""Layer fusion on a pretrained model: fuse every layer's output before the model's own head.

METHODS.md §5. A forward hook on each layer records its output; the last layer's hook returns the
fusion of all of them instead of its own output, so whatever the model does next (a final norm,
a pooler, a classifier) sees the fused hidden states. With ``concat`` the fusion starts as the
identity on the last layer, so the patched model equals the original at init.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from ..nn.fusion import LayerFusion
from .state import PatchState, get_patch_state

__all__ = ["FUSION_ATTRIBUTE", "attach_fusion"]

#: The attribute of the patched model that holds its :class:`~filterformer.nn.LayerFusion`.
FUSION_ATTRIBUTE = "filterformer_fusion"


def attach_fusion(
    state: PatchState, model: nn.Module, layers: Sequence[nn.Module], dim: int, like: Tensor
) -> None:
    """Fuse the outputs of ``layers`` into what follows the last of them.

    Args:
        state: the model's patch state (its ``num_layers`` layer calls are fused).
        model: the patched model; the fusion module is registered on it.
        layers: the layer modules in depth order. Fewer modules than ``state.num_layers`` means
            the model shares layers (ALBERT): its calls are then counted in order.
        dim: the hidden width D.
        like: a parameter of the model, whose dtype and device the fusion takes.
    """
    fusion = LayerFusion(state.spec.fusion, dim, state.num_layers).to(like.device, like.dtype)
    state.add_submodule(model, FUSION_ATTRIBUTE, fusion)
    for module in fusion.modules():
        state.add_parameters(module)
    state.fusion = fusion
    state.fusion_layers = list(layers)
    for layer in dict.fromkeys(layers):  # distinct modules, in order
        state.attach(layer)
        state.add_hook(layer.register_forward_hook(_fuse_layer_outputs))


def _layer_index(state: PatchState, module: nn.Module) -> int:
    context = state.context
    if len(state.fusion_layers) == state.num_layers:
        return next(i for i, layer in enumerate(state.fusion_layers) if layer is module)
    index = context.layer_calls
    context.layer_calls += 1
    if index >= state.num_layers:
        raise ValueError(
            f"a shared layer ran more than the model's {state.num_layers} layers in one forward "
            "pass; layer fusion cannot tell its layers apart"
        )
    return index


def _fuse_layer_outputs(module: nn.Module, args: tuple, output: Any) -> Any:
    state = get_patch_state(module)
    hidden = output[0] if isinstance(output, tuple) else output
    index = _layer_index(state, module)
    outputs = state.context.layer_outputs
    outputs[index] = hidden
    if index != state.num_layers - 1:
        return None
    missing = [i for i in range(state.num_layers) if i not in outputs]
    if missing:
        raise ValueError(f"layer fusion needs every layer's output; layers {missing} did not run")
    fused = state.fusion([outputs[i] for i in range(state.num_layers)])
    outputs.clear()
    return (fused, *output[1:]) if isinstance(output, tuple) else fused
