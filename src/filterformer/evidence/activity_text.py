"""A claim's filter activity: per setting, how far each compared method's own parameters moved
from their start, as compare's report words it
(:func:`~filterformer.training.compare.activity.activity_sentences`), or that the setting's
results predate that measurement."""

from __future__ import annotations

from collections.abc import Mapping

from ..training.compare.activity import activity_sentences
from ..training.compare.comparison_results import ComparisonResults
from .claims import Claim

__all__ = ["NOT_RECORDED", "activity_lines"]

#: What a setting whose ``results.json`` has no ``method_activity`` shows.
NOT_RECORDED = "not recorded in these results (they predate its measurement)"
#: What a recorded setting shows when no compared method adds parameters of its own.
_NOTHING_TO_MOVE = "no compared method adds parameters of its own"


def _setting_activity(results: ComparisonResults | None) -> str | list[str]:
    """One setting's activity: a phrase (not run, not recorded, nothing to move) or one
    sentence per method."""
    if results is None:
        return "not run yet"
    if not results.method_activity:
        return NOT_RECORDED
    return activity_sentences(results) or _NOTHING_TO_MOVE


def _capitalised(phrase: str) -> str:
    return phrase[0].upper() + phrase[1:] + "."


def activity_lines(claim: Claim,
                   comparisons: Mapping[str, ComparisonResults | None]) -> list[str]:
    """The claim's "Filter activity" subsection: per setting (``comparisons``, per setting's
    ``results`` name, None while not run), its methods' sentences as a list, or why it has
    none; a claim of several settings names each setting."""
    lines = ["### Filter activity", ""]
    several = len(claim.settings) > 1
    for setting in claim.settings:
        activity = _setting_activity(comparisons[setting.results])
        if isinstance(activity, str):
            lines.append(f"- {setting.label}: {activity}." if several
                         else _capitalised(activity))
        elif several:
            lines += [f"- {setting.label}:", *(f"  - {sentence}" for sentence in activity)]
        else:
            lines += [f"- {sentence}" for sentence in activity]
    return [*lines, ""]
