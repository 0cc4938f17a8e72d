"""A diverging run: a training step whose loss or gradient norm is not finite.

Once a loss is NaN or infinite, every later weight and metric is meaningless, so the run stops
at that step rather than training on and reporting an accuracy. Under fp16 mixed precision an
infinite gradient is expected now and then: the gradient scaler skips that update and lowers its
scale, so there only the loss counts.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["TrainingDiverged", "divergence_reason"]


class TrainingDiverged(ValueError):
    """Training produced a non-finite loss or gradient; the run stopped.

    Attributes:
        step: the optimiser step (1-based) that diverged.
        reason: what was not finite, e.g. ``loss is nan``.
        run_dir: the run directory.
    """

    def __init__(self, step: int, reason: str, run_dir: Any) -> None:
        self.step, self.reason, self.run_dir = step, reason, str(run_dir)
        super().__init__(
            f"training diverged at step {step}: {reason}; the run in {run_dir} stopped without "
            "a result (a lower optimizer.lr, grad_clip or a warm-up usually keeps it finite)"
        )

    def to_dict(self) -> dict[str, Any]:
        """``{"step": …, "reason": …}``, as ``summary.json`` and ``results.json`` keep it."""
        return {"step": self.step, "reason": self.reason}


def divergence_reason(loss: float, grad_norm: float, *, scaled: bool) -> str | None:
    """Why a step diverged, or None when its loss and gradient norm are finite.

    Args:
        loss: the step's loss.
        grad_norm: its gradient norm before clipping.
        scaled: the gradients went through an fp16 gradient scaler, which skips the updates
            whose gradients overflow (so a non-finite gradient norm is no divergence).
    """
    if not math.isfinite(loss):
        return f"loss is {loss}"
    if not scaled and not math.isfinite(grad_norm):
        return f"gradient norm is {grad_norm}"
    return None
