"""Which configurations fit: skip, with a recorded reason, rather than run out of time or memory.

A configuration is projected from the same method's last measured, shorter length:
``time(N) ≈ time(N₀)·(N/N₀)^e`` with the method's growth exponent (2 for softmax attention, 3 for
the explicit ``A·A``, 1 for linear methods), and likewise for memory. Methods that form explicit
``N×N`` matrices also have a floor (the matrices themselves) that applies before anything was
measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from .config import BenchConfig
from .measure import warmup_steps
from .methods import BenchMethod
from .records import BenchRecord

__all__ = ["Budget", "available_memory_mb", "skip_reason"]


@dataclass(frozen=True)
class Budget:
    """Limits of one configuration.

    Attributes:
        config_s: the most a configuration may take in total (memory step, warm-up and the
            fewest repeats), projected.
        memory_mb: the most extra memory one step may need, projected.
    """

    config_s: float = 120.0
    memory_mb: float = 8192.0

    def __post_init__(self) -> None:
        for name in ("config_s", "memory_mb"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive; got {getattr(self, name)}")


def available_memory_mb(device: str) -> float | None:
    """Memory free for one configuration right now (MiB), or None when unknown."""
    if device == "cuda":
        free, _ = torch.cuda.mem_get_info()
        return free / 2**20
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _growth(value: float, N: int, N0: int, exponent: float) -> float:
    return value * (N / N0) ** exponent


def skip_reason(
    method: BenchMethod,
    config: BenchConfig,
    previous: BenchRecord | None,
    budget: Budget,
) -> str | None:
    """Why ``config`` should not run, or None when it fits.

    Args:
        method: the configuration's method.
        config: the configuration.
        previous: the same method and mode measured at a shorter length, if any.
        budget: the limits.
    """
    floor = method.memory_floor_mb(config.shape, config.N)
    memory, basis = floor, f"its {method.matrices} explicit N×N float32 matrices"
    if previous is not None and previous.peak_mb is not None:
        projected = _growth(previous.peak_mb, config.N, previous.N, method.memory_exponent)
        if projected > memory:
            memory = projected
            basis = (
                f"projected from {previous.peak_mb:.0f} MiB at N={previous.N}, "
                f"memory ∝ N^{method.memory_exponent:g}"
            )
    if memory > budget.memory_mb:
        return (
            f"needs ≈{memory:.0f} MiB ({basis}), over the memory budget of "
            f"{budget.memory_mb:.0f} MiB"
        )
    if previous is None or previous.median_ms is None:
        return None
    step_ms = _growth(previous.median_ms, config.N, previous.N, method.time_exponent)
    steps = 1 + warmup_steps(config, step_ms) + config.min_repeats
    if step_ms * steps > budget.config_s * 1e3:
        return (
            f"projected ≈{step_ms / 1e3:.1f} s per step (from {previous.median_ms:.0f} ms at "
            f"N={previous.N}, time ∝ N^{method.time_exponent:g}); {steps} steps exceed the "
            f"per-configuration budget of {budget.config_s:.0f} s"
        )
    return None
