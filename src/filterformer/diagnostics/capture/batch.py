"""Reading model inputs and the padding mask out of a batch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["MASK_KEYS", "batch_mask", "model_device", "to_device", "without_labels"]

#: Batch keys read as the padding mask (True or 1 at real tokens), in order of preference.
MASK_KEYS = ("padding_mask", "attention_mask")


def model_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter or buffer (CPU for a module with none)."""
    for tensor in (*model.parameters(), *model.buffers()):
        return tensor.device
    return torch.device("cpu")


def to_device(batch: Any, device: torch.device) -> Any:
    """Move every tensor of a (nested) batch to ``device``."""
    if isinstance(batch, Tensor):
        return batch.to(device)
    if isinstance(batch, Mapping):
        return {key: to_device(value, device) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(value, device) for value in batch)
    return batch


def without_labels(batch: Mapping[str, Any]) -> dict[str, Any]:
    """The batch without ``labels`` (the diagnostics need no loss)."""
    return {key: value for key, value in batch.items() if key != "labels"}


def batch_mask(batch: Any, batch_size: int, length: int, device: torch.device) -> Tensor:
    """The ``(B, N)`` bool padding mask of a batch: its first :data:`MASK_KEYS` entry, else all
    True.

    Raises:
        ValueError: when the mask does not have shape ``(batch_size, length)``.
    """
    mask = None
    if isinstance(batch, Mapping):
        mask = next((batch[key] for key in MASK_KEYS if batch.get(key) is not None), None)
    if mask is None:
        return torch.ones(batch_size, length, dtype=torch.bool, device=device)
    if tuple(mask.shape) != (batch_size, length):
        raise ValueError(
            f"the batch's padding mask must have shape (batch, tokens) = ({batch_size}, "
            f"{length}); got {tuple(mask.shape)}"
        )
    return mask.to(device=device, dtype=torch.bool)
