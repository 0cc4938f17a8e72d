"""Numeric precision of a run: fp32 everywhere, or autocast (bf16/fp16) on a GPU."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["autocast", "grad_scaler", "resolve_precision"]

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_precision(precision: str, device: torch.device) -> str:
    """``fp32``, ``bf16`` or ``fp16`` for ``precision`` on ``device``.

    ``auto`` is bf16 on a GPU that supports it and fp32 otherwise.

    Raises:
        ValueError: for mixed precision on a CPU, where autocast would only slow training down.
    """
    on_gpu = device.type == "cuda"
    if precision == "auto":
        return "bf16" if on_gpu and torch.cuda.is_bf16_supported() else "fp32"
    if precision in _DTYPES and not on_gpu:
        raise ValueError(
            f"precision {precision!r} (mixed precision) needs a GPU; valid on CPU: auto, fp32"
        )
    return precision


@contextlib.contextmanager
def autocast(precision: str, device: torch.device) -> Iterator[None]:
    """Autocast to the resolved ``precision`` (no-op for fp32)."""
    if precision not in _DTYPES:
        yield
        return
    with torch.autocast(device_type=device.type, dtype=_DTYPES[precision]):
        yield


def grad_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """A gradient scaler, active only for fp16 (bf16 and fp32 need none)."""
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16")
