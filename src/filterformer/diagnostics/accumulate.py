"""Streaming accumulators: per-layer statistics over many batches in bounded memory."""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["MeanAccumulator", "MinAccumulator", "SumAccumulator"]


class MeanAccumulator:
    """Mean of per-sample values over every sample seen, ignoring NaN (undefined samples).

    Values arrive as ``(B,)`` or ``(B, M)`` per update; ``(B, M)`` rows may grow in M from one
    update to the next (shorter rows count as zeros past their end, as in a zero-padded
    spectrum).
    """

    def __init__(self) -> None:
        self.total: Tensor | None = None
        self.count: Tensor | None = None

    def update(self, values: Tensor) -> None:
        """Add ``(B,)`` or ``(B, M)`` values (float64 on the CPU from here on)."""
        values = values.detach().to("cpu", torch.float64)
        if values.dim() == 1:
            values = values[:, None]
        finite = ~values.isnan()
        total, count = values.nan_to_num(nan=0.0).sum(0), finite.sum(0).to(torch.float64)
        if self.total is None:
            self.total, self.count = total, count
            return
        size = max(total.shape[0], self.total.shape[0])
        self.total = _pad(self.total, size) + _pad(total, size)
        # Samples too short for a position still count there: they are 0 past their end.
        self.count = _pad(self.count, size, self.count.max()) + _pad(count, size, count.max())

    def mean(self) -> Tensor:
        """``(M,)`` means (``(1,)`` for scalars); NaN where nothing finite was seen."""
        if self.total is None:
            return torch.tensor([float("nan")], dtype=torch.float64)
        return self.total / self.count.where(self.count > 0, torch.nan)

    def scalar(self) -> float:
        """The mean of scalar values."""
        return float(self.mean()[0])


class MinAccumulator:
    """Smallest value seen, ignoring NaN."""

    def __init__(self) -> None:
        self.value = float("nan")

    def update(self, values: Tensor) -> None:
        finite = values.detach()[~values.isnan()]
        if finite.numel():
            smallest = float(finite.min())
            self.value = smallest if math.isnan(self.value) else min(self.value, smallest)


class SumAccumulator:
    """A running sum of same-shape tensors (e.g. Gram matrices), in float64 on the CPU."""

    def __init__(self) -> None:
        self.total: Tensor | None = None

    def update(self, value: Tensor) -> None:
        value = value.detach().to("cpu", torch.float64)
        self.total = value if self.total is None else self.total + value


def _pad(values: Tensor, size: int, fill: float | Tensor = 0.0) -> Tensor:
    if values.shape[0] == size:
        return values
    return torch.cat([values, values.new_full((size - values.shape[0],), float(fill))])
