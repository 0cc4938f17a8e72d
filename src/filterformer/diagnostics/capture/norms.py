"""Recording each layer's LayerNorm input std per token (for σ1, σ2) by forward pre-hooks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from torch import Tensor, nn

from ..layernorm import smallest_over_tokens, token_std

__all__ = ["is_layer_norm", "layer_norms", "record_norm_stds", "smallest_norm_stds"]


def is_layer_norm(module: nn.Module) -> bool:
    """``nn.LayerNorm`` or a model's own LayerNorm class (by name, e.g. ``T5LayerNorm``)."""
    return isinstance(module, nn.LayerNorm) or "LayerNorm" in type(module).__name__


def layer_norms(layer: nn.Module) -> list[nn.Module]:
    """A layer's LayerNorms in registration order: ``[norm1, norm2]`` in a Transformer block."""
    return [m for m in layer.modules() if m is not layer and is_layer_norm(m)]


@contextmanager
def record_norm_stds(layers: Sequence[nn.Module]) -> Iterator[list[list[Tensor]]]:
    """Hook every layer's LayerNorms and record the per-token std of their token inputs.

    Args:
        layers: the model's layers in order.

    Yields:
        One list per layer, to which each of its LayerNorms appends ``(B, N)`` when it runs on
        a ``(B, N, D)`` input (per-head norms on other shapes are skipped).
    """
    records: list[list[Tensor]] = [[] for _ in layers]
    handles = []

    def hook(index: int):
        def record(module: nn.Module, args: tuple[Any, ...]) -> None:
            if args and isinstance(args[0], Tensor) and args[0].dim() == 3:
                records[index].append(token_std(args[0].detach()))

        return record

    try:
        for index, layer in enumerate(layers):
            handles += [n.register_forward_pre_hook(hook(index)) for n in layer_norms(layer)]
        yield records
    finally:
        for handle in handles:
            handle.remove()


def smallest_norm_stds(
    records: Sequence[Sequence[Tensor]], mask: Tensor
) -> tuple[tuple[Tensor, ...], ...] | None:
    """Reduce :func:`record_norm_stds`' records to ``σ`` per LayerNorm, each ``(B,)``; None
    when nothing was recorded."""
    if not any(records):
        return None
    return tuple(
        tuple(smallest_over_tokens(s, mask) for s in layer if s.shape == mask.shape)
        for layer in records
    )
