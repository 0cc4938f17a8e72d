"""The comparison's figures, drawn with :mod:`filterformer.diagnostics.figures` where they exist.

Each figure is a PNG under ``figures/`` with a caption, so the HTML report can reference it by a
relative path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from ...diagnostics import DiagnosticsReport
from ...diagnostics.figures import (
    plot_frequency_comparison,
    plot_layer_metric,
    plot_learned_filters,
    save_figure,
)

__all__ = ["ReportFigure", "comparison_figures"]


@dataclass
class ReportFigure:
    """A figure written for the report.

    Attributes:
        name: the file stem.
        path: the PNG, relative to the comparison directory.
        title: a short heading.
        caption: what the figure shows.
    """

    name: str
    path: str
    title: str
    caption: str


def _cost_figure(summary: list[dict[str, Any]], metric: str) -> Figure:
    """Test metric (mean ± std over seeds) against the median time per training step."""
    figure = Figure(figsize=(5.0, 3.4), layout="constrained")
    ax = figure.add_subplot()
    for row in summary:
        x, y = row["step_time_s_median"], row[f"test_{metric}_mean"]
        if x is None or y is None:
            continue
        ax.errorbar(x * 1000, y, yerr=row[f"test_{metric}_std"] or 0.0, fmt="o", capsize=3,
                    label=row["method"])
    ax.set_xlabel("median time per training step (ms)")
    ax.set_ylabel(f"test {metric} (mean ± std)")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # none when every method's runs diverged
        ax.legend(fontsize="x-small")
    return figure


def _file_stem(method: str) -> str:
    """A method name as part of a file stem: "+" and "." (which would start a suffix) become
    "-"."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", method)


def comparison_figures(
    reports: Mapping[str, DiagnosticsReport],
    summary: list[dict[str, Any]],
    metric: str,
    directory: str | Path,
) -> list[ReportFigure]:
    """Write every figure of a comparison into ``directory/figures``.

    Args:
        reports: per method, the diagnostics averaged over its seeds.
        summary: the per-method rows of ``results.json``.
        metric: the task's selection metric (``accuracy``, ``perplexity``).
        directory: the comparison directory.

    Returns:
        The figures, in report order.
    """
    directory = Path(directory)
    per_method = list(reports.values())
    planned: list[tuple[str, Figure, str, str]] = [
        ("cost", _cost_figure(summary, metric), f"Test {metric} against cost",
         f"Mean ± std of the test {metric} over seeds against the median wall time of one "
         "training step."),
        ("cosine_similarity", plot_layer_metric(per_method, "token_cosine_similarity"),
         "Token cosine similarity per layer",
         "Mean cosine similarity between distinct tokens after each layer (0 = embeddings), on "
         "validation batches, averaged over seeds. Rising curves are over-smoothing."),
    ]
    if any(r.frequency_response is not None for r in per_method):
        baselines = [row["method"] for row in summary if row.get("difference") is None]
        reference = reports[baselines[0]].label if baselines and baselines[0] in reports else None
        subtracted = reference or next(
            r.label for r in per_method if r.frequency_response is not None)
        planned += [
            ("frequency_response", plot_frequency_comparison(per_method, reference=reference),
             "Attention filter frequency response (mean over layers)",
             "Normalised gain of each layer's attention operator on graph frequencies (its "
             "discrete Fourier transform over tokens), averaged over layers, heads and samples, "
             "on a log scale (left; a low-pass filter keeps only frequency 0), and each "
             f"method's gain minus {subtracted}'s (right), where the methods separate."),
            ("frequency_response_last",
             plot_frequency_comparison(per_method, layer=-1, reference=reference),
             "Attention filter frequency response (last layer)",
             "The same for the last attention layer alone."),
        ]
    for method, report in reports.items():
        for kind, curves, name in (("gfsa", report.gfsa_filters, "GFSA g(σ) − σ"),
                                   ("agf", report.agf_filters, "AGF G(σ)")):
            if curves:
                planned.append((
                    f"{kind}_filters_{_file_stem(method)}",
                    plot_learned_filters(curves, columns=2, relative_to_attention=kind == "gfsa"),
                    f"Learned filters of {method}",
                    f"{name} per layer, learned by {method} (mean over seeds; one line per "
                    "head where heads have their own)" + (
                        "; 0 is the attention the filter starts as." if kind == "gfsa" else ".")
                ))
    figures = []
    used: set[str] = set()
    for name, figure, title, caption in planned:
        # Distinct method names may share a stem ("a+b", "a.b"): each figure keeps its own file.
        stem, count = name, 1
        while name in used:
            name, count = f"{stem}-{count}", count + 1
        used.add(name)
        save_figure(figure, directory / "figures" / name, formats=("png",), dpi=110)
        figures.append(ReportFigure(name, f"figures/{name}.png", title, caption))
    return figures

