"""The comparison's HTML report: one self-explaining page, figures by relative path."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..batches import budget_steps
from ..run_files import write_text
from .activity import activity_sentences
from .comparison_results import ComparisonResults
from .context_sentences import machine_sentence, oversmoothing_sentence, reference_sentence
from .cost import cost_note
from .figures import ReportFigure
from .statistics import MIN_SEEDS, compared_metrics

__all__ = ["budget_length", "divergence_summary", "render_report", "verdict_summary"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222;
       padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.35em 0.6em; text-align: right;
         vertical-align: top; }
td { white-space: nowrap; }
th { background: #f3f3f3; }
td:first-child, th:first-child { text-align: left; }
tr.best td { font-weight: 600; background: #eef7ee; }
tr.baseline td { background: #f7f7f7; font-style: italic; }
.summary { background: #f6f8fb; border-left: 4px solid #4a6fa5; padding: 0.6em 1em; }
.summary p { margin: 0.3em 0; }
.verdict { display: block; font-size: 0.85em; color: #555; white-space: normal; }
.table { overflow-x: auto; }
.ci { display: block; font-size: 0.85em; color: #444; }
.verdict.better { color: #17691f; font-weight: 600; }
.verdict.worse { color: #a11; font-weight: 600; }
.figures { display: grid; gap: 1.2em;
           grid-template-columns: repeat(auto-fill, minmax(min(520px, 100%), 1fr)); }
figure { margin: 0; border: 1px solid #e3e3e3; padding: 0.6em; }
figure img { width: 100%; height: auto; display: block; }
figcaption { font-size: 0.85em; color: #444; margin-top: 0.4em; }
ul.notes { font-size: 0.85em; color: #444; }
/* Ten columns need about 1200 pixels: in a narrower window each method's row becomes a card of
   labelled values, so the over-smoothing columns at the right are read, not scrolled to (wider
   tables than that, with long method names, scroll inside .table). */
@media (max-width: 1240px) {
  .table table, .table tbody, .table tr, .table td { display: block; width: auto; }
  .table thead { display: none; }
  .table tr { border: 1px solid #ddd; margin: 0 0 0.8em; }
  .table td { display: grid; grid-template-columns: minmax(8em, 45%) 1fr; gap: 0.8em;
              text-align: right; white-space: normal; }
  .table td::before { content: attr(data-label); text-align: left; font-weight: 600;
                      color: #444; }
  .table td:first-child { display: block; text-align: left; font-size: 1.1em;
                          background: #f3f3f3; }
  .table td:first-child::before { content: none; }
}
"""


def _number(value: float | None, digits: int = 4, scale: float = 1.0) -> str:
    return "–" if value is None else f"{value * scale:.{digits}f}"


def _mean_std(row: dict[str, Any], key: str, digits: int = 4) -> str:
    mean, std = row[f"{key}_mean"], row[f"{key}_std"]
    if mean is None:
        return "–"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


@dataclass(frozen=True)
class _Format:
    """How one compared metric reads: its name in sentences, digits, scale and unit."""

    label: str
    digits: int
    scale: float = 1.0
    unit: str = ""

    def signed(self, value: float) -> str:
        return f"{value * self.scale:+.{self.digits}f}{self.unit}"


def _formats(metric: str) -> dict[str, _Format]:
    """The :func:`compared_metrics` keys, in their order, with how each is written."""
    formats = {f"test_{metric}": _Format(f"test {metric}", 4),
               "last_layer_cosine_similarity": _Format("last-layer token cosine similarity", 3),
               "step_time_s": _Format("time per step", 2, 1000.0, " ms")}
    return {key: formats[key] for key in compared_metrics(metric)}


def _interval(difference: dict[str, Any], form: _Format) -> str:
    """``+0.0310, 95 % CI +0.0120 to +0.0500``; the mean alone without an interval."""
    text = form.signed(difference["mean"])
    if difference["ci_low"] is None:
        return text
    return (f"{text}, 95 % CI {form.signed(difference['ci_low'])} to "
            f"{form.signed(difference['ci_high'])}")


def _names(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def verdict_summary(results: ComparisonResults) -> list[str]:
    """The report's opening sentences: which methods differ significantly from the baseline,
    on what, and by how much (with the interval); said plainly when none does.

    Args:
        results: the comparison (its ``baseline``, ``metric``, ``summary`` rows with their
            ``difference``).
    """
    baseline, metric = results.baseline, results.metric
    others = [row for row in results.summary if row["method"] != baseline]
    if not others:
        return [f"Only {baseline} was compared: there is no other method to compare it with."]
    formats = _formats(metric)
    seeds = max(row["difference"][key]["seeds"] for row in others for key in formats)
    judged = {key: [row for row in others
                    if row["difference"][key]["verdict"] != "too few seeds"] for key in formats}
    if not any(judged.values()):
        shared = "1 seed is" if seeds == 1 else f"{seeds} seeds are"
        return [f"Each method is compared with {baseline} seed by seed, but at most {shared} "
                f"shared with it: too few to tell whether any method differs from {baseline} "
                f"(at least {MIN_SEEDS} are needed). No row is marked best."]
    sentences = []
    for key, form in formats.items():
        if not judged[key]:
            sentences.append(f"Too few seeds are shared with {baseline} to compare {form.label}.")
            continue
        parts = []
        for verdict in ("better", "worse"):
            rows = [row for row in judged[key] if row["difference"][key]["verdict"] == verdict]
            if rows:
                described = [f"{row['method']} ({_interval(row['difference'][key], form)})"
                             for row in rows]
                verb = "is" if len(rows) == 1 else "are"
                parts.append(f"{_names(described)} {verb} significantly {verdict} than "
                             f"{baseline}")
        if parts:
            rest = len(judged[key]) - sum(
                row["difference"][key]["verdict"] in ("better", "worse") for row in judged[key])
            tail = "; the other methods do not differ significantly" if rest else ""
            sentences.append(f"On {form.label}, " + "; ".join(parts) + tail + ".")
        else:
            sentences.append(f"No method differs significantly from {baseline} on {form.label}.")
        unjudged = [row["method"] for row in others
                    if row["difference"][key]["verdict"] == "too few seeds"]
        if unjudged:
            sentences[-1] = (sentences[-1][:-1] + f" ({_names(unjudged)}: too few seeds "
                             "shared).")
    sentences.append(f"Every method is compared with {baseline}, the baseline, seed by seed over "
                     f"up to {seeds} shared seeds: the mean difference with its 95 % confidence "
                     "interval (Student's t), significant when the interval excludes 0.")
    return sentences


def _verdict(verdict: str) -> str:
    return (f'<span class="verdict {verdict.replace(" ", "-")}">{html.escape(verdict)}</span>')


def _difference_cell(row: dict[str, Any], key: str, form: _Format) -> str:
    """The mean difference from the baseline [interval], its verdict underneath."""
    if row["difference"] is None:
        return "baseline"
    difference = row["difference"][key]
    if difference["mean"] is None:
        return "–"
    text = html.escape(form.signed(difference["mean"]))
    if difference["ci_low"] is not None:
        interval = f"[{form.signed(difference['ci_low'])}, {form.signed(difference['ci_high'])}]"
        text += f' <span class="ci">{html.escape(interval)}</span>'
    return text + _verdict(difference["verdict"])


def _time_cell(row: dict[str, Any], key: str) -> str:
    """The median time per step (ms), its ratio to the baseline's, and the verdict."""
    text = _number(row["step_time_s_median"], 1, 1000.0)
    if row["step_time_ratio"] is not None:
        text += f" ({row['step_time_ratio']:.2f}×)"
        if row["difference"] is not None:
            text += _verdict(row["difference"][key]["verdict"])
    return text


def _table(results: ComparisonResults) -> str:
    metric, baseline = results.metric, results.baseline
    formats = _formats(metric)
    main, cosine, time = formats
    header = [
        "method", f"test {metric} (mean ± std)", f"test {metric} − {baseline} [95 % CI]",
        f"validation {metric}", f"time / step (ms, median; × {baseline})", "peak memory (MiB)",
        "parameters", "last-layer token cosine (mean ± std)", f"cosine − {baseline} [95 % CI]",
        "runs",
    ]
    rows = []
    for row in results.summary:
        memory = row["peak_memory_bytes_median"]
        cells = [
            html.escape(row["method"]),
            _mean_std(row, f"test_{metric}"),
            _difference_cell(row, main, formats[main]),
            _mean_std(row, f"validation_{metric}"),
            _time_cell(row, time),
            _number(memory, 1, 1 / 2**20) if memory is not None else "–",
            f"{row['num_parameters']:,}",
            _mean_std(row, "last_layer_cosine_similarity", 3),
            _difference_cell(row, cosine, formats[cosine]),
            str(row["runs"]) + (f" ({row['diverged']} diverged)" if row.get("diverged") else ""),
        ]
        # Only a significant improvement over the baseline earns the mark.
        if row["difference"] is None:
            css = ' class="baseline"'
        elif row["difference"][main]["verdict"] == "better":
            css = ' class="best"'
        else:
            css = ""
        rows.append(f"<tr{css}>" + "".join(
            f'<td data-label="{html.escape(name)}"><div>{cell}</div></td>'
            for name, cell in zip(header, cells, strict=True)) + "</tr>")
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    return (f'<div class="table"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def _method_notes(results: ComparisonResults) -> list[str]:
    """One note per method whose runs differ from its preset alone (a name or overrides)."""
    notes = []
    for name, entry in results.method_entries.items():
        if entry["set"] or entry["method"] != name:
            changes = ", ".join(f"{k}={v}" for k, v in entry["set"].items())
            notes.append(f"{html.escape(name)}: method {html.escape(entry['method'])}"
                         + (f", with {html.escape(changes)} for its runs only" if changes
                            else "") + ".")
    return notes


def _figures(figures: Sequence[ReportFigure]) -> str:
    items = [
        f'<figure><h3>{html.escape(f.title)}</h3>'
        f'<img src="{html.escape(f.path)}" alt="{html.escape(f.title)}">'
        f"<figcaption>{html.escape(f.caption)}</figcaption></figure>"
        for f in figures
    ]
    return f'<div class="figures">{"".join(items)}</div>'


def divergence_summary(results: ComparisonResults) -> str | None:
    """The sentence naming every diverged run (step and reason), or None when none did."""
    diverged = [run for run in results.runs if run.get("diverged")]
    if not diverged:
        return None
    named = [f"{run['method']} seed {run['seed']} at step {run['diverged']['step']} "
             f"({run['diverged']['reason']})" for run in diverged]
    return (f"{len(diverged)} of {len(results.runs)} runs diverged and are left out of every "
            f"number, difference and figure: {_names(named)}.")


def _train_minutes(runs: Sequence[dict[str, Any]]) -> str:
    """The train time of the runs that did not diverge, in all, saying how many of them it
    does not count (a run resumed from a checkpoint that kept no train time)."""
    finished = [run for run in runs if not run.get("diverged")]
    times = [run["train_time_s"] for run in finished if run["train_time_s"] is not None]
    missing = len(finished) - len(times)
    text = f"{sum(times) / 60:.1f} minutes in all"
    return text + (f" (not counting {missing} run{'s' if missing != 1 else ''} without a train "
                   "time)" if missing else "")


def budget_length(budget: Mapping[str, Any]) -> str:
    """How long a ``results.json`` budget trains: ``"40 steps"`` where ``max_steps`` is set,
    else ``"1 epoch"``, ``"5 epochs"``."""
    steps, epochs = budget.get("max_steps"), budget.get("epochs")
    if steps is not None:
        return f"{steps} step{'' if steps == 1 else 's'}"
    return f"{epochs} epoch{'' if epochs == 1 else 's'}"


def render_report(
    results: ComparisonResults, figures: Sequence[ReportFigure], path: str | Path
) -> Path:
    """Write the report page for ``results`` to ``path``."""
    task, budget, env = results.task, results.budget, results.environment
    model = "model " + html.escape(
        ", ".join(f"{k}={v}" for k, v in budget["model"].items()) or "defaults")
    if results.pretrained:
        model = (f"pretrained model <b>{html.escape(results.pretrained)}</b> with the method "
                 "patched in, every parameter fine-tuned")
    length = budget_length(budget)
    finished = [run for run in results.runs if not run.get("diverged")]
    # A run that patience stopped took fewer steps than the budget.
    whole = [run for run in finished if not run.get("stopped_early")]
    steps = whole[0]["steps"] if whole else budget_steps(
        budget.get("max_steps"), budget["epochs"], task["num_train"], budget["batch_size"])
    early = ("" if budget.get("patience") is None else f"; fewer where {budget['patience']} "
             "validations in a row without improvement stopped a run")
    meta = (
        f"Task <b>{html.escape(task['name'])}</b> ({html.escape(task['kind'])}; "
        f"{task['num_train']:,} train / {task['num_validation']:,} validation / "
        f"{task['num_test']:,} test, up to {task['max_len']} tokens). "
        f"Every run: {model}; {length} ({steps} steps{early}) of batch "
        f"{budget['batch_size']}, AdamW lr {budget['optimizer']['lr']}, "
        f"{html.escape(budget['schedule']['decay'])} schedule. Seeds "
        f"{', '.join(map(str, results.seeds))}. "
        f"{html.escape(machine_sentence(results))} Torch {html.escape(env['torch'])}; the runs "
        f"trained for {_train_minutes(results.runs)}."
    )
    notes = [
        f"Test {results.metric}: of each run's best-validation checkpoint (the test split is "
        "never used to select anything); mean ± sample standard deviation over seeds.",
        f"Differences from {html.escape(results.baseline)}: per seed, method − baseline "
        "(runs with the same seed share their data order), over the seeds both ran; mean, "
        "95 % confidence interval from Student's t, and a verdict: better or worse when the "
        f"interval excludes 0 (a paired two-sided t-test, p &lt; 0.05; fewer than {MIN_SEEDS} "
        f"seeds: too few seeds). Higher test accuracy, lower perplexity and RMSE, lower token "
        "cosine similarity (less over-smoothing) and lower time per step are better. A row is "
        f"marked best only when it is significantly better than {html.escape(results.baseline)} "
        f"on test {results.metric}.",
        f"Time / step × {html.escape(results.baseline)}: the median over shared seeds of "
        "each seed's time per step over the baseline's.",
        f"{html.escape(cost_note(results.cost))} Median over seeds.",
        f"Peak memory: {html.escape(str(results.memory_measure))} during training, median "
        "over seeds.",
        "Token cosine similarity: mean cosine between distinct real tokens of the last layer's "
        "output on validation batches; closer to 1 means more over-smoothed.",
        *_method_notes(results),
    ]
    diverged = divergence_summary(results)
    context = [reference_sentence(results), oversmoothing_sentence(results)]
    sentences = (([diverged] if diverged else []) + [c for c in context if c]
                 + verdict_summary(results) + activity_sentences(results))
    answer = "".join(f"<p>{html.escape(sentence)}</p>" for sentence in sentences)
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>filterformer compare: {html.escape(task['name'])}</title>
<style>{_STYLE}</style>
</head>
<body>
<h1>filterformer compare: {html.escape(task['name'])}</h1>
<div class="summary" id="summary">{answer}</div>
<p class="meta">{meta}</p>
{_table(results)}
<ul class="notes">{''.join(f'<li>{n}</li>' for n in notes)}</ul>
<h2>Figures</h2>
{_figures(figures)}
</body>
</html>
"""
    path = Path(path)
    write_text(path, page)
    return path
