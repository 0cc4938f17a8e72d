import random

import numpy as np
import pytest
import torch
from scipy import stats

from filterformer.evidence.verdicts import (
    OUTCOMES,
    adjusted_verdict,
    claim_verdict,
    margin_verdict,
    row_p_value,
    row_verdict,
)

from .results_fixture import reference_difference

S, C, I, N = "supports", "contradicts", "inconclusive at this scale", "not run yet"
#: compare's verdict → the verdict for each claim of a direction (better, worse).
EXPECTS = ("better", "worse")
RULES = {
    "better": (S, C),
    "worse": (C, S),
    "no significant difference": (I, I),
    "too few seeds": (I, I),
    None: (N, N),
}


@pytest.mark.parametrize("compare_verdict", list(RULES))
@pytest.mark.parametrize("expect", EXPECTS)
def test_verdicts_of_a_direction_follow_the_rules(compare_verdict, expect):
    expected = RULES[compare_verdict][EXPECTS.index(expect)]
    assert claim_verdict(compare_verdict, expect) == expected
    assert expected in OUTCOMES


def test_unknown_inputs_are_refused_with_the_valid_choices():
    with pytest.raises(ValueError, match="better, worse, same, not worse"):
        claim_verdict("better", "improves")
    with pytest.raises(ValueError, match="no significant difference"):
        claim_verdict("significant", "better")
    with pytest.raises(ValueError, match="margin"):
        claim_verdict("no significant difference", "same")


def _differences(mean: float, spread: float, n: int = 5) -> dict:
    values = (torch.randn(n) * spread + mean).tolist()
    return reference_difference(dict(enumerate(values)), dict.fromkeys(range(n), 0.0),
                                higher=True)


@pytest.mark.parametrize("higher", [True, False])
def test_a_not_worse_row_whose_interval_crosses_its_margin_does_not_support(higher):
    margin = random.uniform(0.005, 0.02)

    def verdict(gain_low, gain_high, m=margin):
        """The verdict of a row whose gain (positive: better) has this interval."""
        low, high = (gain_low, gain_high) if higher else (-gain_high, -gain_low)
        return margin_verdict(low, high, 5, "not worse", m, higher)

    # Compare's interval of random differences around 0 that reach beyond the margin: not
    # significant (the rule before margins said "supports"), and still not supported.
    while True:
        d = _differences(0.0, 2 * margin)
        if d["ci_low"] < -margin and d["ci_high"] > margin:
            break
    assert d["verdict"] == "no significant difference"
    assert verdict(d["ci_low"], d["ci_high"]) == I
    assert verdict(-2 * margin, 0.5 * margin) == I  # crosses the margin on the worse side
    assert verdict(-0.5 * margin, 2 * margin) == S  # the worse end inside the margin
    assert verdict(-3 * margin, -1.5 * margin) == C  # wholly worse than the margin
    assert verdict(-0.5 * margin, 2 * margin, None) == "no margin stated"


def test_a_same_row_needs_the_whole_interval_within_the_margin():
    margin = 0.01
    assert margin_verdict(-0.009, 0.009, 5, "same", margin, True) == S
    assert margin_verdict(-0.009, 0.011, 5, "same", margin, True) == I
    assert margin_verdict(0.011, 0.03, 5, "same", margin, True) == C
    assert margin_verdict(-0.03, -0.011, 5, "same", margin, False) == C
    assert margin_verdict(-0.009, 0.009, 2, "same", margin, True) == I  # too few seeds
    assert margin_verdict(None, None, 1, "same", margin, True) == I
    assert margin_verdict(-0.009, 0.009, 5, "same", None, True) == "no margin stated"
    assert row_verdict(None, "same", margin, True) == N


def test_p_values_are_the_paired_t_tests_of_scipy():
    data = np.array([0.012, -0.004, 0.021, 0.009, 0.015, 0.003])
    d = reference_difference(dict(enumerate(data)), dict.fromkeys(range(6), 0.0), higher=True)
    margin = 0.01
    # No difference, two-sided.
    expected = stats.ttest_1samp(data, 0.0).pvalue
    assert row_p_value(d, "better", None, True) == pytest.approx(expected, rel=1e-9)
    # Not worse: the one-sided test of a loss of at least the margin, doubled.
    expected = 2 * stats.ttest_1samp(data, -margin, alternative="greater").pvalue
    assert row_p_value(d, "not worse", margin, True) == pytest.approx(expected, rel=1e-9)
    # Lower is better: a loss is a rise.
    expected = 2 * stats.ttest_1samp(data, margin, alternative="less").pvalue
    flipped = {**d, "ci_low": d["ci_low"], "ci_high": d["ci_high"]}
    assert row_p_value(flipped, "not worse", margin, False) == pytest.approx(
        min(1.0, expected), rel=1e-9)
    # Same: the larger of the two one-sided tests (TOST), doubled.
    wide = 0.03
    expected = 2 * max(stats.ttest_1samp(data, -wide, alternative="greater").pvalue,
                       stats.ttest_1samp(data, wide, alternative="less").pvalue)
    assert row_p_value(d, "same", wide, True) == pytest.approx(expected, rel=1e-9)
    # p < 0.05 exactly when the margin verdict is decisive.
    for expect, m in (("not worse", margin), ("same", wide), ("same", margin)):
        decisive = row_verdict(d, expect, m, True) in (S, C)
        assert (row_p_value(d, expect, m, True) < 0.05) == decisive
    assert row_p_value(d, "same", None, True) is None
    assert row_p_value({**d, "seeds": 2}, "better", None, True) is None


def test_holm_makes_a_decisive_verdict_inconclusive_only_above_the_level():
    assert adjusted_verdict(S, 0.049) == S
    assert adjusted_verdict(S, 0.05) == I
    assert adjusted_verdict(C, 0.2) == I
    assert adjusted_verdict(I, 0.001) == I
    assert adjusted_verdict("no margin stated", None) == "no margin stated"
