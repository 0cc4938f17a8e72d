"""Wall time of a step: warm-up, then the median of repeats.

On CUDA each step is bracketed by CUDA events and the device is synchronised before the elapsed
time is read, so asynchronous launches are not mistaken for finished work. On the CPU a step is
timed with ``time.perf_counter``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

__all__ = ["Timer", "cpu_timer", "cuda_timer", "median_ms", "time_steps"]

#: ``timer(step)`` runs ``step`` once and returns its duration in milliseconds.
Timer = Callable[[Callable[[], None]], float]


def cpu_timer(step: Callable[[], None], clock: Callable[[], float] = time.perf_counter) -> float:
    """Run ``step`` once; its wall time in ms by ``clock`` (seconds)."""
    start = clock()
    step()
    return (clock() - start) * 1e3


def cuda_timer(step: Callable[[], None]) -> float:
    """Run ``step`` once on the current CUDA stream; its time in ms between two CUDA events."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    step()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def median_ms(times_ms: list[float]) -> float:
    """The median of the timed repeats."""
    if not times_ms:
        raise ValueError("times_ms must hold at least one timed repeat")
    return float(statistics.median(times_ms))


def time_steps(
    step: Callable[[], None],
    *,
    timer: Timer = cpu_timer,
    warmup: int = 1,
    repeats: int = 5,
    min_repeats: int = 3,
    budget_ms: float = float("inf"),
    reset: Callable[[], None] | None = None,
) -> list[float]:
    """Time ``step``: ``warmup`` untimed runs, then between ``min_repeats`` and ``repeats`` timed.

    Timed repeats stop early, but never before ``min_repeats``, once they have used
    ``budget_ms`` in total, so slow configurations still finish in bounded time.

    Args:
        step: one step of the configuration.
        timer: :func:`cpu_timer` or :func:`cuda_timer` (anything returning a step's ms).
        warmup: untimed runs first.
        repeats: the most timed runs.
        min_repeats: the fewest timed runs.
        budget_ms: total timed ms after which no further repeat starts (past ``min_repeats``).
        reset: run before every step, outside the timed region (clears gradients).

    Returns:
        The timed runs in ms, in order.
    """
    if not 1 <= min_repeats <= repeats:
        raise ValueError(
            f"repeats ({repeats}) and min_repeats ({min_repeats}) must satisfy "
            "1 <= min_repeats <= repeats"
        )
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0; got {warmup}")
    reset = reset or (lambda: None)
    for _ in range(warmup):
        reset()
        step()
    times: list[float] = []
    while len(times) < repeats:
        if len(times) >= min_repeats and sum(times) >= budget_ms:
            break
        reset()
        times.append(timer(step))
    return times
