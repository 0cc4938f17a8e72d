"""Several steps alternated in rounds after warm-up rounds: each side's time per step, and each
round's ratio of one side to another.

The measurement ``filterformer compare`` takes of its methods' training steps
(:mod:`filterformer.training.compare.cost`), and the benchmarks whose sides live in one process
(:mod:`.decoding_latency`, :mod:`.loop_overhead`, :mod:`.compiled_steps`):

- warm-up rounds of one step per side come first; they are not reported, and each side's fastest
  warm-up step sets how many steps it runs per round, so that a side with a short step runs
  several, about as long in all as the longest side's one (at most 8);
- in each timed round every side runs its steps back to back; the order changes from round to
  round (a Williams design: :func:`~.paired_rounds.round_orders`), so that no side always
  follows the same one;
- a side's time per step is the median over rounds of its mean step in each round, and a ratio
  of two sides the median over rounds of the ratio of their round means.

Drifts in the machine's load over seconds then fall on every side alike.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .paired_rounds import alternate_rounds, round_means, round_orders, steps_per_round
from .step_measures import StepTimer

__all__ = ["PairedStepTimes", "paired_step_times"]


@dataclass
class PairedStepTimes:
    """One paired measurement of several steps.

    Attributes:
        steps_per_round: per side, the steps it ran in each round.
        round_step_s: per side, its mean step time in each round (seconds), in round order.
    """

    steps_per_round: list[int]
    round_step_s: list[list[float]]

    @property
    def median_s(self) -> list[float]:
        """Per side, the median over rounds of its mean step (seconds)."""
        return [statistics.median(rounds) for rounds in self.round_step_s]

    def round_ratios(self, side: int, baseline: int) -> list[float]:
        """Each round's mean step of ``side`` over that of ``baseline``."""
        return [a / b for a, b in zip(self.round_step_s[side], self.round_step_s[baseline],
                                      strict=True)]

    def ratio(self, side: int, baseline: int) -> float:
        """The median over rounds of :meth:`round_ratios`."""
        return statistics.median(self.round_ratios(side, baseline))

    def ratio_spread(self, side: int, baseline: int) -> tuple[float, float]:
        """The quartiles of :meth:`round_ratios` (the middle half of the rounds lies between);
        needs two rounds or more."""
        low, _, high = statistics.quantiles(self.round_ratios(side, baseline), n=4,
                                            method="inclusive")
        return low, high


def paired_step_times(
    steps: Sequence[Callable[[], None]],
    *,
    rounds: int,
    warmup_steps: int,
    timer: StepTimer,
    prepare: Callable[[int, int], None] | None = None,
) -> PairedStepTimes:
    """Alternate ``steps`` in rounds and take each one's time per step (see the module).

    Args:
        steps: one step per side.
        rounds: timed rounds (>= 1), in the orders of :func:`~.paired_rounds.round_orders`.
        warmup_steps: untimed rounds of one step per side first (>= 1); each side's fastest
            warm-up step sets its steps per round (:func:`~.paired_rounds.steps_per_round`).
        timer: runs a step once and returns its time in ms
            (:func:`~.step_measures.time_step`).
        prepare: ``prepare(side, round)`` runs before each step, outside the timed region
            (warm-up rounds are numbered from 0 as well).
    """
    if rounds < 1 or warmup_steps < 1:
        raise ValueError(f"rounds and warmup_steps must be >= 1; got {rounds} and {warmup_steps}")
    sides = len(steps)
    warm = alternate_rounds(steps, [1] * sides, round_orders(sides, warmup_steps), timer,
                            prepare=prepare)
    repeats = steps_per_round(*(min(times) for times in warm))
    times = alternate_rounds(steps, repeats, round_orders(sides, rounds), timer, prepare=prepare)
    means_ms = round_means(times, repeats)
    return PairedStepTimes(list(repeats), [[ms / 1e3 for ms in side] for side in means_ms])
