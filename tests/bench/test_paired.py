from dataclasses import replace
from functools import partial

import pytest
import torch

from filterformer.bench import BenchConfig, BenchRecord, BenchShape, Target, evaluate_targets
from filterformer.bench.fresh_process import run_isolated
from filterformer.bench.markdown_report import targets_table
from filterformer.bench.paired_check import close_call, measure_pair, paired_results
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
    config = BenchConfig("sdpa", 16, "inference", shape=QUICK)
    other = BenchConfig("efficient", 16, "inference", shape=QUICK)
    rounds = int(torch.randint(2, 5, ()))
    steps = (1, int(torch.randint(1, 4, ())))
    # In a worker, as the paired check runs it: its heap policy stays out of this process.
    pair = partial(measure_pair, config, other, rounds=rounds, steps=steps)
    measured = run_isolated(pair, timeout_s=120)
    assert measured.steps_per_round == list(steps)
    assert [len(side) for side in measured.round_step_s] == [rounds, rounds]
    assert all(t > 0 for side in measured.round_step_s for t in side)


def test_rows_alternated_in_one_process_give_their_paired_ratio_and_are_not_remeasured():
    rounds = torch.empty(2, 5).uniform_(1.0, 9.0).tolist()
    records = [BenchRecord(m, 32, "train", "cpu", median_ms=max(t), times_ms=t, round_group="g")
               for m, t in zip(("gfsa", "sdpa"), rounds, strict=True)]
    (result,) = evaluate_targets(records, (_target(2.1),))
    ratios = sorted(a / b for a, b in zip(*rounds, strict=True))
    assert result.paired == pytest.approx(ratios[2])
    assert result.paired_spread == pytest.approx((ratios[1], ratios[3]))
    assert paired_results(records, [result], which="all", shape=QUICK) == [result]


def test_an_information_row_has_no_verdict_and_no_close_call():
    target = Target("explicit / gfsa (ceiling 16.5)", Measure("gfsa", 32, "train"),
                    Measure("sdpa", 32, "train"), "info", 16.5)
    (result,) = evaluate_targets(_records(16.0, 1.0), (target,))
    assert result.ratio == pytest.approx(16.0) and result.passed is None
    assert not close_call(result)
    row = targets_table([result]).splitlines()[2]
    assert row == "| explicit / gfsa (ceiling 16.5) | train | 16.0 |  | — | information |"


def test_paired_results_measures_only_what_is_asked():
    records = _records(2.0, 1.0)
    results = evaluate_targets(records, (_target(2.1), _target(100.0)))
    kwargs = {"shape": QUICK, "device": "cpu", "budget_s": 0.0}
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
