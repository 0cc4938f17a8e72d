import pytest
import torch

from filterformer.bench import BenchConfig, BenchRecord, BenchShape, Target, evaluate_targets
from filterformer.bench.paired import (
    MAX_STEPS_PER_ROUND,
    close_call,
    measure_pair,
    paired_ratios,
    steps_per_round,
)
from filterformer.bench.report import targets_table
from filterformer.bench.targets import Measure

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


def test_paired_ratios_measures_only_what_is_asked():
    records = _records(2.0, 1.0)
    results = evaluate_targets(records, (_target(2.1), _target(100.0)))
    kwargs = {"shape": QUICK, "device": "cpu", "allocator": "reuse", "budget_s": 0.0}
    assert paired_ratios(records, results, which="none", **kwargs) == {}
    auto = paired_ratios(records, results, which="auto", **kwargs)
    assert list(auto) == ["gfsa / sdpa"] and auto["gfsa / sdpa"] > 0
    with pytest.raises(ValueError, match="paired must be one of auto, all, none"):
        paired_ratios(records, results, which="some", **kwargs)


def test_targets_table_shows_the_paired_verdict():
    records = _records(2.2, 1.0)
    results = evaluate_targets(records, (_target(2.1),))
    row = targets_table(results, {"gfsa / sdpa": 2.05}).splitlines()[2]
    assert row == "| gfsa / sdpa | train | 2.20 | <= 2.1 | **miss** | 2.05 (pass) |"
