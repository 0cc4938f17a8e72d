from collections import Counter
from dataclasses import replace
from itertools import pairwise

import pytest
import torch

from filterformer.bench import BenchConfig, BenchRecord, BenchShape, Target, evaluate_targets
from filterformer.bench.markdown_report import targets_table
from filterformer.bench.paired_rounds import (
    MAX_STEPS_PER_ROUND,
    alternate_rounds,
    close_call,
    measure_pair,
    paired_results,
    round_means,
    round_orders,
    round_ratios,
    steps_per_round,
)
from filterformer.bench.performance_targets import Measure

QUICK = BenchShape.quick()


def _records(a_ms, b_ms):
    return [BenchRecord("gfsa", 32, "train", "cpu", median_ms=a_ms, peak_mb=1.0),
            BenchRecord("sdpa", 32, "train", "cpu", median_ms=b_ms, peak_mb=1.0)]


def _target(bound):
    return Target("gfsa / sdpa", Measure("gfsa", 32, "train"), Measure("sdpa", 32, "train"),
                  "<=", bound)


def test_close_calls_are_within_a_quarter_of_the_bound():
    records = _records(2.0, 1.0)
    assert close_call(evaluate_targets(records, (_target(2.4),))[0])
    assert close_call(evaluate_targets(records, (_target(1.7),))[0])
    assert not close_call(evaluate_targets(records, (_target(2.6),))[0])
    assert not close_call(evaluate_targets(records, (_target(1.5),))[0])


def test_measure_pair_runs_each_side_its_steps_in_every_round():
    config = BenchConfig("sdpa", 16, "inference", shape=QUICK, allocator="system")
    other = BenchConfig("efficient", 16, "inference", shape=QUICK, allocator="system")
    rounds = int(torch.randint(2, 5, ()))
    steps = (1, int(torch.randint(1, 4, ())))
    times = measure_pair((config.to_dict(), other.to_dict(), rounds, steps))
    assert len(times["first_ms"]) == rounds * steps[0]
    assert len(times["second_ms"]) == rounds * steps[1]
    assert all(t > 0 for t in times["first_ms"] + times["second_ms"])


def test_the_shorter_side_runs_about_as_long_as_the_longer_per_round():
    long_ms = float(torch.empty(()).uniform_(100.0, 1000.0))
    for ratio in (1.0, 1.4, 3.0, 5.6):
        assert steps_per_round(long_ms, long_ms / ratio) == (1, round(ratio))
        assert steps_per_round(long_ms / ratio, long_ms) == (round(ratio), 1)
    assert steps_per_round(long_ms, long_ms / 1000) == (1, MAX_STEPS_PER_ROUND)
    with pytest.raises(ValueError, match="step times must be > 0"):
        steps_per_round(0.0, long_ms)


def test_every_side_runs_about_as_long_as_the_longest_per_round():
    step_ms = torch.empty(int(torch.randint(3, 8, ()))).uniform_(1.0, 100.0).tolist()
    longest = max(step_ms)
    expected = tuple(min(MAX_STEPS_PER_ROUND, round(longest / ms)) for ms in step_ms)
    assert steps_per_round(*step_ms) == expected
    assert expected[step_ms.index(longest)] == 1
    assert steps_per_round(longest) == (1,)


@pytest.mark.parametrize("sides", range(1, 9))
def test_round_orders_balance_which_side_goes_before_which(sides):
    cycle = sides if sides % 2 == 0 else 2 * sides
    orders = round_orders(sides, 3 * cycle)
    assert all(sorted(order) == list(range(sides)) for order in orders)
    assert orders[cycle:] == 2 * orders[:cycle]
    # Within one cycle every side goes just before every other equally often (a Williams design).
    before = Counter(pair for order in orders[:cycle] for pair in pairwise(order))
    assert set(before) == {(a, b) for a in range(sides) for b in range(sides) if a != b}
    assert len(set(before.values())) <= 1
    # And every side goes first equally often.
    assert len(set(Counter(order[0] for order in orders[:cycle]).values())) == 1
    if sides % 2:
        assert all(orders[i + 1] == orders[i][::-1] for i in range(0, cycle, 2))


def test_two_sides_alternate_and_a_short_run_varies_each_sides_predecessor():
    assert round_orders(2, 5) == [(0, 1), (1, 0), (0, 1), (1, 0), (0, 1)]
    assert round_orders(3, 2) == [(0, 1, 2), (2, 1, 0)]
    orders = round_orders(7, 6)  # the built-in comparison's 7 methods, 6 rounds
    for side in range(7):
        predecessors = {order[order.index(side) - 1] if order.index(side) else None
                        for order in orders}
        assert len(predecessors) > 1
    with pytest.raises(ValueError, match="sides must be >= 1"):
        round_orders(0, 3)


def test_alternate_rounds_runs_each_side_its_steps_once_a_round_in_the_given_orders():
    sides = int(torch.randint(2, 6, ()))
    repeats = torch.randint(1, 4, (sides,)).tolist()
    orders = round_orders(sides, int(torch.randint(2, 7, ())))
    ran, prepared = [], []
    durations = torch.empty(sum(repeats) * len(orders)).uniform_(1.0, 9.0).tolist()
    clock = iter(durations)

    def timer(step):
        step()
        return next(clock)

    steps = [lambda side=side: ran.append(side) for side in range(sides)]
    times = alternate_rounds(steps, repeats, orders, timer,
                             prepare=lambda side, index: prepared.append((side, index)))
    expected = [side for order in orders for side in order for _ in range(repeats[side])]
    assert ran == expected
    assert prepared == [(side, index) for index, order in enumerate(orders) for side in order
                        for _ in range(repeats[side])]
    assert times == [[d for d, s in zip(durations, expected, strict=True) if s == side]
                     for side in range(sides)]
    with pytest.raises(ValueError, match="repeats must give one count per step"):
        alternate_rounds(steps, repeats[1:], orders, timer)


def test_round_means_average_each_sides_steps_within_each_round():
    rounds = int(torch.randint(2, 6, ()))
    steps = torch.randint(1, 4, (3,)).tolist()
    sides = [torch.empty(rounds, count, dtype=torch.float64).uniform_(1.0, 50.0)
             for count in steps]
    means = round_means([side.flatten().tolist() for side in sides], steps)
    assert means == [pytest.approx(side.mean(1).tolist(), rel=1e-12) for side in sides]
    with pytest.raises(ValueError, match="times must hold whole rounds of"):
        round_means([side.flatten().tolist() for side in sides[:-1]]
                    + [sides[-1].flatten().tolist()[1:]], steps)


def test_round_ratios_divide_the_sides_means_within_each_round():
    rounds = int(torch.randint(3, 8, ()))
    steps = (int(torch.randint(1, 4, ())), int(torch.randint(1, 4, ())))
    first = torch.empty(rounds, steps[0], dtype=torch.float64).uniform_(50.0, 150.0)
    second = torch.empty(rounds, steps[1], dtype=torch.float64).uniform_(10.0, 90.0)
    times = {"first_ms": first.flatten().tolist(), "second_ms": second.flatten().tolist()}
    expected = (first.mean(1) / second.mean(1)).tolist()
    assert round_ratios(times, steps) == pytest.approx(expected, rel=1e-12)
    times["second_ms"].pop()
    with pytest.raises(ValueError, match="times must hold whole rounds"):
        round_ratios(times, steps)


def test_paired_results_measures_only_what_is_asked():
    records = _records(2.0, 1.0)
    results = evaluate_targets(records, (_target(2.1), _target(100.0)))
    kwargs = {"shape": QUICK, "device": "cpu", "allocator": "reuse", "budget_s": 0.0}
    assert paired_results(records, results, which="none", **kwargs) == results
    close, far = paired_results(records, results, which="auto", **kwargs)
    assert isinstance(close.paired, float) and close.paired > 0
    low, high = close.paired_spread
    assert 0 < low <= close.paired <= high
    assert far == results[1] and far.paired is None
    with pytest.raises(ValueError, match="paired must be one of auto, all, none"):
        paired_results(records, results, which="some", **kwargs)


def test_the_verdict_reads_the_paired_ratio_where_there_is_one():
    table_ratio = float(torch.empty(()).uniform_(2.15, 3.0))
    paired_ratio = float(torch.empty(()).uniform_(1.5, 2.05))
    (result,) = evaluate_targets(_records(table_ratio, 1.0), (_target(2.1),))
    assert result.passed is False
    checked = replace(result, paired=paired_ratio)
    assert checked.verdict_ratio == paired_ratio and checked.passed is True
    failed = replace(result, paired="worker failed")
    assert failed.verdict_ratio == pytest.approx(table_ratio) and failed.passed is False


def test_targets_table_shows_both_ratios_and_the_paired_verdict():
    (result,) = evaluate_targets(_records(2.2, 1.0), (_target(2.1),))
    row = targets_table([replace(result, paired=2.05)]).splitlines()[2]
    assert row == "| gfsa / sdpa | train | 2.20 | 2.05 | <= 2.1 | pass |"
    spread = replace(result, paired=2.05, paired_spread=(1.98, 2.13))
    row = targets_table([spread]).splitlines()[2]
    assert row == "| gfsa / sdpa | train | 2.20 | 2.05 (1.98–2.13) | <= 2.1 | pass |"
    row = targets_table([result]).splitlines()[2]
    assert row == "| gfsa / sdpa | train | 2.20 |  | <= 2.1 | **miss** |"
