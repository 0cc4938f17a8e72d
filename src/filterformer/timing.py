"""Steps of several sides timed side by side: plain alternation in rounds, per-round means.

Runs timed minutes apart on a shared machine meet different loads. Alternating the sides in
rounds (0, 1, …, then 0, 1, … again), each side's steps back to back, lets drifts in load fall on
every side alike; a side with a shorter step runs several a round, about as long in all as the
longest side's one. A side's time is the median over rounds of its mean step in each round, a ratio
of two sides the median over rounds of the ratio of their round means. A round's block is timed
by ``torch.utils.benchmark.Timer.timeit`` (which warms each block with two untimed steps), or step
by step by a given ``timer`` with an untimed ``prepare`` before each step, as ``filterformer
compare``'s cost measurement does (:mod:`filterformer.training.compare.cost`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.utils import benchmark

__all__ = ["MAX_STEPS_PER_ROUND", "PairedStepTimes", "StepTimer", "median_and_quartiles",
           "paired_step_times", "steps_per_round", "synchronized_clock", "time_step"]

#: ``timer(step)`` runs ``step`` once and returns its duration in ms.
StepTimer = Callable[[Callable[[], None]], float]
MAX_STEPS_PER_ROUND = 8


def synchronized_clock() -> float:
    """``time.perf_counter()`` (seconds) once the work queued on the GPU is done, where this
    process uses CUDA; a process that has not touched CUDA never does here."""
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
    return time.perf_counter()


def time_step(step: Callable[[], None], clock: Callable[[], float] = synchronized_clock) -> float:
    """Run ``step`` once; its time in ms by ``clock`` (seconds)."""
    start = clock()
    step()
    return (clock() - start) * 1e3


def steps_per_round(*step_ms: float) -> tuple[int, ...]:
    """Per side, ``round(longest step / its step)`` steps a round, at most
    :data:`MAX_STEPS_PER_ROUND`, from each side's step time (any unit, > 0)."""
    if not step_ms or any(not ms > 0 for ms in step_ms):
        raise ValueError(f"step times must be > 0; got {' and '.join(map(str, step_ms))}")
    return tuple(max(1, min(MAX_STEPS_PER_ROUND, round(max(step_ms) / ms))) for ms in step_ms)


def median_and_quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """``(median, lower quartile, upper quartile)`` of two or more ``values``."""
    low, median, high = statistics.quantiles(values, n=4, method="inclusive")
    return median, low, high


@dataclass
class PairedStepTimes:
    """Per side, the ``steps_per_round`` it ran and its mean step in each round
    (``round_step_s``, seconds, in round order)."""

    steps_per_round: list[int]
    round_step_s: list[list[float]]

    @property
    def median_s(self) -> list[float]:
        """Per side, the median over rounds of its mean step (seconds)."""
        return [statistics.median(rounds) for rounds in self.round_step_s]

    def ratio(self, side: int, baseline: int) -> tuple[float, float, float]:
        """Each round's mean step of ``side`` over ``baseline``'s: their median and quartiles
        (two rounds or more)."""
        rounds = zip(self.round_step_s[side], self.round_step_s[baseline], strict=True)
        return median_and_quartiles([a / b for a, b in rounds])


def paired_step_times(
    steps: Sequence[Callable[[], None]], *, rounds: int, warmup_steps: int = 1,
    timer: StepTimer | None = None, prepare: Callable[[int, int], None] | None = None,
    repeats: Sequence[int] | None = None,
) -> PairedStepTimes:
    """Alternate ``steps`` (one per side) in ``rounds`` timed rounds after ``warmup_steps``
    rounds of one step per side (none needed where ``repeats`` is given).

    Each side runs ``repeats[side]`` steps a round; by default its fastest warm-up step sets
    them (:func:`steps_per_round`). Without ``timer`` and ``prepare`` a block is timed by
    ``torch.utils.benchmark``; else ``prepare(side, round)`` runs before each step, untimed
    (warm-up rounds numbered from 0 too), and ``timer`` (default :func:`time_step`) times it.
    """
    if rounds < 1 or warmup_steps < (0 if repeats else 1):
        raise ValueError(f"rounds and warmup_steps must be >= 1; got {rounds} and {warmup_steps}")

    def block(side: int, index: int, count: int) -> float:  # seconds per step
        if timer is None and prepare is None:
            measured = benchmark.Timer("step()", globals={"step": steps[side]},
                                       timer=synchronized_clock,
                                       num_threads=torch.get_num_threads()).timeit(count)
            return measured.mean
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
