"""Writing a comparison's results: ``results.json``, ``results.csv``, figures, ``report.html``."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ...diagnostics import DiagnosticsReport
from ...jsonsafe import finite_json
from .figures import comparison_figures
from .html_report import render_report

__all__ = ["write_results"]


def write_results(
    results: dict[str, Any], reports: Mapping[str, DiagnosticsReport], directory: str | Path
) -> dict[str, Any]:
    """Write the figures, ``results.json``, ``results.csv`` and ``report.html``.

    Args:
        results: the comparison (task, budget, per-method ``summary``, per-run ``runs``, …).
        reports: per method, the diagnostics averaged over seeds.
        directory: the comparison directory.

    Returns:
        ``results`` with the written figures listed under ``figures``.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    figures = comparison_figures(reports, results["summary"], results["metric"], directory)
    results = finite_json({**results, "figures": [asdict(f) for f in figures],
                       "diagnostics": {m: r.to_dict() for m, r in reports.items()}})
    (directory / "results.json").write_text(json.dumps(results, indent=1))
    with open(directory / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(results["summary"][0]))
        writer.writeheader()
        writer.writerows(results["summary"])
    render_report(results, figures, directory / "report.html")
    return results
