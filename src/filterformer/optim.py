"""Optimiser parameter groups: weight decay only where it belongs."""

from __future__ import annotations

from torch import nn

__all__ = ["exclude_from_weight_decay", "no_weight_decay", "parameter_groups"]

_NORMS = (nn.LayerNorm, nn.GroupNorm, nn.BatchNorm1d, nn.BatchNorm2d, nn.RMSNorm, nn.Embedding)


def exclude_from_weight_decay(param: nn.Parameter) -> nn.Parameter:
    """Mark a parameter (filter coefficients, λ, positional codes, …) as never decayed."""
    param._no_weight_decay = True
    return param


def no_weight_decay(model: nn.Module) -> set[str]:
    """Names of parameters that must not be decayed.

    Biases and other 0/1-dimensional parameters, normalisation and embedding weights, and every
    parameter marked by :func:`exclude_from_weight_decay` (GFSA's and AGF's filter coefficients,
    NeuTRENO's learnable λ, patched-in parameters).
    """
    names = set()
    for module_name, module in model.named_modules():
        for name, param in module.named_parameters(recurse=False):
            full = f"{module_name}.{name}" if module_name else name
            marked = getattr(param, "_no_weight_decay", False)
            if param.ndim <= 1 or isinstance(module, _NORMS) or marked:
                names.add(full)
    return names


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two groups for ``torch.optim.AdamW``: decayed weights, and :func:`no_weight_decay`'s.

    Frozen parameters (``requires_grad=False``) are left out.
    """
    skip = no_weight_decay(model)
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.requires_grad:
            (no_decay if name in skip else decay).append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
