"""Random padded batches for the CUDA tier, drawn on the CPU."""

from __future__ import annotations

import torch
from torch import Tensor

from ..models.helpers import VOCAB

BATCH, LENGTH = 3, 12


def padding_mask(*, left: bool, batch: int = BATCH, length: int = LENGTH) -> Tensor:
    """``(batch, length)`` bool, True at real tokens: the first row full, the others padded to
    random lengths (at least 2 real tokens), on the left (as for generation) or the right."""
    lengths = torch.randint(2, length, (batch,))
    lengths[0] = length
    positions = torch.arange(length)
    if left:
        return positions[None] >= (length - lengths)[:, None]
    return positions[None] < lengths[:, None]


def token_ids(batch: int = BATCH, length: int = LENGTH) -> Tensor:
    """``(batch, length)`` random token ids of the tests' vocabulary."""
    return torch.randint(0, VOCAB, (batch, length))
