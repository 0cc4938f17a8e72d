import itertools

import pytest

from filterformer.bench.step_measures import median_ms, time_step, time_steps


class FakeTimer:
    """Runs the step, then reports the next of the given durations."""

    def __init__(self, durations):
        self.durations = iter(durations)

    def __call__(self, step):
        step()
        return next(self.durations)


def test_time_step_reads_the_clock_around_the_step():
    ticks = iter([10.0, 10.25])
    calls = []
    ms = time_step(lambda: calls.append(1), clock=lambda: next(ticks))
    assert ms == pytest.approx(250.0)
    assert calls == [1]


def test_time_steps_warms_up_untimed_then_times_each_repeat():
    calls, resets = [], []
    timer = FakeTimer([5.0, 1.0, 3.0, 2.0, 4.0])
    times = time_steps(
        lambda: calls.append(1), timer=timer, warmup=2, repeats=5, min_repeats=3,
        reset=lambda: resets.append(1),
    )
    assert times == [5.0, 1.0, 3.0, 2.0, 4.0]
    assert len(calls) == 2 + 5
    assert len(resets) == len(calls)  # cleared before every step, warm-up included
    assert median_ms(times) == 3.0


def test_time_steps_stops_at_the_budget_but_not_before_min_repeats():
    timer = FakeTimer(itertools.repeat(40.0))
    assert time_steps(lambda: None, timer=timer, warmup=0, repeats=10, min_repeats=3,
                      budget_ms=100.0) == [40.0] * 3
    timer = FakeTimer(itertools.repeat(40.0))
    # 3 repeats use 120 ms, past the budget: no fourth.
    assert len(time_steps(lambda: None, timer=timer, warmup=0, repeats=10, min_repeats=2,
                          budget_ms=100.0)) == 3
    timer = FakeTimer(itertools.repeat(1000.0))
    assert len(time_steps(lambda: None, timer=timer, warmup=0, repeats=10, min_repeats=4,
                          budget_ms=1.0)) == 4


def test_median_of_an_even_count_is_the_mean_of_the_middle_two():
    assert median_ms([4.0, 1.0, 3.0, 2.0]) == 2.5


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"repeats": 2, "min_repeats": 3}, "min_repeats"),
        ({"repeats": 3, "min_repeats": 0}, "min_repeats"),
        ({"warmup": -1}, "warmup"),
    ],
)
def test_time_steps_rejects_bad_counts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        time_steps(lambda: None, **kwargs)


def test_median_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="times_ms"):
        median_ms([])
