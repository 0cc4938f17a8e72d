"""The comparison's HTML report: one self-explaining page, figures by relative path."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .figures import ReportFigure

__all__ = ["render_report"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222;
       padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.95em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.35em 0.8em; text-align: right; }
td { white-space: nowrap; }
th { background: #f3f3f3; }
td:first-child, th:first-child { text-align: left; }
tr.best td { font-weight: 600; background: #eef7ee; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr));
           gap: 1.2em; }
figure { margin: 0; border: 1px solid #e3e3e3; padding: 0.6em; }
figure img { width: 100%; height: auto; display: block; }
figcaption { font-size: 0.85em; color: #444; margin-top: 0.4em; }
ul.notes { font-size: 0.85em; color: #444; }
"""


def _number(value: float | None, digits: int = 4, scale: float = 1.0) -> str:
    return "–" if value is None else f"{value * scale:.{digits}f}"


def _mean_std(row: dict[str, Any], key: str, digits: int = 4) -> str:
    mean, std = row[f"{key}_mean"], row[f"{key}_std"]
    if mean is None:
        return "–"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def _table(results: dict[str, Any]) -> str:
    metric = results["metric"]
    summary = results["summary"]
    higher = metric != "perplexity"
    scores = [r[f"test_{metric}_mean"] for r in summary if r[f"test_{metric}_mean"] is not None]
    best = (max if higher else min)(scores) if scores else None
    header = [
        "method", f"test {metric} (mean ± std)", f"validation {metric}",
        "time / step (ms, median)", "peak memory (MiB)", "parameters",
        "last-layer token cosine (mean ± std)", "runs",
    ]
    rows = []
    for row in summary:
        memory = row["peak_memory_bytes_median"]
        cells = [
            html.escape(row["method"]),
            _mean_std(row, f"test_{metric}"),
            _mean_std(row, f"validation_{metric}"),
            _number(row["step_time_s_median"], 1, 1000.0),
            _number(memory, 1, 1 / 2**20) if memory is not None else "–",
            f"{row['num_parameters']:,}",
            _mean_std(row, "last_layer_cosine_similarity", 3),
            str(row["runs"]),
        ]
        css = ' class="best"' if best is not None and row[f"test_{metric}_mean"] == best else ""
        rows.append(f"<tr{css}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _figures(figures: Sequence[ReportFigure]) -> str:
    items = [
        f'<figure><h3>{html.escape(f.title)}</h3>'
        f'<img src="{html.escape(f.path)}" alt="{html.escape(f.title)}">'
        f"<figcaption>{html.escape(f.caption)}</figcaption></figure>"
        for f in figures
    ]
    return f'<div class="figures">{"".join(items)}</div>'


def render_report(
    results: dict[str, Any], figures: Sequence[ReportFigure], path: str | Path
) -> Path:
    """Write the report page for ``results`` (the content of ``results.json``) to ``path``."""
    task, budget, env = results["task"], results["budget"], results["environment"]
    model = ", ".join(f"{k}={v}" for k, v in budget["model"].items()) or "defaults"
    length = (f"{budget['max_steps']} steps" if budget["max_steps"]
              else f"{budget['epochs']} epochs")
    steps = results["runs"][0]["steps"] if results["runs"] else 0
    meta = (
        f"Task <b>{html.escape(task['name'])}</b> ({html.escape(task['kind'])}; "
        f"{task['num_train']:,} train / {task['num_validation']:,} validation / "
        f"{task['num_test']:,} test, up to {task['max_len']} tokens). "
        f"Every run: model {html.escape(model)}; {length} ({steps} steps) of batch "
        f"{budget['batch_size']}, AdamW lr {budget['optimizer']['lr']}, "
        f"{html.escape(budget['schedule']['decay'])} schedule. Seeds "
        f"{', '.join(map(str, results['seeds']))}. "
        f"Ran on {html.escape(str(env['device']))} ({env['cpu_threads']} CPU "
        f"thread{'s' if env['cpu_threads'] != 1 else ''}), torch "
        f"{html.escape(env['torch'])}; the runs trained for "
        f"{sum(r['train_time_s'] for r in results['runs']) / 60:.1f} minutes in all."
    )
    notes = [
        f"Test {results['metric']}: of each run's best-validation checkpoint (the test split is "
        "never used to select anything); mean ± sample standard deviation over seeds.",
        "Time / step: median wall time of one optimiser step (forward, backward, clipping, "
        "update) over the run, median over seeds.",
        f"Peak memory: {html.escape(str(results['memory_measure']))} during training, median "
        "over seeds.",
        "Token cosine similarity: mean cosine between distinct real tokens of the last layer's "
        "output on validation batches; closer to 1 means more over-smoothed.",
    ]
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>filterformer compare: {html.escape(task['name'])}</title>
<style>{_STYLE}</style>
</head>
<body>
<h1>filterformer compare: {html.escape(task['name'])}</h1>
<p class="meta">{meta}</p>
{_table(results)}
<ul class="notes">{''.join(f'<li>{n}</li>' for n in notes)}</ul>
<h2>Figures</h2>
{_figures(figures)}
</body>
</html>
"""
    path = Path(path)
    path.write_text(page, encoding="utf-8")
    return path
