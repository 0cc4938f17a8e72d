"""Steps of several sides timed side by side, as ``bench`` and ``compare``'s cost do: plain
alternation in rounds (0, 1, …, 0, 1, …), so drifts in load fall on every side alike; a side's
time is the median over rounds of its mean step, a ratio the median of the rounds' ratios. The
clock is ``torch.utils.benchmark``'s, which first waits for the accelerator's queued work."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torch.utils.benchmark.utils.timer import timer as synchronized_clock

__all__ = ["MAX_STEPS_PER_ROUND", "Block", "PairedStepTimes", "StepTimer", "alternate",
           "paired_step_times", "steps_per_round", "synchronized_clock", "time_step"]

#: ``timer(step)`` runs ``step`` once and returns its duration in ms.
StepTimer = Callable[[Callable[[], None]], float]
#: ``block(round, count)`` runs ``count`` steps of a side and returns its mean step in seconds.
Block = Callable[[int, int], float]
MAX_STEPS_PER_ROUND = 8


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


def alternate(blocks: Sequence[Block], repeats: Sequence[int], rounds: int) -> PairedStepTimes:
    """``rounds`` rounds, each running every side's block of ``repeats[side]`` steps in turn."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1; got {rounds}")
    timed = [[block(index, n) for block, n in zip(blocks, repeats, strict=True)]
             for index in range(rounds)]
    return PairedStepTimes(list(repeats), [list(side) for side in zip(*timed, strict=True)])


def paired_step_times(
    steps: Sequence[Callable[[], None]], *, rounds: int, warmup_steps: int = 1,
    timer: StepTimer = time_step, prepare: Callable[[int, int], None] | None = None,
) -> PairedStepTimes:
    """Alternate ``steps`` (one per side), each step timed alone by ``timer`` after an untimed
    ``prepare(side, round)``; a side runs :func:`steps_per_round` of its fastest step in
    ``warmup_steps`` uncounted rounds of one step."""
    if rounds < 1 or warmup_steps < 1:
        raise ValueError(f"rounds and warmup_steps must be >= 1; got {rounds} and {warmup_steps}")

    def block(side: int) -> Block:
        def run(index: int, count: int) -> float:
            total = 0.0
            for _ in range(count):
                if prepare is not None:
                    prepare(side, index)
                total += timer(steps[side])
            return total / count / 1e3

        return run

    blocks = [block(side) for side in range(len(steps))]
    warm = [min(run(index, 1) for index in range(warmup_steps)) for run in blocks]
    return alternate(blocks, steps_per_round(*warm), rounds)
