"""Whether each compared method's own parameters moved: the runs' ``method_activity``
(:mod:`filterformer.training.method_activity`) per method, and one sentence each for the report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...method_parameters import METHOD_LABELS
from .comparison_results import ComparisonResults

__all__ = ["activity_sentences", "activity_summary"]


def activity_summary(runs: Sequence[dict[str, Any]], methods: Sequence[str]) -> dict[str, Any]:
    """Per compared method, over its runs that did not diverge: ``runs_measured`` and
    ``runs_unmeasured`` (resumed from a checkpoint that did not record the start), and per
    method-parameter kind (``gfsa``, ``neutreno``, …) the largest ``max_abs_change`` of its
    parameters and, where the layers compute one, of the learned filter response
    (``response_max_abs_change``, else None)."""
    summary = {}
    for method in methods:
        finished = [run for run in runs if run["method"] == method and not run.get("diverged")]
        measured = [run["method_activity"] for run in finished
                    if run.get("method_activity") is not None]
        summary[method] = {
            "runs_measured": len(measured),
            "runs_unmeasured": len(finished) - len(measured),
            "parameters": {kind: _kind_summary([r[kind] for r in measured if kind in r])
                           for kind in METHOD_LABELS if any(kind in r for r in measured)},
        }
    return summary


def _kind_summary(records: list[dict[str, Any]]) -> dict[str, float | None]:
    """The largest changes over one kind's records (one per run)."""
    responses = [r["response"]["max_abs_change"] for r in records if "response" in r]
    return {"max_abs_change": max(r["max_abs_change"] for r in records),
            "response_max_abs_change": max(responses) if responses else None}


def _runs(count: int) -> str:
    return f"{count} run{'' if count == 1 else 's'}"


def activity_sentences(results: ComparisonResults) -> list[str]:
    """One sentence per compared method with parameters of its own, e.g. ``gfsa: GFSA
    coefficients (w0, w1, wK) moved at most 0.004 from their start (largest over 3 runs); the
    learned filter response at most 0.0061.``; one per method with unmeasured runs; one per
    method other than the baseline whose measured runs add no parameters (a fixed λ); and one
    per method none of whose runs finished without diverging."""
    sentences = []
    for method, entry in results.method_activity.items():
        # Silence would read as "nothing to report": say why a method has no measurement.
        if not entry["runs_measured"] and not entry["runs_unmeasured"]:
            sentences.append(f"{method}: no run finished without diverging, so how far its "
                             "parameters moved is not measured.")
        elif (entry["runs_measured"] and not entry["parameters"]
              and method != results.baseline):
            sentences.append(f"{method}: no parameters of its own that training moves "
                             f"({_runs(entry['runs_measured'])} measured).")
        over = f"largest over {_runs(entry['runs_measured'])}"
        for kind, moved in entry["parameters"].items():
            text = (f"{method}: {METHOD_LABELS[kind]} moved at most {moved['max_abs_change']:.2g} "
                    f"from their start ({over})")
            response = moved["response_max_abs_change"]
            if response is not None:
                text += f"; the learned filter response at most {response:.2g}"
            sentences.append(text + ".")
        if entry["runs_unmeasured"]:
            sentences.append(f"{method}: how far its parameters moved is unknown for "
                             f"{_runs(entry['runs_unmeasured'])}, resumed from checkpoints that "
                             "did not record their start.")
    return sentences
