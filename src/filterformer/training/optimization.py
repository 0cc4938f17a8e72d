"""The learning-rate schedule: linear warm-up, then cosine, linear or no decay."""

from __future__ import annotations

import math

import torch
from torch.optim.lr_scheduler import LambdaLR

from .run_config import ScheduleConfig

__all__ = ["build_scheduler", "lr_factor", "warmup_length"]


def warmup_length(schedule: ScheduleConfig, total_steps: int) -> int:
    """Warm-up steps: ``warmup_steps`` when set, else ``warmup_ratio`` of ``total_steps``."""
    if schedule.warmup_steps is not None:
        return min(schedule.warmup_steps, total_steps)
    return round(schedule.warmup_ratio * total_steps)


def lr_factor(step: int, schedule: ScheduleConfig, total_steps: int) -> float:
    """The learning rate of optimiser step ``step`` (0-based) over the peak.

    Warm-up rises linearly and reaches the peak at its last step; the decay then goes from
    the peak towards ``min_lr_ratio``, which it would reach one step after the last, so no
    step runs at a zero learning rate.
    """
    warmup = warmup_length(schedule, total_steps)
    if step < warmup:
        return (step + 1) / warmup
    if schedule.decay == "constant":
        return 1.0
    progress = min((step - warmup) / max(total_steps - warmup, 1), 1.0)
    low = schedule.min_lr_ratio
    if schedule.decay == "linear":
        return low + (1.0 - low) * (1.0 - progress)
    return low + (1.0 - low) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_scheduler(
    optimizer: torch.optim.Optimizer, schedule: ScheduleConfig, total_steps: int
) -> LambdaLR:
    """A per-step :class:`LambdaLR` following :func:`lr_factor` (its state resumes exactly)."""
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1; got {total_steps}")
    return LambdaLR(optimizer, lambda step: lr_factor(step, schedule, total_steps))
