"""One claim's section of the document: the claim, our setup, the tuning, every method's
results per setting, how far the methods' own parameters moved, the judged test rows and the key
figure."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..training.compare.comparison_results import RESULTS_FILE, ComparisonResults
from ..training.compare.statistics import compared_metrics
from .activity_text import activity_lines
from .claims import Claim
from .comparisons import method_difference, metric_direction, metric_mean_std, near_names
from .figures import claim_figure_path, figure_caption
from .history import FIXED, POST_HOC
from .judged_rows import JudgedRow, paper_effect_place, verdict_text
from .markdown import relative_link, table
from .numbers import (
    format_difference,
    format_half_width,
    format_mean_std,
    format_p_value,
    format_ratio,
    metric_label,
)
from .setup_text import config_text, method_text, setup_lines
from .verdicts import NOT_RUN

__all__ = ["claim_heading", "claim_section", "difference_name"]


def claim_heading(claim: Claim) -> str:
    """The section heading (``C3: UEA JapaneseVowels``)."""
    return f"{claim.id}: {claim.title}"


def _location(results_root: Path, name: str, document_dir: Path) -> str:
    return f"`{relative_link(results_root / name, document_dir)}`"


def _methods_table(results: ComparisonResults) -> list[str]:
    """Every method's test and validation metric, last-layer cosine and time ratio."""
    metric, baseline = results.metric, results.baseline
    test, validation = f"test_{metric}", f"validation_{metric}"
    cosine = "last_layer_cosine_similarity"
    rows = []
    for method in results.methods:
        row = results.summary_row(method, RESULTS_FILE)
        name = method_text(results, method) + (" — baseline" if method == baseline else "")
        rows.append([name, *(format_mean_std(k, *metric_mean_std(results, method, k))
                             for k in (test, validation, cosine)),
                     format_ratio(row.get("step_time_ratio"))])
    header = ["method", f"{metric_label(test)} (mean ± std)",
              f"{metric_label(validation)} (mean ± std)", "last-layer token cosine (mean ± std)",
              f"time per step / {baseline}'s"]
    return table(header, rows)


def _tuning_lines(name: str, tuning: ComparisonResults | None, results_root: Path,
                  document_dir: Path, several: bool) -> list[str]:
    """The baseline's hyperparameter selection in results directory ``name``: every entry's
    validation metric, the best marked (``several``: the claim has more than one)."""
    where = _location(results_root, name, document_dir)
    lines = ["### Hyperparameters chosen on validation" + (f": {name}" if several else ""), ""]
    if tuning is None:
        return [*lines, f"Not run yet ({where}).", ""]
    metric = tuning.metric
    validation = f"validation_{metric}"
    higher = compared_metrics(metric)[f"test_{metric}"]
    means = {m: metric_mean_std(tuning, m, validation) for m in tuning.methods}
    ranked = [m for m in tuning.methods if means[m][0] is not None]
    chosen = (max if higher else min)(ranked, key=lambda m: means[m][0]) if ranked else None
    shared_lr = (tuning.budget.get("optimizer") or {}).get("lr")
    rows = []
    for method in tuning.methods:
        entry = tuning.method_entries.get(method) or {}
        overrides = dict(entry.get("set") or {})
        lr = overrides.pop("optimizer.lr", shared_lr)
        others = ", ".join(f"{k}={config_text(v)}" for k, v in overrides.items()) or "–"
        rows.append([method, entry.get("method", method), config_text(lr), others,
                     format_mean_std(validation, *means[method]),
                     "**chosen**" if method == chosen else ""])
    best = "highest" if higher else "lowest"
    return [
        *lines,
        f"From {where}, seeds {', '.join(map(str, tuning.run_seeds()))}: the entry with the "
        f"{best} mean {metric_label(validation)} is chosen (a tie goes to the entry listed "
        "first; the test split chooses nothing).",
        "",
        *table(["entry", "method", "learning rate", "other settings",
                f"{metric_label(validation)} (mean ± std)", "chosen"], rows),
        "",
    ]


def _expectation(expect: str, metric: str, margin: float | None) -> str:
    """What the paper claims, with the direction it means on the metric (``better (lower)``)
    and the margin of a claim of no loss or no difference."""
    higher = metric_direction(metric)
    bound = format_half_width(metric, margin)
    if expect == "same":
        return f"same (within {bound})" if margin is not None else "same (no margin stated)"
    if higher is None:
        return expect
    better_is, worse_is = ("higher", "lower") if higher else ("lower", "higher")
    if expect == "not worse":
        if margin is None:
            return "not worse (no margin stated)"
        return f"not worse ({better_is}, or {worse_is} by less than {bound[1:]})"
    return f"{expect} ({better_is if expect == 'better' else worse_is})"


def _paper_effect_text(row: JudgedRow) -> str:
    place = paper_effect_place(row)
    if place is None:
        return "–"
    return f"{format_difference(row.test.metric, row.test.paper_effect)}: {place}"


def _fixed_text(row: JudgedRow) -> str:
    if row.difference is None:
        return "–"
    return {FIXED: "yes", POST_HOC: "*post hoc*"}.get(row.fixed, row.fixed)


def difference_name(row: JudgedRow) -> str:
    """``(gfsa − softmax)``: the row's method less its comparison's baseline (``baseline``
    while neither of the row's comparisons has run)."""
    compared = row.results or row.versus
    baseline = compared.baseline if compared is not None else "baseline"
    return f"({row.test.method} − {baseline})"


def _method_text(row: JudgedRow, labels: Mapping[str, str]) -> str:
    """The row's method cell: the method, what it is set against in a ``versus`` row, and for
    an interaction ``(gfsa − softmax) at depth 16 − at depth 4``."""
    test = row.test
    if test.interaction:
        return f"{difference_name(row)} at {row.setting.label} − at {labels[test.versus]}"
    if test.versus:
        return f"{test.method} ({row.setting.label} against {labels[test.versus]})"
    return test.method


def _ours_text(row: JudgedRow) -> str:
    """What was measured on each side of the row's difference, the other side first: the
    baseline's and the method's means ± std; the method's in the ``versus`` setting and in the
    row's; for an interaction, ``method − baseline`` in ``versus`` and in the row's setting, as
    ``results.json`` holds them."""
    test, results = row.test, row.results
    if test.interaction:
        return " → ".join(
            format_difference(test.metric,
                              method_difference(compared, test.method, test.metric,
                                                RESULTS_FILE)["mean"])
            for compared in (row.versus, results))
    pairs = ([(row.versus, test.method), (results, test.method)] if test.versus
             else [(results, results.baseline), (results, test.method)])
    return " → ".join(format_mean_std(test.metric, *metric_mean_std(compared, m, test.metric))
                      for compared, m in pairs)


def _rows_table(claim: Claim, rows: list[JudgedRow]) -> list[str]:
    several = len(claim.settings) > 1
    labels = {s.results: s.label for s in claim.settings}
    body = []
    for row in rows:
        test, difference = row.test, row.difference
        if row.difference is None:
            ours, diff, seeds, p = "–", "–", "–", "–"
        else:
            ours = _ours_text(row)
            diff = format_difference(test.metric, difference["mean"], difference["ci_low"],
                                     difference["ci_high"])
            seeds = str(difference["seeds"])
            p = (f"{format_p_value(row.p_value)} ({format_p_value(row.adjusted_p)})"
                 if row.p_value is not None else "–")
        method = _method_text(row, labels)
        needed = "–" if row.seeds_for_paper is None else str(row.seeds_for_paper)
        body.append([method, metric_label(test.metric), *([row.setting.label] * several),
                     _expectation(test.expect, test.metric, test.margin), test.paper, ours,
                     diff, seeds, p, verdict_text(row),
                     "–" if row.difference is None else verdict_text(row, adjusted=True),
                     format_half_width(test.metric, row.detectable), _paper_effect_text(row),
                     needed, _fixed_text(row)])
    header = ["method", "metric", *(["setting"] * several), "paper claims", "paper",
              "ours: baseline (or the other setting) → method (mean ± std)",
              "difference [95 % CI]", "seeds", "p (Holm)", "verdict", "verdict after Holm",
              "detectable with 80 % power", "paper's effect", "seeds for the paper's effect",
              "fixed before its results"]
    return table(header, body)


def _figure_lines(claim: Claim, comparisons: Mapping[str, ComparisonResults | None],
                  results_root: Path, document_dir: Path) -> list[str]:
    """The key figure's link and caption, or where it will be while its results are missing
    (a ``file`` figure missing beside results that have run is an error unless the claim is
    pending)."""
    path = claim_figure_path(claim, results_root)
    if path is None:
        return []
    link = relative_link(path, document_dir)
    settings = [(s, comparisons[s.results]) for s in claim.settings]
    if claim.figure.kind == "file":  # compare's own figure, in the first setting's directory
        available = settings[0][1] is not None and path.is_file()
    else:  # drawn from the settings that have run
        available = any(results is not None for _, results in settings)
    if not available and claim.figure.kind == "file" and settings[0][1] is not None \
            and not claim.pending:
        raise ValueError(f"claim {claim.id}: its figure {path} does not exist"
                         f"{near_names(path)}: check figure.file, or mark the claim `pending: "
                         "true` while the figure is missing")
    if not available:
        return ["### Key figure", "", f"Not available yet (`{link}`).", ""]
    caption = figure_caption(claim, settings)
    return ["### Key figure", "", f"![{claim.id}: {claim.title}]({link})", "",
            *([caption, ""] if caption else [])]


def claim_section(
    claim: Claim,
    comparisons: Mapping[str, ComparisonResults | None],
    tunings: Mapping[str, ComparisonResults | None],
    rows: list[JudgedRow],
    results_root: Path,
    document_dir: Path,
) -> list[str]:
    """The lines of a claim's section.

    Args:
        claim: the claim.
        comparisons: per setting's ``results`` name, its ``results.json`` (None: not run yet).
        tunings: per ``claim.tuning`` directory, its ``results.json`` (None: not run yet).
        rows: the claim's judged test rows (:func:`~filterformer.evidence.judged_rows.
            judge_claim`).
        results_root: the directory the settings' ``results`` are relative to.
        document_dir: the directory of the Markdown file (links are relative to it).
    """
    lines = [f"## {claim_heading(claim)}", "", f"**The claim** ({claim.papers}). {claim.claim}",
             ""]
    if claim.setup:
        lines += [f"**Our setup.** {claim.setup}", ""]
    for name in claim.tuning:
        lines += _tuning_lines(name, tunings[name], results_root, document_dir,
                               len(claim.tuning) > 1)
    for setting in claim.settings:
        results = comparisons[setting.results]
        where = _location(results_root, setting.results, document_dir)
        lines += [f"### Setting: {setting.label}", ""]
        if results is None:
            lines += [f"Not run yet ({where}).", ""]
            continue
        lines += [f"Results: {where}.", "", *(f"- {item}" for item in setup_lines(results)), "",
                  *_methods_table(results), ""]
    lines += activity_lines(claim, comparisons)
    lines += ["### Test rows", "", *_rows_table(claim, rows), ""]
    lines += _figure_lines(claim, comparisons, results_root, document_dir)
    if all(row.verdict == NOT_RUN for row in rows):
        lines += ["No comparison of this claim has run yet.", ""]
    return lines
