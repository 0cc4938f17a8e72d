"""Optimisation: AdamW over the model's two parameter groups, one training step (forward,
backward, clipping, update), and the learning-rate schedule (linear warm-up, then cosine, linear
or no decay)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn
from torch.optim.lr_scheduler import LambdaLR

from ..optim import parameter_groups
from .coefficient_lr import resolve_coefficient_lr
from .precision import autocast
from .run_config import OptimizerConfig, ScheduleConfig

__all__ = ["build_optimizer", "build_scheduler", "lr_factor", "training_step", "warmup_length"]


def build_optimizer(model: nn.Module, settings: OptimizerConfig) -> torch.optim.AdamW:
    """AdamW with weight decay only where it belongs (:func:`filterformer.optim.parameter_groups`:
    not on norms, biases, embeddings or filter coefficients), and the parameters a method adds
    at ``settings.coefficient_lr`` when it is set. The first group is always the shared rate's."""
    coefficient_lr = resolve_coefficient_lr(settings.coefficient_lr, settings.lr)
    return torch.optim.AdamW(
        parameter_groups(model, settings.weight_decay, coefficient_lr),
        lr=settings.lr, betas=settings.betas, eps=settings.eps,
    )


def training_step(
    model: nn.Module,
    inputs: dict[str, Any],
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    *,
    precision: str,
    device: torch.device,
    grad_clip: float | None,
    parameters: nn.Module | None = None,
) -> tuple[Tensor, Tensor]:
    """One optimiser step: forward (under autocast), backward, gradient clipping, update, and the
    gradients cleared. The learning-rate schedule is the caller's.

    Args:
        model: the model to call (possibly DDP-wrapped); its output has ``.loss``.
        inputs: the model's keyword arguments on ``device`` (``labels`` included).
        optimizer: the optimiser over ``parameters``.
        scaler: the gradient scaler (active for fp16 only).
        precision: the resolved precision (``fp32``, ``bf16``, ``fp16``).
        device: the training device.
        grad_clip: the global gradient norm to clip to (None: no clipping).
        parameters: the module whose gradients are clipped (default ``model``; the unwrapped
            model under DDP).

    Returns:
        The loss and the gradient norm before clipping, as 0-dimensional tensors.
    """
    with autocast(precision, device):
        loss = model(**inputs).loss
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    clip = grad_clip if grad_clip is not None else math.inf
    grad_norm = torch.nn.utils.clip_grad_norm_((parameters or model).parameters(), clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach(), grad_norm


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
