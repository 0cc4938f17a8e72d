"""Refusing a model too large to build or train on this machine, before any of it is allocated.

A size typed wrongly (``model.dim=1e9``, ``model.max_len=1e9``) would otherwise end in the
allocator's error after a long wait, and an absurd depth (``model.depth=100000``) would build
block after block for many minutes in silence. :func:`check_model_size` counts a lower bound of
the model's weights from its configuration alone (the attention and MLP matrices of each block,
the token, feature and position tables) and refuses, naming the fields, when that bound cannot
fit in the memory available, or when the depth exceeds :data:`MAX_DEPTH`.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..models import TransformerConfig

__all__ = [
    "BYTES_PER_TRAINED_PARAMETER",
    "MAX_DEPTH",
    "available_memory",
    "check_model_size",
    "minimum_parameters",
]

#: float32 weight, gradient and AdamW's two moments.
BYTES_PER_TRAINED_PARAMETER = 16
_BYTES_PER_VALUE = 4
#: The most blocks a model may have: ten times DeepNet's 1,000, the deepest Transformers trained.
MAX_DEPTH = 10_000
_GIB = 2**30


def minimum_parameters(config: TransformerConfig) -> tuple[int, int]:
    """A lower bound on a model's size: ``(trained parameters, other stored values)``.

    Each block holds at least its q/k/v and output projections (``4·D²``) and its MLP
    (``2·D·int(r·D)``); the input holds a token table (``vocab_size·D``), a feature projection
    (``input_dim·D``) and a learned (trained) or sinusoidal (stored) position table
    (``max_len·D``). Biases, norms, heads and the methods' own parameters come on top.
    """
    dim = config.dim
    block = 4 * dim * dim + 2 * dim * int(dim * config.mlp_ratio)
    inputs = ((config.vocab_size or 0) + (config.input_dim or 0)) * dim
    positions = config.max_len * dim if config.position != "none" else 0
    learned = config.position == "learned"
    trained = config.depth * block + inputs + (positions if learned else 0)
    return trained, 0 if learned else positions


def available_memory() -> int | None:
    """Bytes of memory this machine can still give (Linux ``MemAvailable``); None if unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _sizes(config: TransformerConfig) -> str:
    fields = ["dim", "depth", "mlp_ratio", "max_len", "vocab_size", "input_dim"]
    return ", ".join(f"model.{name}={getattr(config, name)}" for name in fields
                     if getattr(config, name) is not None)


def check_model_size(config: TransformerConfig, *, training: bool = True,
                     available: int | None = None) -> None:
    """Refuse a model that cannot be built (or trained) here, before allocating any of it.

    Args:
        config: the model's configuration.
        training: count gradients and AdamW's moments with each trained parameter
            (:data:`BYTES_PER_TRAINED_PARAMETER` bytes), else the weights alone (4 bytes).
        available: the bytes to fit in; default :func:`available_memory` (no memory check when
            unknown).

    Raises:
        ValueError: naming the model's size fields, the parameters (at least) and the memory it
            would need, when that exceeds ``available``, or when ``depth`` exceeds
            :data:`MAX_DEPTH`.
    """
    trained, stored = minimum_parameters(config)
    per_parameter = BYTES_PER_TRAINED_PARAMETER if training else _BYTES_PER_VALUE
    needed = trained * per_parameter + stored * _BYTES_PER_VALUE
    table = f" and a sinusoidal position table of {stored:.3g} values" if stored else ""
    kept = "float32 weights, gradients and AdamW moments" if training else "float32 weights"
    what = (f"{_sizes(config)}: the model would hold at least {trained:.3g} parameters{table}; "
            f"{'training' if training else 'building'} it needs at least {needed / _GIB:.3g} GiB "
            f"({kept})")
    if config.depth > MAX_DEPTH:
        raise ValueError(f"{what}; model.depth may be at most {MAX_DEPTH}")
    available = available_memory() if available is None else available
    if available is not None and needed > available:
        raise ValueError(f"{what}, and this machine has {available / _GIB:.3g} GiB available; "
                         "choose a smaller size")
