from collections import Counter
from itertools import pairwise

import pytest
import torch

from filterformer.timing import (
    MAX_STEPS_PER_ROUND,
    alternate_rounds,
    round_means,
    round_orders,
    steps_per_round,
    time_step,
)


def test_time_step_reads_the_clock_around_the_step():
    ticks = iter([10.0, 10.25])
    calls = []
    ms = time_step(lambda: calls.append(1), clock=lambda: next(ticks))
    assert ms == pytest.approx(250.0)
    assert calls == [1]


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
