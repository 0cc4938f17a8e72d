"""Optimiser parameter groups: weight decay only where it belongs, and a learning rate of their own
for the parameters a method adds (:func:`filterformer.method_parameters.method_parameters`)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

__all__ = [
    "check_learning_rate",
    "exclude_from_weight_decay",
    "no_weight_decay",
    "parameter_groups",
    "set_coefficient_lr",
]

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


def check_learning_rate(name: str, lr: Any) -> float:
    """``lr`` as a float when it is a finite number >= 0, else ValueError naming ``name``."""
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 <= lr < math.inf:
        raise ValueError(f"{name} must be a finite learning rate >= 0; got {lr!r}")
    return float(lr)


def parameter_groups(
    model: nn.Module, weight_decay: float, coefficient_lr: float | None = None
) -> list[dict]:
    """Groups for ``torch.optim.AdamW``: decayed weights, and :func:`no_weight_decay`'s; with
    ``coefficient_lr``, the parameters a method adds
    (:func:`~filterformer.method_parameters.method_parameters`) move to groups of their own at
    that learning rate, each keeping its weight decay.

    Frozen parameters (``requires_grad=False``) are left out.

    Args:
        model: the model to optimise.
        weight_decay: the decayed group's weight decay.
        coefficient_lr: the methods' parameters' learning rate, finite and >= 0; None leaves
            them in the two groups, at the optimiser's rate (the papers' setting).

    Returns:
        The two groups, then (with ``coefficient_lr``) one group with ``"lr"`` for each of them
        that holds a method's parameter.
    """
    skip = no_weight_decay(model)
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.requires_grad:
            (no_decay if name in skip else decay).append(param)
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    if coefficient_lr is None:
        return groups
    return _with_coefficient_groups(groups, model, coefficient_lr)


def set_coefficient_lr(optimizer: torch.optim.Optimizer, model: nn.Module, lr: float) -> None:
    """Give the parameters a method adds to ``model`` a learning rate of their own in an
    optimiser that has not stepped yet (one built by someone else, e.g.
    ``transformers.Trainer.create_optimizer``): they leave their groups for copies of them at
    ``lr``, every other setting kept. A learning-rate scheduler built afterwards scales ``lr``
    as it scales the others.

    Raises:
        ValueError: for a non-finite or negative ``lr``, or an optimiser that has stepped or
            that a scheduler already holds (its rates would no longer match the groups).
    """
    if optimizer.state or any("initial_lr" in group for group in optimizer.param_groups):
        raise ValueError("set_coefficient_lr needs an optimiser that has not stepped and that no "
                         "learning-rate scheduler holds yet; call it right after building it")
    groups = _with_coefficient_groups(optimizer.param_groups, model, lr)
    optimizer.param_groups.clear()
    for group in groups:
        optimizer.add_param_group(group)


def _with_coefficient_groups(groups: list[dict], model: nn.Module, lr: float) -> list[dict]:
    """``groups`` without the methods' parameters (those left empty by the move dropped), then,
    for each group that held some, a copy of it holding them at ``lr``."""
    # Imported here: the methods' modules mark their coefficients with this module's helpers.
    from .method_parameters import method_parameters

    lr = check_learning_rate("coefficient_lr", lr)
    coefficients = {id(entry.parameter) for entry in method_parameters(model)}
    kept, added = [], []
    for group in groups:
        params = list(group["params"])
        others = [p for p in params if id(p) not in coefficients]
        moved = [p for p in params if id(p) in coefficients]
        if others or not moved:
            kept.append({**group, "params": others})
        if moved:
            added.append({**group, "params": moved, "lr": lr})
    return kept + added
