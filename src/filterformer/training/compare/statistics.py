"""Summaries over seeds: mean ± std of numbers, element-wise means of diagnostics curves."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from ...diagnostics import DiagnosticsReport

__all__ = ["mean_report", "mean_std", "median"]


def _finite(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (ddof = 1; 0 for one value) of the finite values;
    (None, None) when there are none."""
    finite = _finite(values)
    if not finite:
        return None, None
    std = statistics.stdev(finite) if len(finite) > 1 else 0.0
    return statistics.fmean(finite), std


def median(values: Sequence[float | None]) -> float | None:
    """The median of the finite values (None when there are none)."""
    finite = _finite(values)
    return statistics.median(finite) if finite else None


def _mean_tree(items: list[Any]) -> Any:
    """The element-wise mean of equally shaped nested lists/dicts of numbers; other leaves
    (names, labels) are taken from the first item; missing values (None, NaN) are skipped."""
    first = items[0]
    if isinstance(first, dict):
        return {key: _mean_tree([item[key] for item in items]) for key in first}
    if isinstance(first, list):
        if len({len(item) for item in items}) != 1:
            return first  # shapes differ (e.g. frequency grids of different lengths)
        return [_mean_tree(list(column)) for column in zip(*items, strict=True)]
    if isinstance(first, bool) or not isinstance(first, (int, float, type(None))):
        return first
    mean, _ = mean_std(items)
    return mean


def mean_report(reports: Sequence[DiagnosticsReport], label: str) -> DiagnosticsReport:
    """One :class:`DiagnosticsReport` averaging every per-layer curve of ``reports`` (e.g. one
    per seed of one method), labelled ``label``."""
    if not reports:
        raise ValueError("reports must hold at least one DiagnosticsReport")
    merged = _mean_tree([r.to_dict() for r in reports])
    merged.update(label=label, num_samples=sum(r.num_samples for r in reports),
                  num_layers=reports[0].num_layers, model_kind=reports[0].model_kind)
    return DiagnosticsReport.from_dict(merged)
