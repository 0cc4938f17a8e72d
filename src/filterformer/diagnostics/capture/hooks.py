"""Capture from any ``nn.Module`` by forward hooks on named layers.

The embedding output ``H_0`` is the first named layer's input; ``H_l`` is layer ``l``'s output (the
first element when a layer returns a tuple, as Hugging Face layers do).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from torch import Tensor, nn

from .batch import batch_mask, model_device, to_device, without_labels
from .captured import CapturedForward
from .norms import record_norm_stds, smallest_norm_stds

__all__ = ["call_model", "capture_with_hooks", "resolve_layers"]


def resolve_layers(model: nn.Module, names: Sequence[str]) -> list[nn.Module]:
    """The submodules named ``names`` (as in ``model.named_modules()``), in that order.

    Raises:
        ValueError: naming the unknown names and a few valid ones.
    """
    if not names:
        raise ValueError("layers must name at least one submodule")
    modules = dict(model.named_modules())
    unknown = [name for name in names if name not in modules]
    if unknown:
        valid = [name for name in modules if name][:20]
        raise ValueError(f"layers {unknown} are not submodules of the model; valid names: {valid}")
    return [modules[name] for name in names]


def call_model(model: nn.Module, batch: Any) -> Any:
    """``model(**batch)`` for a dict (without ``labels``), ``model(*batch)`` for a list or tuple,
    else ``model(batch)``."""
    if isinstance(batch, Mapping):
        return model(**without_labels(batch))
    if isinstance(batch, (list, tuple)):
        return model(*batch)
    return model(batch)


def _first_tensor(output: Any) -> Tensor:
    if isinstance(output, Tensor):
        return output
    if isinstance(output, (list, tuple)) and output and isinstance(output[0], Tensor):
        return output[0]
    raise ValueError(f"a hooked layer must return a tensor or a tuple starting with one; got "
                     f"{type(output).__name__}")


def capture_with_hooks(
    model: nn.Module,
    batch: Any,
    layers: Sequence[str],
    *,
    forward: Callable[[nn.Module, Any], Any] = call_model,
    norms: bool = True,
) -> CapturedForward:
    """Run ``model`` on ``batch`` and record the hidden states around the named layers.

    Args:
        model: any module whose named layers map ``(B, N, D)`` to ``(B, N, D)``.
        batch: the model's input; a dict's ``padding_mask`` or ``attention_mask`` (True or 1 at
            real tokens) is the padding mask, otherwise every token is real.
        layers: qualified names of the layers, in order (e.g. ``["encoder.layers.0", …]``).
        forward: how to call the model on the batch (default :func:`call_model`).
        norms: record the LayerNorms inside each layer (``σ1``, ``σ2``).

    Returns:
        :class:`CapturedForward` without attention maps.
    """
    modules = resolve_layers(model, layers)
    batch = to_device(batch, model_device(model))
    first_input: list[Tensor] = []
    outputs: list[list[Tensor]] = [[] for _ in modules]
    handles = [
        modules[0].register_forward_pre_hook(
            lambda m, args, kwargs: first_input.append(
                _first_tensor(args if args else tuple(kwargs.values()))
            ),
            with_kwargs=True,
        )
    ]
    for index, module in enumerate(modules):
        handles.append(module.register_forward_hook(
            lambda m, args, out, index=index: outputs[index].append(_first_tensor(out))
        ))
    try:
        with record_norm_stds(modules if norms else []) as stds:
            forward(model, batch)
    finally:
        for handle in handles:
            handle.remove()
    missing = [name for name, out in zip(layers, outputs, strict=True) if len(out) != 1]
    if missing or len(first_input) != 1:
        raise ValueError(f"each named layer must run exactly once per forward pass; {missing} "
                         "did not")
    hidden = (first_input[0], *(out[0] for out in outputs))
    mask = batch_mask(batch, hidden[0].shape[0], hidden[0].shape[1], hidden[0].device)
    norm_stds = smallest_norm_stds(stds, mask)
    return CapturedForward(hidden_states=hidden, mask=mask, norm_stds=norm_stds)
