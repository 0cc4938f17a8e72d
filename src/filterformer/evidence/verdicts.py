"""A test row's verdict: what compare's paired difference says of the paper's claim.

The statistics are compare's (:mod:`filterformer.training.compare.statistics`): the mean of the
per-seed differences ``method − baseline`` with its 95 % Student-t interval and a verdict in the
metric's direction. A claim of a direction (``better``, ``worse``) meets that verdict; a claim of
no loss (``not worse``) or of no difference (``same``) is judged against its stated margin with
the same interval (non-inferiority and equivalence), and without a margin it supports nothing.
:func:`row_p_value` gives each verdict's p-value, for Holm's correction within a claim.
"""

from __future__ import annotations

import math
from typing import Any

from scipy.stats import t as student_t

from ..training.compare.statistics import CONFIDENCE, MIN_SEEDS

__all__ = [
    "ALPHA",
    "CONTRADICTS",
    "EXPECTATIONS",
    "INCONCLUSIVE",
    "MARGIN_EXPECTATIONS",
    "NOT_RUN",
    "NO_MARGIN",
    "OUTCOMES",
    "SUPPORTS",
    "adjusted_verdict",
    "claim_verdict",
    "margin_verdict",
    "row_p_value",
    "row_verdict",
    "standard_error",
]

#: What a test row may claim of the method against the baseline, in compare's orientation.
EXPECTATIONS = ("better", "worse", "same", "not worse")
#: The claims judged against a margin.
MARGIN_EXPECTATIONS = ("same", "not worse")
#: The two-sided level of every test (compare's 95 % intervals).
ALPHA = round(1 - CONFIDENCE, 12)

SUPPORTS = "supports"
CONTRADICTS = "contradicts"
INCONCLUSIVE = "inconclusive at this scale"
NO_MARGIN = "no margin stated"
NOT_RUN = "not run yet"
#: Every verdict a test row can get.
OUTCOMES = (SUPPORTS, CONTRADICTS, INCONCLUSIVE, NO_MARGIN, NOT_RUN)

_SIGNIFICANT = ("better", "worse")
_NOT_SIGNIFICANT = ("no significant difference", "too few seeds")


def _check_expect(expect: str) -> None:
    if expect not in EXPECTATIONS:
        raise ValueError(f"expect must be one of {', '.join(EXPECTATIONS)}; got {expect!r}")


def claim_verdict(compare_verdict: str | None, expect: str) -> str:
    """The verdict on a paper's claim of a direction from compare's verdict.

    Args:
        compare_verdict: the ``verdict`` of the method's ``difference`` on the metric in
            ``results.json`` (``better``, ``worse``, ``no significant difference``,
            ``too few seeds``), or None when the comparison has not run yet.
        expect: ``better`` (an improvement) or ``worse``, in compare's orientation; ``same``
            and ``not worse`` need the interval and a margin (:func:`margin_verdict`).

    Returns:
        ``supports`` when compare's verdict is the claimed direction, ``contradicts`` when it
        is the opposite one, ``inconclusive at this scale`` when the difference is not
        significant or the seeds are too few, ``not run yet`` without results.
    """
    _check_expect(expect)
    if expect in MARGIN_EXPECTATIONS:
        raise ValueError(f"expect {expect!r} is judged against a margin (margin_verdict), not "
                         "by compare's verdict; claim_verdict takes better or worse")
    if compare_verdict is None:
        return NOT_RUN
    if compare_verdict not in (*_SIGNIFICANT, *_NOT_SIGNIFICANT):
        raise ValueError(f"compare_verdict must be one of {', '.join(_SIGNIFICANT)}, "
                         f"{', '.join(_NOT_SIGNIFICANT)} or None; got {compare_verdict!r}")
    if compare_verdict in _NOT_SIGNIFICANT:
        return INCONCLUSIVE
    return SUPPORTS if compare_verdict == expect else CONTRADICTS


def margin_verdict(ci_low: float | None, ci_high: float | None, seeds: int, expect: str,
                   margin: float | None, higher_is_better: bool) -> str:
    """The verdict on a claim of no loss or of no difference, against its margin.

    Args:
        ci_low, ci_high: the 95 % interval of ``method − baseline`` (None: fewer than 2 seeds).
        seeds: the number of paired seeds.
        expect: ``not worse`` or ``same``.
        margin: the difference (> 0, the metric's units) that still counts as no worse or the
            same; None when the claims file states none.
        higher_is_better: the metric's direction.

    Returns:
        ``no margin stated`` without a margin; ``inconclusive at this scale`` without an
        interval or with fewer than 3 seeds. ``not worse``: ``supports`` when the interval's
        worse end is inside the margin (non-inferiority), ``contradicts`` when the whole interval
        is worse than the margin. ``same``: ``supports`` when the whole interval lies within
        ±margin (equivalence), ``contradicts`` when it lies wholly beyond it on one side.
        Otherwise ``inconclusive at this scale``.
    """
    if expect not in MARGIN_EXPECTATIONS:
        raise ValueError(f"expect must be one of {', '.join(MARGIN_EXPECTATIONS)} for a "
                         f"margin; got {expect!r}")
    if margin is None:
        return NO_MARGIN
    if ci_low is None or ci_high is None or seeds < MIN_SEEDS:
        return INCONCLUSIVE
    if expect == "same":
        if -margin < ci_low and ci_high < margin:
            return SUPPORTS
        return CONTRADICTS if ci_low > margin or ci_high < -margin else INCONCLUSIVE
    # Oriented so that a larger value is better: the worse end is then the lower one.
    low, high = (ci_low, ci_high) if higher_is_better else (-ci_high, -ci_low)
    if low > -margin:
        return SUPPORTS
    return CONTRADICTS if high < -margin else INCONCLUSIVE


def row_verdict(difference: dict[str, Any] | None, expect: str, margin: float | None,
                higher_is_better: bool) -> str:
    """A row's verdict from its paired ``difference`` (``mean``, ``ci_low``, ``ci_high``,
    ``verdict``, ``seeds``; None: not run yet): :func:`claim_verdict` for a direction,
    :func:`margin_verdict` for ``same`` and ``not worse``."""
    _check_expect(expect)
    if difference is None:
        return NOT_RUN
    if expect in MARGIN_EXPECTATIONS:
        return margin_verdict(difference["ci_low"], difference["ci_high"], difference["seeds"],
                              expect, margin, higher_is_better)
    return claim_verdict(difference["verdict"], expect)


def standard_error(ci_low: float, ci_high: float, seeds: int) -> float:
    """The standard error ``sd / √n`` of the mean difference behind compare's interval
    ``mean ± t(0.975, n − 1) · sd / √n``."""
    return (ci_high - ci_low) / 2 / float(student_t.ppf(1 - ALPHA / 2, seeds - 1))


def _ratio(value: float, scale: float) -> float:
    """``value / scale``, with a zero scale (equal differences on every seed) giving ±∞ or 0."""
    if scale > 0:
        return value / scale
    return 0.0 if value == 0 else math.copysign(math.inf, value)


def row_p_value(difference: dict[str, Any] | None, expect: str, margin: float | None,
                higher_is_better: bool) -> float | None:
    """The p-value of the paired t-test behind the row's verdict, two-sided at the interval's
    level so that ``p < 0.05`` exactly when the verdict is decisive.

    ``better``/``worse``: the test of no difference. ``not worse``: of a loss of at least the
    margin (supports when rejected), or of a loss within it (contradicts), whichever is smaller.
    ``same``: the two one-sided tests of equivalence (the larger p; supports when rejected), or
    of a difference beyond the margin on one side (contradicts), whichever is smaller. Each
    one-sided p is doubled, as compare's two-sided 95 % interval is each side's 2.5 % test.

    Returns:
        The p-value in [0, 1]; None when the row has no test: not run yet, no interval, fewer
        than 3 seeds, or a ``same``/``not worse`` row without a margin.
    """
    _check_expect(expect)
    if difference is None or difference["ci_low"] is None or difference["seeds"] < MIN_SEEDS:
        return None
    if expect in MARGIN_EXPECTATIONS and margin is None:
        return None
    n, mean = difference["seeds"], difference["mean"]
    se = standard_error(difference["ci_low"], difference["ci_high"], n)
    sf = lambda x: float(student_t.sf(x, n - 1))  # noqa: E731
    cdf = lambda x: float(student_t.cdf(x, n - 1))  # noqa: E731
    if expect in _SIGNIFICANT:
        return min(1.0, 2 * sf(abs(_ratio(mean, se))))
    if expect == "not worse":
        gain = _ratio((mean if higher_is_better else -mean) + margin, se)
        return min(1.0, 2 * sf(gain), 2 * cdf(gain))
    above_lower, above_upper = _ratio(mean + margin, se), _ratio(mean - margin, se)
    equivalent = 2 * max(sf(above_lower), cdf(above_upper))
    beyond = 2 * min(cdf(above_lower), sf(above_upper))
    return min(1.0, equivalent, beyond)


def adjusted_verdict(verdict: str, adjusted_p: float | None) -> str:
    """The verdict after a multiplicity correction: a decisive verdict (``supports`` or
    ``contradicts``) whose adjusted p-value is not below 0.05 becomes ``inconclusive at this
    scale``; every other verdict stays."""
    if verdict in (SUPPORTS, CONTRADICTS) and (adjusted_p is None or adjusted_p >= ALPHA):
        return INCONCLUSIVE
    return verdict
