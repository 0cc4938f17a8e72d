"""How numbers are written in the document, one rule per kind of metric.

Accuracies are percentages with 2 decimals (``98.65 %``) and their differences percentage points
(``+0.80 pp``); times per step are milliseconds; every other metric (perplexity, cosine
similarity, RMSE, R²) has 4 significant digits. Numbers written together (a mean and its
standard deviation; a difference and its interval) share the decimals of the largest, so they
line up: ``0.2624 ± 0.0463``, ``-0.0815 [-0.2249, +0.0620]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "format_difference",
    "format_half_width",
    "format_interval",
    "format_mean_std",
    "format_p_value",
    "format_ratio",
    "format_value",
    "format_wall_time",
    "metric_label",
    "metric_scale",
]

#: Run-record keys with a name of their own in the document.
_LABELS = {
    "last_layer_cosine_similarity": "last-layer cosine similarity",
    "step_time_s": "time per step",
    "test_rmse": "test RMSE",
    "validation_rmse": "validation RMSE",
    "test_r2": "test R²",
    "validation_r2": "validation R²",
}
#: Significant digits of metrics other than accuracies.
_SIGNIFICANT_DIGITS = 4


def metric_label(key: str) -> str:
    """A metric's key in words: ``test_accuracy`` → ``test accuracy``."""
    return _LABELS.get(key, key.replace("_", " "))


def metric_scale(key: str) -> tuple[float, str]:
    """The factor a metric's values are multiplied by when written, and their unit (``%`` for
    accuracies, ``ms`` for times in seconds, none otherwise)."""
    if "accuracy" in key:
        return 100.0, "%"
    if key.endswith("time_s"):
        return 1000.0, "ms"
    return 1.0, ""


def _numbers(key: str, values: Sequence[float], signs: Sequence[bool]) -> list[str]:
    """``values`` of metric ``key``, scaled, with the decimals of the largest: 2 for
    accuracies, else enough for 4 significant digits of the largest."""
    scale, _ = metric_scale(key)
    scaled = [v * scale for v in values]
    if scale == 100.0:
        decimals = 2
    else:
        largest = max((abs(v) for v in scaled if v != 0 and math.isfinite(v)), default=0.0)
        decimals = 0 if largest == 0 else \
            max(0, _SIGNIFICANT_DIGITS - 1 - math.floor(math.log10(largest)))
    # Rounded first so that a tiny negative value is written 0, not -0.
    rounded = [round(v, decimals) + 0.0 for v in scaled]
    return [f"{v:{'+' if sign else ''}.{decimals}f}" for v, sign in zip(rounded, signs,
                                                                         strict=True)]


def _unit(key: str, difference: bool = False) -> str:
    _, unit = metric_scale(key)
    if difference and unit == "%":
        unit = "pp"
    return f" {unit}" if unit else ""


def format_value(key: str, value: float | None) -> str:
    """One value of metric ``key`` with its unit (``–`` when missing)."""
    if value is None:
        return "–"
    return _numbers(key, [value], [False])[0] + _unit(key)


def format_mean_std(key: str, mean: float | None, std: float | None) -> str:
    """``mean ± std`` of metric ``key`` (``98.65 ± 0.32 %``; ``–`` when missing)."""
    if mean is None:
        return "–"
    if std is None:
        return format_value(key, mean)
    mean_text, std_text = _numbers(key, [mean, std], [False, False])
    return f"{mean_text} ± {std_text}{_unit(key)}"


def format_difference(key: str, value: float | None, low: float | None = None,
                      high: float | None = None) -> str:
    """A signed difference of metric ``key``, with its interval when given (``+0.80
    [-0.59, +2.19] pp``, ``-0.0123``; ``–`` when missing)."""
    if value is None:
        return "–"
    if low is None or high is None:
        return _numbers(key, [value], [True])[0] + _unit(key, difference=True)
    mean_text, low_text, high_text = _numbers(key, [value, low, high], [True] * 3)
    return f"{mean_text} [{low_text}, {high_text}]{_unit(key, difference=True)}"


def format_interval(key: str, low: float | None, high: float | None) -> str:
    """An interval of differences of metric ``key`` (``[-0.59, +1.39] pp``; ``no interval``
    when missing)."""
    if low is None or high is None:
        return "no interval"
    low_text, high_text = _numbers(key, [low, high], [True, True])
    return f"[{low_text}, {high_text}]{_unit(key, difference=True)}"


def format_half_width(key: str, value: float | None) -> str:
    """An interval's half-width ``±h`` of metric ``key`` (``±0.84 pp``; ``–`` when missing)."""
    if value is None:
        return "–"
    return "±" + _numbers(key, [value], [False])[0] + _unit(key, difference=True)


def format_p_value(value: float | None) -> str:
    """A p-value with 2 significant digits (``0.012``, ``0.37``, ``< 0.001``; ``–`` when
    missing)."""
    if value is None:
        return "–"
    if value < 0.001:
        return "< 0.001"
    return f"{value:.2g}" if value < 0.995 else "1"


def format_ratio(value: float | None) -> str:
    """A ratio to the baseline (``1.42×``; ``–`` when missing)."""
    return "–" if value is None else f"{value:.2f}×"


def format_wall_time(seconds: float | None) -> str:
    """A wall time: seconds under a minute, else minutes with one decimal (``unknown`` when
    missing)."""
    if seconds is None:
        return "unknown"
    return f"{seconds:.0f} s" if seconds < 60 else f"{seconds / 60:.1f} min"
