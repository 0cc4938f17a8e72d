"""Sentences that put a comparison's numbers in context: what learning nothing scores, how much the
baseline over-smooths, and the machine and time the comparison took.

The HTML report opens with them, and the README's account of the built-in comparison is made of
them (``scripts/builtin_comparison_text.py``), so neither states a number its results do not hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .comparison_results import ComparisonResults

__all__ = ["findings_paragraph", "machine_sentence", "oversmoothing_sentence", "reference_sentence"]


def _percent(value: float) -> str:
    return f"{100 * value:.1f} %"


def reference_sentence(results: ComparisonResults) -> str | None:
    """Chance level and the majority-class score beside the baseline's test accuracy; None for a
    task without them (regression, language modelling) or a comparison written without them."""
    scores = results.task.get("reference_scores")
    if results.metric != "accuracy" or not scores:
        return None
    baseline = results.summary_row(results.baseline, "the comparison's results")
    reached = baseline.get("test_accuracy_mean")
    tail = ("" if reached is None else
            f"; {results.baseline} reaches {_percent(reached)} (mean over its seeds)")
    return (f"Chance level is {_percent(scores['chance_accuracy'])} test accuracy, and always "
            f"answering the training split's most frequent class (class "
            f"{scores['majority_class']}) scores {_percent(scores['majority_accuracy'])}{tail}.")


def oversmoothing_sentence(results: ComparisonResults) -> str | None:
    """How the baseline's tokens grow alike from the embeddings to its last layer; None without
    the baseline's diagnostics."""
    diagnostics: dict[str, Any] | None = results.diagnostics.get(results.baseline)
    cosines = (diagnostics or {}).get("token_cosine_similarity") or []
    if len(cosines) < 2:
        return None
    first, last, layers = cosines[0], cosines[-1], len(cosines) - 1
    trend = "rises" if last > first else "falls"
    verdict = (": over-smoothing, which the methods are meant to lessen" if last > first
               else ": no over-smoothing to lessen here")
    return (f"In {results.baseline}, the mean cosine similarity between distinct tokens {trend} "
            f"from {first:.2f} after the embeddings to {last:.2f} after the last of its {layers} "
            f"layers (1 would be every token the same){verdict}.")


def machine_sentence(results: ComparisonResults) -> str:
    """The machine and how long the comparison took on it."""
    env = results.environment
    device = env.get("device", "cpu")
    where = (env.get("cpu") or env.get("machine") or "an unnamed CPU"
             if device == "cpu" else device)
    cores = env.get("cpu_count")
    if cores:
        where += f" ({cores} cores)"
    threads = env.get("cpu_threads")
    per_run = f", {threads} torch thread{'s' if threads != 1 else ''} per run" if threads else ""
    took = ("" if results.elapsed_s is None else
            f" and took {results.elapsed_s / 60:.1f} minutes")
    return f"The comparison ran on {where}{per_run}{took}."


def findings_paragraph(results: ComparisonResults) -> str:
    """The comparison's findings as one paragraph of plain text: what learning nothing scores,
    the baseline's over-smoothing, the paired verdicts, and the machine and time."""
    from .html_report import verdict_summary  # the report imports this module

    sentences = [reference_sentence(results), oversmoothing_sentence(results),
                 *verdict_summary(results), machine_sentence(results)]
    return " ".join(sentence for sentence in sentences if sentence)
