"""Steps of several sides timed side by side: one clock, alternated rounds, per-round means.

Runs timed minutes apart on a shared machine meet different loads. Alternating the sides' steps
in rounds, so that drifts in load fall on every side alike, makes their times comparable: a side
with a shorter step runs several per round (about as long in all as the longest side's one), and
the order changes from round to round so that no side always follows the same one. A side's time
is the median over rounds of its mean step in each round, and a ratio of two sides the median
over rounds of the ratio of their round means (:func:`paired_step_times`). The benchmark's
paired check and its benchmarks of decoding, the training loop and compiled steps
(:mod:`filterformer.bench`), and ``filterformer compare``'s time per step
(:mod:`filterformer.training.compare.cost`) all measure this way.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

__all__ = ["MAX_STEPS_PER_ROUND", "PairedStepTimes", "StepTimer", "alternate_rounds",
           "median_and_quartiles", "paired_step_times", "round_means", "round_orders",
           "steps_per_round", "synchronized_clock", "time_step"]

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
    """Run ``step`` once; its time in ms by ``clock`` (seconds; by default one that waits for
    CUDA before it reads the time)."""
    start = clock()
    step()
    return (clock() - start) * 1e3


def steps_per_round(*step_ms: float) -> tuple[int, ...]:
    """Per side, ``round(longest step / its step)`` steps a round, at most
    :data:`MAX_STEPS_PER_ROUND`, from each side's step time (any unit, > 0)."""
    if not step_ms or any(not ms > 0 for ms in step_ms):
        raise ValueError(f"step times must be > 0; got {' and '.join(map(str, step_ms))}")
    return tuple(max(1, min(MAX_STEPS_PER_ROUND, round(max(step_ms) / ms))) for ms in step_ms)


def round_orders(sides: int, rounds: int) -> list[tuple[int, ...]]:
    """The sides' order in each round: the rows of a Williams design, cycled.

    Over each cycle of ``sides`` rounds (even ``sides``) or ``2·sides`` (odd: each order then its
    reverse) every side goes just before every other equally often. Two sides alternate:
    ``(0, 1), (1, 0), …``; three give ``(0, 1, 2), (2, 1, 0), (1, 2, 0), (0, 2, 1), …``.
    """
    if sides < 1 or rounds < 0:
        raise ValueError(f"sides must be >= 1 and rounds >= 0; got {sides} and {rounds}")
    # The first row 0, 1, n-1, 2, n-2, …; row r adds r to each entry (mod n).
    first = [0] + [(j + 1) // 2 if j % 2 else sides - j // 2 for j in range(1, sides)]
    rows = [tuple((side + shift) % sides for side in first) for shift in range(sides)]
    if sides % 2:
        rows = [order for row in rows for order in (row, row[::-1])]
    return [rows[index % len(rows)] for index in range(rounds)]


def alternate_rounds(
    steps: Sequence[Callable[[], None]], repeats: Sequence[int],
    orders: Sequence[Sequence[int]], timer: StepTimer = time_step, *,
    prepare: Callable[[int, int], None] | None = None,
) -> list[list[float]]:
    """Time the sides' steps in rounds, each side running its ``repeats[side]`` steps back to
    back in the round's order; ``prepare(side, round)`` runs before each step, untimed.

    Returns:
        Per side, its ``len(orders) · repeats[side]`` times in the order they were taken.
    """
    if len(repeats) != len(steps):
        raise ValueError(f"repeats must give one count per step; got {len(repeats)} for "
                         f"{len(steps)} steps")
    times: list[list[float]] = [[] for _ in steps]
    for index, order in enumerate(orders):
        for side in order:
            for _ in range(repeats[side]):
                if prepare is not None:
                    prepare(side, index)
                times[side].append(timer(steps[side]))
    return times


def round_means(times: Sequence[Sequence[float]], steps: Sequence[int]) -> list[list[float]]:
    """Per side, the mean of its ``steps[side]`` steps in each round of ``times``."""
    whole = len(times) == len(steps) >= 1 and min(steps) >= 1
    rounds = len(times[0]) // steps[0] if whole else 0
    if rounds < 1 or any(len(t) != rounds * n for t, n in zip(times, steps, strict=True)):
        raise ValueError(f"times must hold whole rounds of {' + '.join(map(str, steps))} "
                         f"steps; got {' + '.join(str(len(side)) for side in times)}")
    return [[statistics.fmean(side[i * n:(i + 1) * n]) for i in range(rounds)]
            for side, n in zip(times, steps, strict=True)]


def median_and_quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """``(median, lower quartile, upper quartile)`` of two or more ``values``: for rounds'
    ratios, the middle half of the rounds lies between the quartiles."""
    low, median, high = statistics.quantiles(values, n=4, method="inclusive")
    return median, low, high


@dataclass
class PairedStepTimes:
    """One paired measurement: per side, the ``steps_per_round`` it ran and its mean step in each
    round (``round_step_s``, seconds, in round order)."""

    steps_per_round: list[int]
    round_step_s: list[list[float]]

    @property
    def median_s(self) -> list[float]:
        """Per side, the median over rounds of its mean step (seconds)."""
        return [statistics.median(rounds) for rounds in self.round_step_s]

    def ratio(self, side: int, baseline: int) -> tuple[float, float, float]:
        """Each round's mean step of ``side`` over ``baseline``'s: the median over the rounds
        and the quartiles (:func:`median_and_quartiles`; two rounds or more)."""
        rounds = zip(self.round_step_s[side], self.round_step_s[baseline], strict=True)
        return median_and_quartiles([a / b for a, b in rounds])


def paired_step_times(
    steps: Sequence[Callable[[], None]], *, rounds: int, warmup_steps: int = 1,
    timer: StepTimer = time_step, prepare: Callable[[int, int], None] | None = None,
    repeats: Sequence[int] | None = None,
) -> PairedStepTimes:
    """Alternate ``steps`` (one per side) in ``rounds`` timed rounds, in the orders of
    :func:`round_orders`, after ``warmup_steps`` untimed rounds of one step per side.

    Each side runs ``repeats[side]`` steps a round; by default its fastest warm-up step sets
    them (:func:`steps_per_round`). ``timer`` runs a step once and returns its time in ms;
    ``prepare(side, round)`` runs before each step, untimed (warm-up rounds numbered from 0 too).
    """
    if rounds < 1 or warmup_steps < 1:
        raise ValueError(f"rounds and warmup_steps must be >= 1; got {rounds} and {warmup_steps}")
    sides = len(steps)
    warm = alternate_rounds(steps, [1] * sides, round_orders(sides, warmup_steps), timer,
                            prepare=prepare)
    repeats = tuple(repeats or steps_per_round(*(min(times) for times in warm)))
    times = alternate_rounds(steps, repeats, round_orders(sides, rounds), timer, prepare=prepare)
    return PairedStepTimes(list(repeats), [[ms / 1e3 for ms in side]
                                           for side in round_means(times, repeats)])
