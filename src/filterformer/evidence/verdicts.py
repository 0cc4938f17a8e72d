"""A test row's verdict: what compare's paired difference says of the paper's claim.

The statistics are compare's (:mod:`filterformer.training.compare.statistics`): the mean of the
per-seed differences ``method − baseline`` with its 95 % Student-t interval and a verdict in the
metric's direction. Here that verdict only meets what the paper claims.
"""

from __future__ import annotations

__all__ = [
    "CONTRADICTS",
    "EXPECTATIONS",
    "INCONCLUSIVE",
    "NOT_RUN",
    "OUTCOMES",
    "SUPPORTS",
    "claim_verdict",
    "detectable_difference",
]

#: What a test row may claim of the method against the baseline, in compare's orientation.
EXPECTATIONS = ("better", "worse", "same", "not worse")

SUPPORTS = "supports"
CONTRADICTS = "contradicts"
INCONCLUSIVE = "inconclusive at this scale"
NOT_RUN = "not run yet"
#: Every verdict a test row can get.
OUTCOMES = (SUPPORTS, CONTRADICTS, INCONCLUSIVE, NOT_RUN)

_SIGNIFICANT = ("better", "worse")
_NOT_SIGNIFICANT = ("no significant difference", "too few seeds")


def claim_verdict(compare_verdict: str | None, expect: str) -> str:
    """The verdict on a paper's claim from compare's verdict on the paired difference.

    Args:
        compare_verdict: the ``verdict`` of the method's ``difference`` on the metric in
            ``results.json`` (``better``, ``worse``, ``no significant difference``,
            ``too few seeds``), or None when the comparison has not run yet.
        expect: what the paper claims of the method against the baseline, in compare's
            orientation: ``better`` (an improvement), ``worse``, ``same`` (no difference), or
            ``not worse`` (on par or better).

    Returns:
        ``supports`` when compare's verdict is the claimed direction (for ``same``: no
        significant difference; for ``not worse``: better or no significant difference);
        ``contradicts`` when it is the opposite significant direction (for ``same``: any
        significant one; for ``not worse``: worse); ``inconclusive at this scale`` when the
        difference is not significant, or the seeds too few, and the claim is of a direction;
        ``not run yet`` without results. ``too few seeds`` is inconclusive whatever the claim.
    """
    if expect not in EXPECTATIONS:
        raise ValueError(f"expect must be one of {', '.join(EXPECTATIONS)}; got {expect!r}")
    if compare_verdict is None:
        return NOT_RUN
    if compare_verdict not in (*_SIGNIFICANT, *_NOT_SIGNIFICANT):
        raise ValueError(f"compare_verdict must be one of {', '.join(_SIGNIFICANT)}, "
                         f"{', '.join(_NOT_SIGNIFICANT)} or None; got {compare_verdict!r}")
    if compare_verdict == "too few seeds":
        return INCONCLUSIVE
    if expect == "same":
        return SUPPORTS if compare_verdict == "no significant difference" else CONTRADICTS
    if expect == "not worse":
        return CONTRADICTS if compare_verdict == "worse" else SUPPORTS
    if compare_verdict == "no significant difference":
        return INCONCLUSIVE
    return SUPPORTS if compare_verdict == expect else CONTRADICTS


def detectable_difference(ci_low: float | None, ci_high: float | None) -> float | None:
    """The smallest difference the seeds could have detected: the 95 % interval's half-width
    ``(ci_high − ci_low) / 2`` (an observed mean difference beyond it would have been
    significant); None without an interval (fewer than 2 seeds)."""
    if ci_low is None or ci_high is None:
        return None
    return (ci_high - ci_low) / 2
