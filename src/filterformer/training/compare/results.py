"""Writing a comparison's results: ``results.json``, ``results.csv``, figures, ``report.html``."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from ...diagnostics import DiagnosticsReport
from ...jsonsafe import finite_json
from ..run_files import write_json, write_text
from .figures import comparison_figures
from .html_report import render_report
from .statistics import PairedDifference, compared_metrics

__all__ = ["table_row", "write_results"]

#: The parts of each paired difference, in ``results.csv`` column order.
DIFFERENCE_FIELDS = tuple(f.name for f in fields(PairedDifference))


def table_row(row: dict[str, Any], metric: str) -> dict[str, Any]:
    """A summary row of ``results.json`` as flat ``results.csv`` columns: its nested
    ``difference`` becomes ``<key>_difference_{mean,ci_low,ci_high,verdict,seeds}`` for every
    compared metric (empty for the baseline's row)."""
    flat = {k: v for k, v in row.items() if k != "difference"}
    differences = row.get("difference") or {}
    for key in compared_metrics(metric):
        difference = differences.get(key) or {}
        flat.update({f"{key}_difference_{part}": difference.get(part)
                     for part in DIFFERENCE_FIELDS})
    return flat


def write_results(
    results: dict[str, Any], reports: Mapping[str, DiagnosticsReport], directory: str | Path
) -> dict[str, Any]:
    """Write the figures, ``results.json``, ``results.csv`` and ``report.html``.

    Args:
        results: the comparison (task, budget, baseline, per-method ``summary`` with each
            row's ``difference`` from the baseline, per-run ``runs``, …).
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
    write_json(directory / "results.json", results)
    rows = [table_row(row, results["metric"]) for row in results["summary"]]
    table = io.StringIO()
    writer = csv.DictWriter(table, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    write_text(directory / "results.csv", table.getvalue())
    render_report(results, figures, directory / "report.html")
    return results
