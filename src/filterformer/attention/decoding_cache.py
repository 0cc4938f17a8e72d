"""Key/value cache for incremental causal decoding, preallocated in buckets of positions.

A cache that grew by one position a step would concatenate the whole past every token. Here every
kept tensor lives in a buffer whose capacity is a multiple of ``bucket`` positions, written in
place; a decoding step hands attention the whole buffer with the offset of its first query, and
attention reads only the positions held (see :func:`~filterformer.functional.attend`: the unused
positions come after every query). Unused positions are zeros, or positions dropped by
:meth:`LayerCache.crop`: finite values, never read.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..checks import check_integer

__all__ = ["CACHE_BUCKET", "DecodingCache", "LayerCache"]

#: Positions by which a cache's buffers grow (the default of ``bucket``): a copy of the past every
#: 256 tokens, and at most 255 unused positions held.
CACHE_BUCKET = 256


class LayerCache:
    """One layer's past keys, values and derived signals, each kept as ``(B, h, capacity, d)``.

    ``signals`` hold per-position quantities a method needs at past positions besides V: GFSA
    keeps ``Ā^n V`` for n = 1..(order − 1), since ``Ā^{n+1}V`` at a new position mixes the past
    positions' ``Ā^n V``. Causality makes those past values final.

    A step first appends the new positions' keys and values (:meth:`append_kv`), then any signal
    at the same positions (:meth:`append_signal`). Both return the tensor over :attr:`span`
    positions: exactly the positions held on a step without a past (a prompt: the attention is
    square), the whole buffer afterwards.

    Args:
        bucket: positions by which the buffers grow (an integer >= 1); :data:`CACHE_BUCKET`
            when None.
    """

    def __init__(self, bucket: int | None = None) -> None:
        self.bucket = check_integer("bucket", CACHE_BUCKET if bucket is None else bucket,
                                    minimum=1)
        #: positions held.
        self.length = 0
        #: the position of the first of the last appended positions (the step's first query).
        self.offset = 0
        #: positions every buffer has room for.
        self.capacity = 0
        self._buffers: dict[str, Tensor] = {}
        #: buffers that are the first step's own tensors (kept without a copy), copied before a
        #: later step writes into them.
        self._borrowed: set[str] = set()

    @property
    def span(self) -> int:
        """The key positions a step attends over: the buffer once there is a past."""
        return self.length if self.offset == 0 else self.capacity

    def append_kv(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Append new positions' keys and values ``(B, h, L, d)``; return them over every
        position of :attr:`span`, ``(B, h, span, d)``."""
        self._advance(keys.shape[-2])
        return self._write("keys", keys), self._write("values", values)

    def append_signal(self, name: str, value: Tensor) -> Tensor:
        """Write a named signal at the last appended positions; return it over :attr:`span`."""
        return self._write(name, value)

    def append_power(self, n: int, power: Tensor) -> Tensor:
        """Write the new positions' ``Ā^n V`` (GFSA); return it over :attr:`span`."""
        return self.append_signal(f"power{n}", power)

    def power(self, n: int) -> Tensor | None:
        """``Ā^n V`` at every position held, ``(B, h, length, d)``, or None before any."""
        buffer = self._buffers.get(f"power{n}")
        return None if buffer is None else buffer[..., : self.length, :]

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions (all of them when fewer are held)."""
        check_integer("length", length, minimum=0)
        self.length = min(self.length, length)
        self.offset = min(self.offset, self.length)

    def map_tensors(self, fn: Callable[[Tensor], Tensor]) -> None:
        """Replace every buffer (keys, values, signals), ``(B, h, capacity, d)``, by ``fn`` of
        it: a batch selection or reordering (along dim 0) then acts alike on everything the
        layer keeps. A ``fn`` that shortens the positions crops to what is left; use
        :meth:`crop` to crop without copying."""
        self._buffers = {name: fn(buffer) for name, buffer in self._buffers.items()}
        if self._buffers:
            self.capacity = min(buffer.shape[-2] for buffer in self._buffers.values())
            self.crop(self.capacity)

    def _advance(self, new: int) -> None:
        """Hold ``new`` more positions, growing the buffers to the next bucket if needed.

        A step without a past (a prompt, or a training pass through a patched model) keeps its
        tensors as they are: the buffers are bucketed only once a later step appends."""
        self.offset, self.length = self.length, self.length + new
        if not self._buffers:
            self.capacity = self.length
        elif self.length > self.capacity:
            self.capacity = -(-self.length // self.bucket) * self.bucket
            self._buffers = {name: _grown(buffer, self.capacity)
                             for name, buffer in self._buffers.items()}
            self._borrowed.clear()

    def _write(self, name: str, value: Tensor) -> Tensor:
        if value.shape[-2] != self.length - self.offset:
            raise ValueError(
                f"{name} is written at the positions last appended ({self.length - self.offset},"
                f" from {self.offset}); got {value.shape[-2]}: append the step's keys first"
            )
        buffer = self._buffers.get(name)
        if buffer is None and self.offset == 0 and value.shape[-2] == self.capacity:
            self._buffers[name] = value
            self._borrowed.add(name)
            return value
        if buffer is None:
            buffer = value.new_zeros(*value.shape[:-2], self.capacity, value.shape[-1])
        elif (buffer.shape[:-2], buffer.shape[-1], buffer.dtype, buffer.device) != (
            value.shape[:-2], value.shape[-1], value.dtype, value.device
        ):
            raise ValueError(
                f"the decoding cache holds {name} of shape (B, h, T, d) = "
                f"{tuple(buffer.shape[:-2])} + (T, {buffer.shape[-1]}), {buffer.dtype} on "
                f"{buffer.device}; got new positions of shape {tuple(value.shape)}, "
                f"{value.dtype} on {value.device}: decode with the batch and model it was "
                "filled with (reorder or select rows with map_tensors), or start a new cache"
            )
        if name in self._borrowed or buffer.requires_grad or value.requires_grad or (
            not torch.compiler.is_compiling()  # inference tensors cannot be traced
            and buffer.is_inference() and not torch.is_inference_mode_enabled()
        ):
            # The buffer is a step's own tensor, earlier steps' graphs hold it (writing it in
            # place would break them), or it was filled under inference mode, which only allows
            # writing it there.
            buffer = buffer.clone()
            self._borrowed.discard(name)
        buffer[..., self.offset : self.length, :] = value
        self._buffers[name] = buffer
        return buffer[..., : self.span, :]


def _grown(buffer: Tensor, capacity: int) -> Tensor:
    """``buffer`` ``(..., T, d)`` followed by zeros up to ``capacity`` positions."""
    tail = buffer.new_zeros(*buffer.shape[:-2], capacity - buffer.shape[-2], buffer.shape[-1])
    return torch.cat([buffer, tail], dim=-2)


class DecodingCache:
    """The caches of every layer of a model, and the number of positions already decoded.

    Args:
        num_layers: the model's layers.
        bucket: positions by which each layer's buffers grow (:data:`CACHE_BUCKET` when None).
    """

    def __init__(self, num_layers: int, bucket: int | None = None) -> None:
        self.layers = [LayerCache(bucket) for _ in range(num_layers)]

    @property
    def length(self) -> int:
        return self.layers[0].length if self.layers else 0

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions of every layer."""
        for layer in self.layers:
            layer.crop(length)

    def map_tensors(self, fn: Callable[[Tensor], Tensor]) -> None:
        """Apply ``fn`` to every layer's buffers (see :meth:`LayerCache.map_tensors`): e.g.
        ``cache.map_tensors(lambda t: t.index_select(0, beams))`` to follow beam search."""
        for layer in self.layers:
            layer.map_tensors(fn)
