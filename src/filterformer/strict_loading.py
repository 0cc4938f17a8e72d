"""Weights loaded into a model whole or not at all: every name and shape must fit, and no
parameter may be NaN or infinite.

Training checkpoints (:func:`~filterformer.training.checkpoint.load_model_state`) and saved
models (:mod:`~filterformer.models.saved_model`) load through :func:`load_weights`, and a model
is saved only once :func:`non_finite_parameters` finds nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

__all__ = ["load_weights", "non_finite_parameters"]


def non_finite_parameters(model: nn.Module, weights: Mapping[str, torch.Tensor]) -> list[str]:
    """The names of ``model``'s parameters whose tensor in ``weights`` holds NaN or an infinity.

    Parameters only: a buffer may hold infinities on purpose (e.g. an attention mask). Every
    entry of ``model``'s state dict that is not a buffer is a parameter's, under the name it is
    saved by (SAMSA's ``support_rows`` are saved as ``support_keys`` and ``support_values``).
    """
    buffers = {name for name, _ in model.named_buffers(remove_duplicate=False)}
    return [name for name in model.state_dict()
            if name not in buffers and torch.is_tensor(weights.get(name))
            and not torch.isfinite(weights[name]).all()]


def load_weights(model: nn.Module, weights: Mapping[str, torch.Tensor], source: str) -> None:
    """Load ``weights`` (a state dict) into ``model``; missing, unexpected, reshaped or
    non-finite parameters raise.

    Args:
        model: the model, built as the weights' model was.
        weights: its state dict.
        source: where the weights come from, as messages name it (``checkpoint run/best.pt``).

    Raises:
        ValueError: naming ``source`` and the first mismatching or non-finite parameters.
    """
    expected = model.state_dict()
    missing = sorted(set(expected) - set(weights))
    unexpected = sorted(set(weights) - set(expected))
    reshaped = [
        f"{name}: checkpoint {tuple(weights[name].shape)} vs model {tuple(tensor.shape)}"
        for name, tensor in expected.items()
        if name in weights and weights[name].shape != tensor.shape
    ]
    problems = []
    if missing:
        problems.append(f"missing {first_names(missing)}")
    if unexpected:
        problems.append(f"unexpected {first_names(unexpected)}")
    if reshaped:
        problems.append(f"shape mismatch {first_names(reshaped)}")
    if problems:
        raise ValueError(
            f"{source} does not fit this model ({'; '.join(problems)}); was it saved "
            "with another model configuration?"
        )
    non_finite = non_finite_parameters(model, weights)
    if non_finite:
        raise ValueError(
            f"{source} holds non-finite weights (NaN or infinity in "
            f"{first_names(non_finite)}): the training that saved it diverged"
        )
    model.load_state_dict(weights)


def first_names(names: list[str], count: int = 3) -> str:
    """The first ``count`` of ``names`` and how many more: ``a, b, c and 4 more``."""
    more = f" and {len(names) - count} more" if len(names) > count else ""
    return ", ".join(names[:count]) + more
