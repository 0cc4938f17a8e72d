"""Steps of several sides alternated in rounds, and the time targets re-measured that way.

The table's configurations run in their own processes, minutes apart, and a burst of other work
on a shared machine moves one by tens of percent. A paired check builds both sides of a ratio
in one fresh process and alternates their steps in rounds (a side with a shorter step runs
several, about as long in all), so drifts in load fall on both alike; the median of the rounds'
ratios decides the verdict. ``filterformer compare`` alternates its methods' training steps with
the same functions.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .fresh_process import WorkerFailed, run_isolated
from .measurement import BenchConfig, BenchRecord, find_record, prepare_case, use_timing_heap
from .performance_targets import TargetResult
from .step_cases import BenchShape
from .step_measures import StepTimer, time_step

__all__ = ["PAIRED_CHOICES", "alternate_rounds", "close_call", "measure_pair", "paired_results",
           "round_means", "round_orders", "round_ratios", "steps_per_round"]

#: ``auto``: only targets whose ratio is within a factor :data:`CLOSE_CALL` of the bound.
PAIRED_CHOICES = ("auto", "all", "none")
CLOSE_CALL = 1.25
MAX_STEPS_PER_ROUND = 8
MIN_ROUNDS, MAX_ROUNDS = 5, 15


def close_call(result: TargetResult) -> bool:
    """Whether the ratio is near enough to the bound that noise could flip the verdict."""
    if result.ratio is None:
        return False
    return abs(math.log(result.ratio / result.target.bound)) < math.log(CLOSE_CALL)


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
    orders: Sequence[Sequence[int]], timer: StepTimer, *,
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


def round_ratios(times: dict[str, list[float]], steps: tuple[int, int]) -> list[float]:
    """Each round's ratio of the first side's mean step to the second's (from
    :func:`measure_pair`'s times)."""
    first, second = round_means([times["first_ms"], times["second_ms"]], steps)
    return [a / b for a, b in zip(first, second, strict=True)]


def measure_pair(
    argument: tuple[dict[str, Any], dict[str, Any], int, tuple[int, int]],
) -> dict[str, list[float]]:
    """In this process (a fresh one), alternate two configurations' steps: ``argument`` is
    ``(first, second, rounds, steps per round)``, the configurations as dicts.

    Returns:
        ``{"first_ms": [...], "second_ms": [...]}``, ``rounds · steps[i]`` times each.
    """
    first, second, rounds, steps = argument
    configs = [BenchConfig.from_dict(c) for c in (first, second)]
    cases = [prepare_case(config) for config in configs]
    use_timing_heap(configs[0])
    for case in cases:  # warm-up, under the timed steps' heap policy
        case.step()
    first_ms, second_ms = alternate_rounds(
        [case.step for case in cases], steps, round_orders(2, rounds), time_step,
        prepare=lambda side, _: cases[side].reset(),
    )
    return {"first_ms": first_ms, "second_ms": second_ms}


def paired_results(
    records: list[BenchRecord], results: list[TargetResult], *, shape: BenchShape,
    device: str = "cpu", allocator: str = "reuse", which: str = "auto", budget_s: float = 60.0,
    log: Callable[[str], None] | None = None,
) -> list[TargetResult]:
    """``results`` with the time targets ``which`` selects re-measured in pairs, each in a fresh
    process for about ``budget_s`` (at least :data:`MIN_ROUNDS` rounds); the rounds' median
    ratio and quartiles go to ``paired`` and ``paired_spread`` (or why it failed to ``paired``).
    """
    if which not in PAIRED_CHOICES:
        raise ValueError(f"paired must be one of {', '.join(PAIRED_CHOICES)}; got {which!r}")
    checked = []
    for result in results:
        target = result.target
        timed = result.ratio is not None and target.numerator.quantity == "median_ms"
        if which == "none" or not timed or (which == "auto" and not close_call(result)):
            checked.append(result)
            continue
        sides = (target.numerator, target.denominator)
        configs = [BenchConfig(method=m.method, N=m.N, mode=m.mode, device=device, shape=shape,
                               allocator=allocator).to_dict() for m in sides]
        step_ms = [find_record(records, m.method, m.N, m.mode).median_ms for m in sides]
        steps = steps_per_round(*step_ms)
        round_s = (steps[0] * step_ms[0] + steps[1] * step_ms[1]) / 1e3
        rounds = max(MIN_ROUNDS, min(MAX_ROUNDS, int(budget_s / round_s)))
        try:
            times = run_isolated(measure_pair, (*configs, rounds, steps),
                                 timeout_s=4 * (rounds + 2) * round_s + 120)
        except WorkerFailed as err:
            checked.append(replace(result, paired=str(err)))
            shown = str(err)
        else:
            ratios = round_ratios(times, steps)
            paired = statistics.median(ratios)
            low, _, high = statistics.quantiles(ratios, n=4, method="inclusive")
            checked.append(replace(result, paired=paired, paired_spread=(low, high)))
            shown = f"{paired:.3f} (middle half of the rounds {low:.3f}–{high:.3f})"
        if log is not None:
            log(f"paired: {target.name}: {shown} ({rounds} rounds of {steps[0]} + {steps[1]} "
                "steps)")
    return checked
