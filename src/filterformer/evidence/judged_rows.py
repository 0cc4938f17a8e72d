"""The judged rows of a claim: each test row on each of its settings, with compare's paired
difference, the verdict on the paper's claim before and after Holm's correction within the
claim, what the seeds could detect, and whether the row was fixed before its results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..training.compare.comparison_results import RESULTS_FILE, ComparisonResults
from ..training.compare.statistics import MIN_SEEDS
from .claims import Claim, ClaimTest, Setting
from .comparisons import (
    interaction_difference,
    method_difference,
    metric_direction,
    setting_difference,
)
from .history import POST_HOC, UNKNOWN, ClaimsHistory, claim_row_key
from .power import detectable_effect, difference_sd, seeds_needed
from .verdicts import INCONCLUSIVE, adjusted_verdict, row_p_value, row_verdict

__all__ = ["JudgedRow", "holm", "judge_claim", "paper_effect_place", "verdict_text"]

#: Where the paper's effect lies against the row's interval.
INSIDE, OUTSIDE, CANNOT_TELL = "inside the interval", "outside the interval", "cannot tell"


@dataclass(frozen=True)
class JudgedRow:
    """One test row on one setting.

    Attributes:
        test: the claims file's row.
        setting: the comparison it is judged on.
        results: that comparison's ``results.json`` (None: not run yet).
        difference: the method's paired difference from the baseline on the metric (``mean``,
            ``ci_low``, ``ci_high``, ``verdict``, ``seeds``), or from itself in the row's
            ``versus`` setting, or (an ``interaction`` row) the difference of its differences
            from the baseline here and in ``versus``; None when not run yet.
        verdict: :func:`~filterformer.evidence.verdicts.row_verdict`'s.
        versus: the ``versus`` setting's ``results.json`` (None: no ``versus``, or not run yet).
        p_value: the p-value behind the verdict (None: the row has no test).
        adjusted_p: ``p_value`` after Holm's correction within the claim.
        adjusted_verdict: the verdict at the adjusted p-value.
        fixed: whether the row was fixed before its results (:mod:`.history`).
        detectable: the mean difference the seeds detect with 80 % power from the observed
            spread (None: no interval).
        seeds_for_paper: the seeds that detect the paper's effect with 80 % power from the
            observed spread (None: no paper effect, no interval, or beyond the search).
    """

    test: ClaimTest
    setting: Setting
    results: ComparisonResults | None
    difference: dict[str, Any] | None
    verdict: str
    versus: ComparisonResults | None = None
    p_value: float | None = None
    adjusted_p: float | None = None
    adjusted_verdict: str | None = None
    fixed: str = UNKNOWN
    detectable: float | None = None
    seeds_for_paper: int | None = None


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values of a family, in the given order; None entries (rows
    without a test) are not in the family and stay None.

    The i-th smallest of m p-values becomes ``max over j ≤ i of min(1, (m − j + 1) · p_(j))``.
    """
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        adjusted[i] = running
    return adjusted


def paper_effect_place(row: JudgedRow) -> str | None:
    """Whether the row's interval holds the paper's effect; None when the claims file gives no
    effect, ``cannot tell`` without an interval."""
    effect, difference = row.test.paper_effect, row.difference
    if effect is None:
        return None
    if difference is None or difference["ci_low"] is None:
        return CANNOT_TELL
    return INSIDE if difference["ci_low"] <= effect <= difference["ci_high"] else OUTSIDE


def _results_files(results_root: Path | None, names: Sequence[str],
                   comparisons: Mapping[str, ComparisonResults | None]
                   ) -> list[tuple[Path, ComparisonResults]]:
    root = Path(results_root) if results_root is not None else Path()
    return [(root / name / RESULTS_FILE, comparisons[name]) for name in names]


def judge_claim(claim: Claim, comparisons: Mapping[str, ComparisonResults | None],
                history: ClaimsHistory | None = None,
                results_root: str | Path | None = None) -> list[JudgedRow]:
    """Every test row of ``claim`` on each of its settings, in the claims file's order.

    Args:
        claim: the claim.
        comparisons: per setting's ``results`` name, its ``results.json`` (None: not run yet).
        history: the claims file's history (None: whether rows were fixed before their results
            is unknown).
        results_root: the directory the settings' ``results`` are relative to (for the
            history of their ``results.json``).

    Raises:
        ValueError: naming the claim, when a row's method is not compared in a comparison that
            has run, is its baseline, or has no difference on the row's metric; naming both
            results files, when an interaction row's two comparisons differ in baseline or
            seeds.
    """
    settings = {s.results: s for s in claim.settings}
    rows = []
    for test in claim.tests:
        higher = metric_direction(test.metric)
        for name in test.settings:
            results = comparisons[name]
            versus = comparisons[test.versus] if test.versus else None
            where = f"claim {claim.id}, setting {name}"
            names = [name, *([test.versus] if test.versus else [])]
            files = _results_files(results_root, names, comparisons)
            if results is None or (test.versus and versus is None):
                difference = None
            elif test.interaction:
                difference = interaction_difference(results, versus, test.method, test.metric,
                                                    where, (files[0][0], files[1][0]))
            elif test.versus:
                difference = setting_difference(results, versus, test.method, test.metric, where)
            else:
                difference = method_difference(results, test.method, test.metric, where)
            fixed = UNKNOWN
            if difference is not None and history is not None:
                fixed = history.status(claim_row_key(claim.id, test, name), files)
            sd = difference_sd(difference["ci_low"], difference["ci_high"],
                               difference["seeds"]) if difference else None
            seeds = difference["seeds"] if difference else 0
            rows.append(JudgedRow(
                test, settings[name], results, difference,
                row_verdict(difference, test.expect, test.margin, higher), versus,
                p_value=row_p_value(difference, test.expect, test.margin, higher), fixed=fixed,
                detectable=detectable_effect(sd, seeds),
                seeds_for_paper=seeds_needed(test.paper_effect, sd)))
    adjusted = holm([row.p_value for row in rows])
    return [JudgedRow(**{**vars(row), "adjusted_p": p,
                         "adjusted_verdict": adjusted_verdict(row.verdict, p)})
            for row, p in zip(rows, adjusted, strict=True)]


def verdict_text(row: JudgedRow, adjusted: bool = False) -> str:
    """The verdict (``adjusted``: after Holm's correction) in bold, with what qualifies it: too
    few seeds, or a row changed after its results (*post hoc*)."""
    verdict = row.adjusted_verdict if adjusted else row.verdict
    text = f"**{verdict}**"
    difference = row.difference
    if verdict == INCONCLUSIVE and difference["seeds"] < MIN_SEEDS:
        text += (f" (too few seeds for an interval: {difference['seeds']})"
                 if difference["ci_low"] is None else f" (too few seeds: {difference['seeds']})")
    if row.fixed == POST_HOC and not adjusted:
        text += " *post hoc*"
    return text
