"""The effect detectable with 80 % power and the seeds a paper's effect needs, against the
power of the paired t-test computed here with scipy's noncentral t."""

import numpy as np
import pytest
from scipy import stats

from filterformer.evidence.power import detectable_effect, difference_sd, seeds_needed

from .results_fixture import reference_difference

DATA = np.array([0.0123, -0.0041, 0.0207, 0.0093, 0.0151, 0.0032, -0.0088])


def _power(effect: float, sd: float, n: int) -> float:
    """The two-sided paired t-test's power at 0.05 (scipy, written out here)."""
    critical = stats.t.ppf(0.975, n - 1)
    nc = effect * np.sqrt(n) / sd
    return stats.nct.sf(critical, n - 1, nc) + stats.nct.cdf(-critical, n - 1, nc)


def _difference() -> dict:
    return reference_difference(dict(enumerate(DATA)), dict.fromkeys(range(len(DATA)), 0.0),
                                higher=True)


def test_the_spread_is_recovered_from_compare_s_interval():
    d = _difference()
    assert difference_sd(d["ci_low"], d["ci_high"], d["seeds"]) == pytest.approx(
        np.std(DATA, ddof=1), rel=1e-9)
    assert difference_sd(None, None, 1) is None


def test_the_detectable_effect_has_80_percent_power_exactly():
    d = _difference()
    sd, n = np.std(DATA, ddof=1), len(DATA)
    effect = detectable_effect(difference_sd(d["ci_low"], d["ci_high"], n), n)
    assert _power(effect, sd, n) == pytest.approx(0.8, abs=1e-9)
    # Larger than the interval's half-width (which is detected about half the time) and near
    # the normal-theory approximation (t quantiles).
    half = (d["ci_high"] - d["ci_low"]) / 2
    assert 0.5 < _power(half, sd, n) < 0.62
    approximation = (stats.t.ppf(0.975, n - 1) + stats.t.ppf(0.8, n - 1)) * sd / np.sqrt(n)
    assert effect == pytest.approx(approximation, rel=0.05)
    assert detectable_effect(0.0, n) == 0.0 and detectable_effect(None, n) is None


@pytest.mark.parametrize("effect", [0.004, 0.008, -0.008, 0.03])
def test_the_seeds_needed_are_the_fewest_with_80_percent_power(effect):
    sd = np.std(DATA, ddof=1)
    needed = seeds_needed(effect, sd)
    assert _power(abs(effect), sd, needed) >= 0.8
    if needed > 3:  # compare judges no fewer than 3 seeds
        assert _power(abs(effect), sd, needed - 1) < 0.8
    assert seeds_needed(None, sd) is None and seeds_needed(0.0, sd) is None


def test_a_tiny_spread_stays_finite():
    """Large noncentralities, where scipy's lower tail underflows to NaN."""
    assert seeds_needed(0.05, 1e-4) == 3
    effect = detectable_effect(1e-3, 2)
    assert np.isfinite(effect) and _power(effect, 1e-3, 2) == pytest.approx(0.8, abs=1e-9)
