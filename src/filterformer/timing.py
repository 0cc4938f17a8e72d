"""Steps of several sides timed side by side, as ``bench`` and ``compare``'s cost do: plain
alternation in rounds (0, 1, …, 0, 1, …), so drifts in load fall on every side alike; a side's
time is the median over rounds of its mean step, a ratio the median of the rounds' ratios."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

__all__ = ["MAX_STEPS_PER_ROUND", "PairedStepTimes", "StepTimer", "paired_step_times",
           "steps_per_round", "synchronized_clock", "time_step"]

#: ``timer(step)`` runs ``step`` once and returns its duration in ms.
StepTimer = Callable[[Callable[[], None]], float]
MAX_STEPS_PER_ROUND = 8


def synchronized_clock() -> float:
    """``time.perf_counter()`` (s) once the work queued on a GPU this process uses is done."""
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
    return time.perf_counter()


def time_step(step: Callable[[], None], clock: Callable[[], float] = synchronized_clock) -> float:
    """Run ``step`` once; its time in ms by ``clock`` (seconds)."""
    start = clock()
    step()
    return (clock() - start) * 1e3


def steps_per_round(*step_ms: float) -> tuple[int, ...]:
    """Per side, ``round(longest step / its step)`` steps a round, at most 8."""
    if not step_ms or any(not ms > 0 for ms in step_ms):
        raise ValueError(f"step times must be > 0; got {' and '.join(map(str, step_ms))}")
    return tuple(max(1, min(MAX_STEPS_PER_ROUND, round(max(step_ms) / ms))) for ms in step_ms)


@dataclass
class PairedStepTimes:
    """Per side, the ``steps_per_round`` it ran and its mean step (s) in each round."""

    steps_per_round: list[int]
    round_step_s: list[list[float]]

    @property
    def median_s(self) -> list[float]:
        """Per side, the median over rounds of its mean step (seconds)."""
        return [statistics.median(rounds) for rounds in self.round_step_s]

    def ratio(self, side: int, baseline: int) -> tuple[float, float, float]:
        """``(median, lower, upper quartile)`` of the rounds' ratios of ``side`` to ``baseline``."""
        rounds = zip(self.round_step_s[side], self.round_step_s[baseline], strict=True)
        low, median, high = statistics.quantiles([a / b for a, b in rounds], n=4,
                                                 method="inclusive")
        return median, low, high


def paired_step_times(
    steps: Sequence[Callable[[], None]], *, rounds: int, warmup_steps: int = 1,
    timer: StepTimer | None = None, prepare: Callable[[int, int], None] | None = None,
    repeats: Sequence[int] | None = None,
) -> PairedStepTimes:
    """Alternate ``steps`` (one per side) in ``rounds`` rounds of ``repeats[side]`` steps each
    (by default :func:`steps_per_round` of the fastest of ``warmup_steps`` uncounted rounds of
    one step). A side's block is timed whole, or, with ``timer`` or ``prepare``, step by step by
    ``timer`` (default :func:`time_step`) after an untimed ``prepare(side, round)``."""
    if rounds < 1 or warmup_steps < (0 if repeats else 1):
        raise ValueError(f"rounds and warmup_steps must be >= 1; got {rounds} and {warmup_steps}")

    def block(side: int, index: int, count: int) -> float:  # seconds per step
        if timer is None and prepare is None:
            return time_step(lambda: [steps[side]() for _ in range(count)]) / count / 1e3
        total = 0.0
        for _ in range(count):
            if prepare is not None:
                prepare(side, index)
            total += (timer or time_step)(steps[side])
        return total / count / 1e3

    sides = range(len(steps))
    warm = [[block(side, index, 1) for index in range(warmup_steps)] for side in sides]
    repeats = tuple(repeats or steps_per_round(*(min(times) for times in warm)))
    timed = [[block(side, index, repeats[side]) for side in sides] for index in range(rounds)]
    return PairedStepTimes(list(repeats), [list(side) for side in zip(*timed, strict=True)])
