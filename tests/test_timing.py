import statistics

import pytest
import torch

from filterformer.timing import (
    MAX_STEPS_PER_ROUND,
    alternate,
    paired_step_times,
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


class FakeSteps:
    """Steps that log which side ran on which round's batch; a timer that reports each side's
    next given duration (ms) instead of reading a clock."""

    def __init__(self, durations: list[list[float]]) -> None:
        self.durations = [iter(d) for d in durations]
        self.batch = [None] * len(durations)
        self.ran: list[tuple[int, int]] = []

    def steps(self):
        return [lambda side=side: self.ran.append((side, self.batch[side]))
                for side in range(len(self.durations))]

    def prepare(self, side: int, index: int) -> None:
        self.batch[side] = index

    def timer(self, step) -> float:
        step()
        side, _ = self.ran[-1]
        return next(self.durations[side])


def test_medians_are_taken_over_the_rounds_means_by_hand():
    # Warm-up: 30 and 14 ms (fastest 12): the second side runs round(30 / 12) = 2 steps a round.
    fake = FakeSteps([[30.0, 31.0, 10.0, 30.0, 20.0], [14.0, 12.0, 4.0, 6.0, 5.0, 9.0, 1.0, 2.0]])
    measured = paired_step_times(fake.steps(), rounds=3, warmup_steps=2, timer=fake.timer)
    assert measured.steps_per_round == [1, 2]
    # Rounds: first side 10, 30, 20 ms; second side (4 + 6) / 2, (5 + 9) / 2, (1 + 2) / 2 ms.
    assert measured.round_step_s == [pytest.approx([0.010, 0.030, 0.020]),
                                     pytest.approx([0.005, 0.007, 0.0015])]
    assert measured.median_s == pytest.approx([0.020, 0.005])


def test_every_round_runs_each_method_once_in_plain_alternation_on_the_rounds_batch():
    sides = int(torch.randint(2, 6, ()))
    rounds = int(torch.randint(2, 7, ()))
    warmup = int(torch.randint(1, 3, ()))
    warm_ms = torch.empty(sides).uniform_(5.0, 60.0)
    longest = float(warm_ms.max())
    repeats = [min(8, round(longest / float(ms))) for ms in warm_ms]
    timed = [torch.empty(rounds, count, dtype=torch.float64).uniform_(1.0, 100.0)
             for count in repeats]
    fake = FakeSteps([[float(warm_ms[side])] * warmup + timed[side].flatten().tolist()
                      for side in range(sides)])
    measured = paired_step_times(fake.steps(), rounds=rounds, warmup_steps=warmup,
                                 timer=fake.timer, prepare=fake.prepare)
    assert measured.steps_per_round == repeats
    # Warm-up rounds run one step each, then each timed round runs every method once, as one
    # block of its steps, on that round's batch, in plain alternation: 0, 1, …, 0, 1, …
    expected = [(side, index) for index in range(warmup) for side in range(sides)]
    expected += [(side, index) for index in range(rounds) for side in range(sides)
                 for _ in range(repeats[side])]
    assert fake.ran == expected
    reference = [statistics.median(t.mean(1).tolist()) / 1e3 for t in timed]
    assert measured.median_s == pytest.approx(reference, rel=1e-12)
    for bad in ({"rounds": 0, "warmup_steps": 1}, {"rounds": 1, "warmup_steps": 0}):
        with pytest.raises(ValueError, match="rounds and warmup_steps must be >= 1"):
            paired_step_times(fake.steps(), timer=fake.timer, **bad)


def test_ratios_divide_each_rounds_means_and_take_their_median_and_quartiles():
    # Rounds: first side 10, 30, 20, 40 ms; second 5, 10, 10, 10 ms -> ratios 2, 3, 2, 4.
    fake = FakeSteps([[20.0, 10.0, 30.0, 20.0, 40.0], [20.0, 5.0, 10.0, 10.0, 10.0]])
    measured = paired_step_times(fake.steps(), rounds=4, warmup_steps=1, timer=fake.timer)
    assert measured.steps_per_round == [1, 1]
    assert measured.ratio(0, 1) == pytest.approx((2.5, 2.0, 3.25))
    assert measured.ratio(1, 0)[0] == pytest.approx(statistics.median([1 / 2, 1 / 3, 1 / 2, 1 / 4]))
    assert measured.ratio(0, 0) == (1.0, 1.0, 1.0)


def test_alternation_runs_each_sides_block_once_a_round_in_plain_order():
    ran = []
    repeats = torch.randint(1, 4, (3,)).tolist()
    means = torch.rand(4, 3, dtype=torch.float64).add(0.1).tolist()

    def block(side):
        def run(index, count):
            ran.append((index, side, count))
            return means[index][side]
        return run

    measured = alternate([block(side) for side in range(3)], repeats, 4)
    assert ran == [(index, side, repeats[side]) for index in range(4) for side in range(3)]
    assert measured.steps_per_round == repeats
    assert measured.round_step_s == [[means[i][side] for i in range(4)] for side in range(3)]
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        alternate([block(0)], [1], 0)
