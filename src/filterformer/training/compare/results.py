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
from .comparison_results import RESULTS_FILE, ComparisonResults
from .figures import comparison_figures
from .html_report import render_report
from .statistics import PairedDifference, compared_metrics

__all__ = ["table_row", "write_results"]

#: The parts of each paired difference, in ``results.csv`` column order.
DIFFERENCE_FIELDS = tuple(f.name for f in fields(PairedDifference))


def table_row(row: dict[str, Any], metric: str) -> dict[str, Any]:
    """A summary row of ``results.json`` (:attr:`ComparisonResults.summary`) as flat
    ``results.csv`` columns: its nested ``difference`` becomes
    ``<key>_difference_{mean,ci_low,ci_high,verdict,seeds}`` for every compared metric (empty
    for the baseline's row)."""
    flat = {k: v for k, v in row.items() if k != "difference"}
    differences = row.get("difference") or {}
    for key in compared_metrics(metric):
        difference = differences.get(key) or {}
        flat.update({f"{key}_difference_{part}": difference.get(part)
                     for part in DIFFERENCE_FIELDS})
    return flat


def write_results(
    results: ComparisonResults, reports: Mapping[str, DiagnosticsReport], directory: str | Path
) -> ComparisonResults:
    """Write the figures, ``results.json``, ``results.csv`` and ``report.html``.

    Args:
        results: the comparison, without its figures and diagnostics.
        reports: per method, the diagnostics averaged over seeds.
        directory: the comparison directory.

    Returns:
        ``results`` as written: with the figures drawn, the diagnostics, and every non-finite
        number made None.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    figures = comparison_figures(reports, list(results.summary), results.metric, directory)
    written = ComparisonResults.from_dict(finite_json({
        **results.to_dict(), "figures": [asdict(f) for f in figures],
        "diagnostics": {m: r.to_dict() for m, r in reports.items()}}))
    write_json(directory / RESULTS_FILE, written.to_dict())
    rows = [table_row(row, written.metric) for row in written.summary]
    table = io.StringIO()
    writer = csv.DictWriter(table, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    write_text(directory / "results.csv", table.getvalue())
    render_report(written, figures, directory / "report.html")
    return written
