"""The time targets re-measured side by side.

The table's configurations run in their own processes, minutes apart, and a burst of other work
on a shared machine moves one by tens of percent. A paired check builds both sides of a ratio
in one fresh process and alternates their steps in rounds (:mod:`filterformer.timing`), so
drifts in load fall on both alike; the median of the rounds' ratios decides the verdict. The
extra benchmarks' rows were measured so already (:func:`~.performance_targets.evaluate_targets`
reads their rounds), and are not measured again.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from ..timing import PairedStepTimes, paired_step_times, steps_per_round
from .fresh_process import WorkerFailed, run_isolated
from .measurement import BenchConfig, prepare_case, reuse_freed_memory
from .method_table import BENCH_METHODS
from .performance_targets import TargetResult
from .records import BenchRecord, find_record
from .step_cases import BenchShape

__all__ = ["PAIRED_CHOICES", "close_call", "measure_pair", "paired_results"]

#: ``auto``: only targets whose ratio is within a factor :data:`CLOSE_CALL` of the bound.
PAIRED_CHOICES = ("auto", "all", "none")
CLOSE_CALL = 1.25
MIN_ROUNDS, MAX_ROUNDS = 5, 15


def close_call(result: TargetResult) -> bool:
    """Whether the ratio is near enough to the bound that noise could flip the verdict (an
    information row has none)."""
    if result.ratio is None or result.target.op == "info":
        return False
    return abs(math.log(result.ratio / result.target.bound)) < math.log(CLOSE_CALL)


def measure_pair(first: BenchConfig, second: BenchConfig, *, rounds: int,
                 steps: tuple[int, int]) -> PairedStepTimes:
    """In this process (a fresh one), alternate two configurations' steps for ``rounds`` rounds,
    ``steps[i]`` each a round, after one warm-up round under the timed steps' heap policy."""
    cases = [prepare_case(config) for config in (first, second)]
    if first.device == "cpu":
        reuse_freed_memory()
    return paired_step_times([case.step for case in cases], rounds=rounds, repeats=steps,
                             prepare=lambda side, _: cases[side].reset())


def paired_results(
    records: list[BenchRecord], results: list[TargetResult], *, shape: BenchShape,
    device: str = "cpu", which: str = "auto", budget_s: float = 60.0,
    log: Callable[[str], None] | None = None,
) -> list[TargetResult]:
    """``results`` with the time targets ``which`` selects re-measured in pairs, each in a fresh
    process for about ``budget_s`` (at least :data:`MIN_ROUNDS` rounds); the median of the
    rounds' ratios and their quartiles go to ``paired`` and ``paired_spread`` (or why the check
    failed to ``paired``)."""
    if which not in PAIRED_CHOICES:
        raise ValueError(f"paired must be one of {', '.join(PAIRED_CHOICES)}; got {which!r}")
    checked = []
    for result in results:
        target = result.target
        timed = result.ratio is not None and target.numerator.quantity == "median_ms"
        sides = (target.numerator, target.denominator)
        # Only the table's rows can be rebuilt here; the others were alternated where measured.
        timed = timed and all(m is not None and m.method in BENCH_METHODS for m in sides)
        if (which == "none" or not timed or result.paired is not None
                or (which == "auto" and not close_call(result))):
            checked.append(result)
            continue
        first, second = (BenchConfig(method=m.method, N=m.N, mode=m.mode, device=device,
                                     shape=shape) for m in sides)
        step_ms = [find_record(records, m.method, m.N, m.mode).median_ms for m in sides]
        steps = steps_per_round(*step_ms)
        round_s = (steps[0] * step_ms[0] + steps[1] * step_ms[1]) / 1e3
        rounds = max(MIN_ROUNDS, min(MAX_ROUNDS, int(budget_s / round_s)))
        try:
            times = run_isolated(partial(measure_pair, first, second, rounds=rounds, steps=steps),
                                 timeout_s=4 * (rounds + 2) * round_s + 120,
                                 cuda=device == "cuda")
        except WorkerFailed as err:
            checked.append(replace(result, paired=str(err)))
            shown = str(err)
        else:
            paired, low, high = times.ratio(0, 1)
            checked.append(replace(result, paired=paired, paired_spread=(low, high)))
            shown = f"{paired:.3f} (middle half of the rounds {low:.3f}–{high:.3f})"
        if log is not None:
            log(f"paired: {target.name}: {shown} ({rounds} rounds of {steps[0]} + {steps[1]} "
                "steps)")
    return checked
