"""The judged rows of a claim: each test row on each of its settings, with compare's paired
difference and the verdict on the paper's claim."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .claims import Claim, ClaimTest, Setting
from .comparisons import method_difference, setting_difference
from .numbers import format_half_width, format_interval
from .verdicts import INCONCLUSIVE, SUPPORTS, claim_verdict, detectable_difference

__all__ = ["JudgedRow", "judge_claim", "verdict_text"]


@dataclass(frozen=True)
class JudgedRow:
    """One test row on one setting.

    Attributes:
        test: the claims file's row.
        setting: the comparison it is judged on.
        results: that comparison's ``results.json`` (None: not run yet).
        difference: the method's paired difference from the baseline on the metric (``mean``,
            ``ci_low``, ``ci_high``, ``verdict``, ``seeds``), or from itself in the row's
            ``versus`` setting; None when not run yet.
        versus: the ``versus`` setting's ``results.json`` (None: no ``versus``, or not run yet).
        verdict: :func:`~filterformer.evidence.verdicts.claim_verdict`'s.
    """

    test: ClaimTest
    setting: Setting
    results: dict[str, Any] | None
    difference: dict[str, Any] | None
    verdict: str
    versus: dict[str, Any] | None = None


def judge_claim(claim: Claim,
                comparisons: Mapping[str, dict[str, Any] | None]) -> list[JudgedRow]:
    """Every test row of ``claim`` on each of its settings, in the claims file's order.

    Args:
        claim: the claim.
        comparisons: per setting's ``results`` name, its ``results.json`` (None: not run yet).

    Raises:
        ValueError: naming the claim, when a row's method is not compared in a comparison that
            has run, is its baseline, or has no difference on the row's metric.
    """
    settings = {s.results: s for s in claim.settings}
    rows = []
    for test in claim.tests:
        for name in test.settings:
            results = comparisons[name]
            versus = comparisons[test.versus] if test.versus else None
            where = f"claim {claim.id}, setting {name}"
            if results is None or (test.versus and versus is None):
                difference = None
            elif test.versus:
                difference = setting_difference(results, versus, test.method, test.metric, where)
            else:
                difference = method_difference(results, test.method, test.metric, where)
            rows.append(JudgedRow(test, settings[name], results, difference,
                                  claim_verdict(difference and difference["verdict"],
                                                test.expect), versus))
    return rows


def verdict_text(row: JudgedRow) -> str:
    """The verdict in bold, with what qualifies it: the smallest detectable difference of an
    inconclusive row, the interval of a supported claim of no difference."""
    text = f"**{row.verdict}**"
    difference, metric = row.difference, row.test.metric
    if row.verdict == INCONCLUSIVE:
        half = detectable_difference(difference["ci_low"], difference["ci_high"])
        if half is None:
            return f"{text} (too few seeds for an interval: {difference['seeds']})"
        few = "; too few seeds" if difference["verdict"] == "too few seeds" else ""
        return f"{text} (smallest detectable difference {format_half_width(metric, half)}{few})"
    if row.verdict == SUPPORTS and difference["verdict"] == "no significant difference":
        interval = format_interval(metric, difference["ci_low"], difference["ci_high"])
        return f"{text} (no significant difference; 95 % interval {interval})"
    return text
