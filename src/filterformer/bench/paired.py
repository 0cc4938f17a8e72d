"""A paired re-measurement of a time ratio, to tell a real miss from noise.

The table's configurations are each measured in their own process, minutes apart; on a shared
machine a burst of other work can move one of them by tens of percent. A paired check builds
both sides of a ratio in one fresh process and alternates their steps (A B B A A B …), so slow
drifts in the machine's load fall on both alike. Each round gives one ratio (the mean of the
first side's steps in it over the second's, steps taken seconds apart); their median, with the
middle half of them beside it, is reported next to the table's ratio and, being measured side by
side, decides the target's verdict. When one side's step is much shorter, it runs several steps
per round (about as long as the other side's one step, at most :data:`MAX_STEPS_PER_ROUND`), so
its part of a round is not one step that follows the long one.

The rounds themselves (:func:`round_orders`, :func:`steps_per_round`, :func:`alternate_rounds`,
:func:`round_means`) take any number of sides: ``filterformer compare`` alternates every method's
training step the same way to measure its time-per-step column.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .config import BenchConfig, BenchShape
from .measure import prepare_case, use_timing_heap
from .records import BenchRecord, find_record
from .targets import Target, TargetResult
from .timing import Timer, cpu_timer, cuda_timer
from .worker import WorkerFailed, run_isolated

__all__ = [
    "PAIRED_CHOICES",
    "alternate_rounds",
    "close_call",
    "measure_pair",
    "paired_results",
    "round_means",
    "round_orders",
    "round_ratios",
    "steps_per_round",
]

#: ``auto``: only targets whose ratio is within 25 % of the bound; ``all``; ``none``.
PAIRED_CHOICES = ("auto", "all", "none")
#: How close to its bound a ratio must be for ``auto`` to re-measure it.
CLOSE_CALL = 1.25
#: The most steps the shorter side of a pair runs per round.
MAX_STEPS_PER_ROUND = 8
#: The fewest and most rounds of one pair (within its time budget).
MIN_ROUNDS, MAX_ROUNDS = 5, 15


def close_call(result: TargetResult) -> bool:
    """Whether the measured ratio is near enough to the bound that noise could flip the verdict."""
    if result.ratio is None:
        return False
    return abs(math.log(result.ratio / result.target.bound)) < math.log(CLOSE_CALL)


def steps_per_round(*step_ms: float) -> tuple[int, ...]:
    """Steps of each side per round: one for the longest, about as long in all for the others.

    Args:
        step_ms: each side's time of one step (any unit, all > 0).

    Returns:
        Per side, ``round(longest / its time)`` steps, at most :data:`MAX_STEPS_PER_ROUND`.
    """
    if not step_ms or any(not ms > 0 for ms in step_ms):
        raise ValueError(f"step times must be > 0; got {' and '.join(map(str, step_ms))}")
    longest = max(step_ms)
    return tuple(max(1, min(MAX_STEPS_PER_ROUND, round(longest / ms))) for ms in step_ms)


def round_orders(sides: int, rounds: int) -> list[tuple[int, ...]]:
    """The order the sides take in each round, so that no side always follows the same one.

    The orders are the rows of a Williams design (a Latin square balanced for the side that
    goes just before): over each cycle of ``sides`` rounds (even ``sides``) or ``2 × sides``
    rounds (odd ``sides``, each order followed by its reverse) every side goes just before every
    other equally often. Two sides alternate: ``(0, 1), (1, 0), (0, 1), …``; three give
    ``(0, 1, 2), (2, 1, 0), (1, 2, 0), (0, 2, 1), …``.

    Args:
        sides: how many sides take turns (>= 1).
        rounds: how many rounds (>= 0); the cycle repeats as needed.

    Returns:
        One permutation of ``range(sides)`` per round.
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
    steps: Sequence[Callable[[], None]],
    repeats: Sequence[int],
    orders: Sequence[Sequence[int]],
    timer: Timer,
    *,
    prepare: Callable[[int, int], None] | None = None,
) -> list[list[float]]:
    """Time the sides' steps in rounds: in each round every side runs its steps back to back.

    Args:
        steps: one step per side.
        repeats: the steps each side runs per round (:func:`steps_per_round`).
        orders: the sides' order in each round (:func:`round_orders`); one round per order.
        timer: runs a step once and returns its time (:func:`~.timing.cpu_timer`, …).
        prepare: ``prepare(side, round)`` runs before each step, outside the timed region.

    Returns:
        Per side, its ``len(orders) × repeats[side]`` times in the order they were taken.
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
    """Per side, the mean of its steps in each round.

    Args:
        times: per side, its times in the order they were taken (:func:`alternate_rounds`).
        steps: the steps each side ran per round.

    Returns:
        Per side, one mean per round.
    """
    whole = len(times) == len(steps) >= 1 and min(steps) >= 1
    rounds = len(times[0]) // steps[0] if whole else 0
    if rounds < 1 or any(len(side) != rounds * count
                         for side, count in zip(times, steps, strict=True)):
        raise ValueError(
            f"times must hold whole rounds of {' + '.join(map(str, steps))} steps; got "
            f"{' + '.join(str(len(side)) for side in times)}"
        )
    return [[statistics.fmean(side[i * count:(i + 1) * count]) for i in range(rounds)]
            for side, count in zip(times, steps, strict=True)]


def round_ratios(times: dict[str, list[float]], steps: tuple[int, int]) -> list[float]:
    """Each round's ratio: the mean of the first side's steps in it over the second side's.

    Args:
        times: :func:`measure_pair`'s result, each side's times in the order they were taken.
        steps: the steps each side ran per round.

    Returns:
        One ratio per round.
    """
    first, second = round_means([times["first_ms"], times["second_ms"]], steps)
    return [a / b for a, b in zip(first, second, strict=True)]


def measure_pair(
    argument: tuple[dict[str, Any], dict[str, Any], int, tuple[int, int]],
) -> dict[str, list[float]]:
    """Alternate the steps of two configurations in this process (run in a worker).

    Args:
        argument: ``(first, second, rounds, steps)``: the two configurations as dicts, how many
            rounds, and how many timed steps each side runs per round (see
            :func:`steps_per_round`). Rounds alternate which side goes first
            (:func:`round_orders`).

    Returns:
        ``{"first_ms": [...], "second_ms": [...]}``, ``rounds × steps[i]`` times each.
    """
    first, second, rounds, steps = argument
    configs = [BenchConfig.from_dict(c) for c in (first, second)]
    cases = [prepare_case(config) for config in configs]
    use_timing_heap(configs[0])
    timer = cpu_timer if configs[0].device == "cpu" else cuda_timer
    for case in cases:  # warm-up, under the heap policy the timed steps use
        case.step()
    first_ms, second_ms = alternate_rounds(
        [case.step for case in cases], steps, round_orders(2, rounds), timer,
        prepare=lambda side, _: cases[side].reset(),
    )
    return {"first_ms": first_ms, "second_ms": second_ms}


def paired_results(
    records: list[BenchRecord],
    results: list[TargetResult],
    *,
    shape: BenchShape,
    device: str = "cpu",
    allocator: str = "reuse",
    which: str = "auto",
    budget_s: float = 60.0,
    log: Callable[[str], None] | None = None,
) -> list[TargetResult]:
    """Re-measure the time targets of ``results`` in pairs.

    Args:
        records: the run (each side's time sets how many rounds fit in ``budget_s``).
        results: the targets evaluated on ``records``.
        shape, device, allocator: as in the run.
        which: one of :data:`PAIRED_CHOICES`.
        budget_s: the timed rounds of one pair stop near this (at least :data:`MIN_ROUNDS`).
        log: called with a line per pair.

    Returns:
        ``results``, each re-measured one with its :attr:`~TargetResult.paired` ratio (the
        median of the rounds' ratios, or the reason it could not be measured) and
        :attr:`~TargetResult.paired_spread` (their quartiles) set.
    """
    if which not in PAIRED_CHOICES:
        raise ValueError(f"paired must be one of {', '.join(PAIRED_CHOICES)}; got {which!r}")
    checked = []
    for result in results:
        target: Target = result.target
        measured = result.ratio is not None and target.numerator.quantity == "median_ms"
        if which == "none" or not measured or (which == "auto" and not close_call(result)):
            checked.append(result)
            continue
        sides = []
        for measure in (target.numerator, target.denominator):
            record = find_record(records, measure.method, measure.N, measure.mode)
            sides.append((record, BenchConfig(
                method=measure.method, N=measure.N, mode=measure.mode, device=device,
                shape=shape, allocator=allocator,
            )))
        (a, first), (b, second) = sides
        steps = steps_per_round(a.median_ms, b.median_ms)
        round_s = (steps[0] * a.median_ms + steps[1] * b.median_ms) / 1e3
        rounds = max(MIN_ROUNDS, min(MAX_ROUNDS, int(budget_s / round_s)))
        timeout_s = 4 * (rounds + 2) * round_s + 120
        try:
            times = run_isolated(
                measure_pair, (first.to_dict(), second.to_dict(), rounds, steps), timeout_s
            )
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
            each = f"{steps[0]} + {steps[1]} steps"
            log(f"paired: {target.name}: {shown} ({rounds} rounds of {each})")
    return checked
