"""What the seeds could detect: the power of compare's paired t-test, exactly (noncentral t).

With ``n`` paired seeds whose differences have standard deviation ``sd``, the two-sided test at
``α = 0.05`` rejects no difference when ``|T| > t(1 − α/2, n − 1)``; for a true mean difference
``δ``, ``T`` follows the noncentral t distribution with ``n − 1`` degrees of freedom and
noncentrality ``δ √n / sd``. :func:`detectable_effect` is the ``δ`` detected with 80 % power,
:func:`seeds_needed` the fewest seeds that detect a given ``δ`` so, both from the observed
``sd`` (recovered from compare's interval, :func:`difference_sd`).
"""

from __future__ import annotations

import math

from scipy.optimize import brentq
from scipy.stats import nct
from scipy.stats import t as student_t

from ..training.compare.statistics import MIN_SEEDS
from .verdicts import ALPHA, standard_error

__all__ = ["POWER", "SEEDS_LIMIT", "detectable_effect", "difference_sd", "power",
           "seeds_needed"]

#: The power the document's detectable effects and seed counts are computed for.
POWER = 0.8
#: :func:`seeds_needed` searches no further than this.
SEEDS_LIMIT = 100_000


def difference_sd(ci_low: float | None, ci_high: float | None, seeds: int) -> float | None:
    """The standard deviation over seeds of the paired differences behind compare's interval
    (``sd = se · √n``); None without an interval (fewer than 2 seeds)."""
    if ci_low is None or ci_high is None or seeds < 2:
        return None
    return standard_error(ci_low, ci_high, seeds) * math.sqrt(seeds)


def power(effect: float, sd: float, seeds: int, alpha: float = ALPHA) -> float:
    """The probability that the two-sided paired t-test with ``seeds`` seeds at level ``alpha``
    finds a true mean difference ``effect`` significant, the differences' spread being ``sd``
    (> 0; ``seeds`` ≥ 2)."""
    df = seeds - 1
    critical = float(student_t.ppf(1 - alpha / 2, df))
    shift = abs(effect) * math.sqrt(seeds) / sd
    # The wrong-sign tail is below α/2 and vanishes as the shift grows; scipy returns NaN for
    # it once it underflows.
    wrong_sign = float(nct.cdf(-critical, df, shift))
    return float(nct.sf(critical, df, shift)) + (wrong_sign if math.isfinite(wrong_sign) else 0.0)


def detectable_effect(sd: float | None, seeds: int, target: float = POWER,
                      alpha: float = ALPHA) -> float | None:
    """The true mean difference (≥ 0) that ``seeds`` seeds detect with probability ``target``
    from the spread ``sd``; 0 for ``sd = 0`` (any difference is then detected); None without a
    spread or with fewer than 2 seeds."""
    if sd is None or seeds < 2:
        return None
    if sd == 0:
        return 0.0
    high = sd
    while power(high, sd, seeds, alpha) < target:
        high *= 2
    return float(brentq(lambda d: power(d, sd, seeds, alpha) - target, 0.0, high,
                        xtol=1e-12 * sd, rtol=1e-12))


def seeds_needed(effect: float | None, sd: float | None, target: float = POWER,
                 alpha: float = ALPHA) -> int | None:
    """The fewest seeds (at least 3, the fewest compare judges) with which the paired t-test
    detects a true mean difference ``effect`` with probability ``target``, from the spread
    ``sd``; None without an effect or a spread, for an effect of 0, or beyond
    :data:`SEEDS_LIMIT`."""
    if effect is None or sd is None or effect == 0:
        return None
    if sd == 0:
        return MIN_SEEDS
    if power(effect, sd, SEEDS_LIMIT, alpha) < target:
        return None
    if power(effect, sd, MIN_SEEDS, alpha) >= target:
        return MIN_SEEDS
    # The power grows with the seeds: double until it is reached, then bisect.
    low, high = MIN_SEEDS, 2 * MIN_SEEDS
    while power(effect, sd, high, alpha) < target:
        low, high = high, min(2 * high, SEEDS_LIMIT)
    while high - low > 1:
        middle = (low + high) // 2
        if power(effect, sd, middle, alpha) >= target:
            high = middle
        else:
            low = middle
    return high
