"""Key/value cache for incremental causal decoding."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["DecodingCache", "LayerCache"]


class LayerCache:
    """One layer's past keys, values and derived signals, each ``(B, h, T, d)``.

    ``signals`` hold per-position quantities a method needs at past positions besides V: GFSA
    keeps ``Ā^n V`` for n = 1..(order − 1), since ``Ā^{n+1}V`` at a new position mixes the past
    positions' ``Ā^n V``. Causality makes those past values final.
    """

    def __init__(self) -> None:
        self.keys: Tensor | None = None
        self.values: Tensor | None = None
        self.signals: dict[str, Tensor] = {}

    @property
    def length(self) -> int:
        return 0 if self.keys is None else self.keys.shape[-2]

    def append_kv(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Append new positions' keys and values; return all of them."""
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat([self.keys, keys], dim=-2)
            self.values = torch.cat([self.values, values], dim=-2)
        return self.keys, self.values

    def append_signal(self, name: str, value: Tensor) -> Tensor:
        """Append new positions of a named signal; return it over all positions."""
        past = self.signals.get(name)
        self.signals[name] = value if past is None else torch.cat([past, value], dim=-2)
        return self.signals[name]

    def append_power(self, n: int, power: Tensor) -> Tensor:
        """Append the new positions' ``Ā^n V`` (GFSA); return it at every position so far."""
        return self.append_signal(f"power{n}", power)

    def power(self, n: int) -> Tensor | None:
        """``Ā^n V`` at every position so far, ``(B, h, T, d)``, or None before any."""
        return self.signals.get(f"power{n}")

    def map_tensors(self, fn: Callable[[Tensor], Tensor]) -> None:
        """Replace every kept ``(B, h, T, d)`` tensor (keys, values, signals) by ``fn`` of it: a
        batch selection, reordering or crop then acts alike on everything the layer keeps."""
        if self.keys is not None:
            self.keys = fn(self.keys)
        if self.values is not None:
            self.values = fn(self.values)
        self.signals = {name: fn(signal) for name, signal in self.signals.items()}


class DecodingCache:
    """The caches of every layer of a model, and the number of positions already decoded."""

    def __init__(self, num_layers: int) -> None:
        self.layers = [LayerCache() for _ in range(num_layers)]

    @property
    def length(self) -> int:
        return self.layers[0].length if self.layers else 0
