"""Paired differences from the baseline: intervals and verdicts against ``scipy.stats``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from filterformer.training.compare.statistics import (
    MIN_SEEDS,
    compared_metrics,
    paired_difference,
    step_time_ratio,
    summarize,
)


def paired(differences, rng: np.random.Generator, seeds=None):
    """Baseline values per seed and method values that differ from them by ``differences``."""
    seeds = list(range(len(differences))) if seeds is None else seeds
    baseline = dict(zip(seeds, rng.uniform(0.2, 0.8, len(seeds)).tolist(), strict=True))
    method = {s: baseline[s] + d for s, d in zip(seeds, differences, strict=True)}
    return method, baseline


def reference(differences) -> tuple[float, float, float, float]:
    """scipy's paired t-test: mean, 95 % interval and two-sided p-value."""
    test = stats.ttest_1samp(differences, 0.0)
    interval = test.confidence_interval(0.95)
    return float(np.mean(differences)), interval.low, interval.high, test.pvalue


@pytest.mark.parametrize("n", [3, 5, 8])
@pytest.mark.parametrize("shift", [0.0, 0.5, 3.0])
@pytest.mark.parametrize("higher_is_better", [True, False])
def test_interval_and_verdict_match_a_paired_t_test(n, shift, higher_is_better):
    rng = np.random.default_rng()
    for _ in range(20):
        differences = (rng.normal(shift, 1.0, n) * rng.uniform(0.01, 0.1)).tolist()
        method, baseline = paired(differences, rng)
        result = paired_difference(method, baseline, higher_is_better)
        mean, low, high, p = reference([method[s] - baseline[s] for s in baseline])
        assert result.seeds == n
        assert (result.mean, result.ci_low, result.ci_high) == pytest.approx((mean, low, high),
                                                                             rel=1e-9, abs=1e-12)
        if p >= 0.05:
            assert result.verdict == "no significant difference"
        else:
            better = (mean > 0) == higher_is_better
            assert result.verdict == ("better" if better else "worse")


def test_fixed_paired_data():
    # Test accuracy of four seeds: the method beats the baseline on each.
    baseline = {0: 0.30, 1: 0.32, 2: 0.35, 3: 0.31}
    method = {0: 0.36, 1: 0.35, 2: 0.41, 3: 0.33}
    differences = np.array([0.06, 0.03, 0.06, 0.02])
    half = stats.t.ppf(0.975, 3) * differences.std(ddof=1) / 2
    result = paired_difference(method, baseline, higher_is_better=True)
    assert result.mean == pytest.approx(0.0425)
    assert (result.ci_low, result.ci_high) == pytest.approx((0.0425 - half, 0.0425 + half))
    assert result.ci_low > 0 and result.verdict == "better" and result.seeds == 4
    # The same numbers as perplexities: higher is worse.
    assert paired_difference(method, baseline, higher_is_better=False).verdict == "worse"


@pytest.mark.parametrize(("difference", "higher_is_better", "verdict"), [
    (0.0625, True, "better"),
    (0.0625, False, "worse"),
    (-0.25, False, "better"),
    (0.0, True, "no significant difference"),
])
def test_zero_spread_gives_an_interval_of_zero_width(difference, higher_is_better, verdict):
    # Binary fractions: every seed's difference is exactly ``difference``.
    baseline = dict(enumerate([0.5, 0.25, 0.75, 0.375]))
    method = {seed: value + difference for seed, value in baseline.items()}
    result = paired_difference(method, baseline, higher_is_better)
    assert result.ci_low == result.ci_high == result.mean == difference
    assert result.verdict == verdict


def test_two_seeds_are_too_few_but_still_get_their_interval():
    rng = np.random.default_rng()
    differences = [0.5, 0.6]  # a large, consistent difference: significance is not the point
    method, baseline = paired(differences, rng)
    result = paired_difference(method, baseline, higher_is_better=True)
    mean, low, high, _ = reference([method[s] - baseline[s] for s in baseline])
    assert (result.mean, result.ci_low, result.ci_high) == pytest.approx((mean, low, high))
    assert result.verdict == "too few seeds" and result.seeds == 2 < MIN_SEEDS
    one = paired_difference({0: 0.7}, {0: 0.5}, higher_is_better=True)
    assert (one.mean, one.ci_low, one.ci_high, one.verdict, one.seeds) == pytest.approx(
        (0.2, None, None, "too few seeds", 1))
    none = paired_difference({0: 0.7}, {1: 0.5}, higher_is_better=True)
    assert (none.mean, none.verdict, none.seeds) == (None, "too few seeds", 0)


@pytest.mark.parametrize("higher_is_better", [True, False])
def test_an_interval_that_touches_zero_is_not_significant(higher_is_better):
    # Differences h − c, h, h + c: mean h, sd c; with h = t(0.975, 2)·c/√3 the interval's lower
    # end is exactly 0 and the paired t-test's p-value exactly 0.05. Significance is p < 0.05,
    # 0 strictly outside the interval, so touching 0 is "no significant difference".
    rng = np.random.default_rng()
    c = rng.uniform(0.01, 0.1)
    h = stats.t.ppf(0.975, 2) * c / math.sqrt(3)
    sign = 1.0 if higher_is_better else -1.0
    method, baseline = paired([sign * (h - c), sign * h, sign * (h + c)], rng)
    result = paired_difference(method, baseline, higher_is_better)
    _, _, _, p = reference([method[s] - baseline[s] for s in baseline])
    assert p == pytest.approx(0.05, abs=1e-9)
    end = result.ci_low if higher_is_better else result.ci_high
    assert abs(end) < 1e-12
    assert result.verdict == "no significant difference"
    # A little further from 0 it is significant, in the metric's own direction.
    method, baseline = paired([sign * (h * 1.001 - c), sign * h * 1.001, sign * (h * 1.001 + c)],
                              rng)
    assert paired_difference(method, baseline, higher_is_better).verdict == "better"


def test_only_seeds_both_ran_are_paired():
    method = {0: 0.5, 1: None, 2: 0.6, 3: 0.7, 4: 0.8, 6: 0.4}
    baseline = {0: 0.4, 1: 0.3, 2: float("nan"), 3: 0.5, 5: 0.1, 6: 0.35}
    result = paired_difference(method, baseline, higher_is_better=True)
    mean, low, high, _ = reference([0.1, 0.2, 0.05])
    assert result.seeds == 3
    assert (result.mean, result.ci_low, result.ci_high) == pytest.approx((mean, low, high))


def test_step_time_ratio_is_the_median_of_per_seed_ratios():
    rng = np.random.default_rng()
    baseline = dict(enumerate(rng.uniform(0.01, 0.02, 5).tolist()))
    method = dict(enumerate(rng.uniform(0.01, 0.02, 5).tolist()))
    method[4] = None
    expected = np.median([method[s] / baseline[s] for s in range(4)])
    assert step_time_ratio(method, baseline) == pytest.approx(expected)
    assert step_time_ratio({0: None}, {0: 0.01}) is None
    assert step_time_ratio(baseline, baseline) == pytest.approx(1.0)


def run(method: str, seed: int, accuracy: float, cosine: float, time: float | None) -> dict:
    return {"method": method, "seed": seed, "test_accuracy": accuracy,
            "validation_accuracy": accuracy, "last_layer_cosine_similarity": cosine,
            "step_time_s": time, "peak_memory_bytes": 1000, "num_parameters": 10,
            "train_time_s": 1.0}


def test_summary_rows_carry_each_difference_from_the_baseline():
    rng = np.random.default_rng()
    values = {m: rng.uniform(0.1, 0.9, (4, 3)) for m in ("gfsa", "softmax", "agf")}
    runs = [run(m, seed, *v[seed]) for m, v in values.items() for seed in range(4)]
    rows = summarize(runs, ["gfsa", "softmax", "agf"], "accuracy", baseline="softmax")
    assert [row["method"] for row in rows] == ["gfsa", "softmax", "agf"]
    assert rows[1]["difference"] is None and rows[1]["step_time_ratio"] == pytest.approx(1.0)
    keys = list(compared_metrics("accuracy"))
    assert keys == ["test_accuracy", "last_layer_cosine_similarity", "step_time_s"]
    for row in (rows[0], rows[2]):
        mine, base = values[row["method"]], values["softmax"]
        for column, key in enumerate(keys):
            mean, low, high, _ = reference(mine[:, column] - base[:, column])
            difference = row["difference"][key]
            assert difference["seeds"] == 4
            assert (difference["mean"], difference["ci_low"], difference["ci_high"]) == \
                pytest.approx((mean, low, high))
        assert row["step_time_ratio"] == pytest.approx(np.median(mine[:, 2] / base[:, 2]))
        assert row["test_accuracy_mean"] == pytest.approx(mine[:, 0].mean())


def test_missing_times_and_a_bad_baseline():
    runs = [run(m, seed, 0.5, 0.5, None) for m in ("softmax", "gfsa") for seed in range(3)]
    rows = summarize(runs, ["softmax", "gfsa"], "accuracy", baseline="softmax")
    assert rows[1]["step_time_ratio"] is None
    assert rows[1]["difference"]["step_time_s"] == {
        "mean": None, "ci_low": None, "ci_high": None, "verdict": "too few seeds", "seeds": 0}
    with pytest.raises(ValueError, match=r"baseline 'agf' is not among the methods: softmax, "):
        summarize(runs, ["softmax", "gfsa"], "accuracy", baseline="agf")
    assert compared_metrics("perplexity")["test_perplexity"] is False
