"""Summaries over seeds, and each method's paired comparison with the baseline.

Two runs with the same seed share their data order and (for equal architectures) their
initialisation, so a method is compared with the baseline seed by seed: the per-seed differences
``method − baseline`` over the seeds both ran, their mean, and a 95 % confidence interval from
Student's t over those differences. The verdict follows each metric's direction
(:func:`compared_metrics`): ``better`` or ``worse`` when 0 lies strictly outside the interval
(a two-sided paired t-test with p < 0.05), ``no significant difference`` when it does not, and
``too few seeds`` with fewer than :data:`MIN_SEEDS` shared seeds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from scipy.stats import t as student_t

from ...diagnostics import DiagnosticsReport
from ..evaluation import MODEL_SELECTION

__all__ = [
    "CONFIDENCE",
    "MIN_SEEDS",
    "VERDICTS",
    "PairedDifference",
    "compared_metrics",
    "mean_report",
    "mean_std",
    "median",
    "paired_difference",
    "step_time_ratio",
    "summarize",
]

#: The confidence level of the intervals (a two-sided test at 1 − CONFIDENCE).
CONFIDENCE = 0.95
#: Fewer shared seeds than this give the verdict ``too few seeds``.
MIN_SEEDS = 3
#: Every verdict a paired difference can get.
VERDICTS = ("better", "worse", "no significant difference", "too few seeds")
#: An interval end within this fraction of the interval's scale of 0 touches 0: rounding must not
#: turn an interval that touches 0 (p = 0.05, not significant) into a significant one.
_TOUCH_TOLERANCE = 1e-9


def _finite(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def _is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


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


def compared_metrics(metric: str) -> dict[str, bool]:
    """The run-record keys every method is compared on, each with whether higher is better.

    Args:
        metric: the task's selection metric, with its direction from
            :data:`~filterformer.training.evaluation.MODEL_SELECTION` (``accuracy``: higher is
            better; ``perplexity``, ``rmse``: lower is better).

    Returns:
        ``{"test_<metric>": …, "last_layer_cosine_similarity": False, "step_time_s": False}``:
        a lower last-layer token cosine similarity is less over-smoothing, a lower time per step
        is cheaper.

    Raises:
        ValueError: for a metric that selects no task kind's checkpoints.
    """
    directions = dict(MODEL_SELECTION.values())
    if metric not in directions:
        raise ValueError(f"metric must be one of {tuple(directions)}; got {metric!r}")
    return {f"test_{metric}": directions[metric], "last_layer_cosine_similarity": False,
            "step_time_s": False}


@dataclass
class PairedDifference:
    """A method against the baseline on one metric, seed by seed.

    Attributes:
        mean: mean of the per-seed differences ``method − baseline`` (None without a shared
            seed).
        ci_low: lower end of the 95 % Student-t confidence interval of that mean (None with
            fewer than 2 shared seeds).
        ci_high: its upper end.
        verdict: one of :data:`VERDICTS`.
        seeds: how many seeds both have a finite value for.
    """

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str
    seeds: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _shared(values: Mapping[int, float | None],
            baseline: Mapping[int, float | None]) -> list[int]:
    """The seeds both mappings hold a finite value for, in the method's order."""
    return [s for s in values if s in baseline and _is_finite(values[s])
            and _is_finite(baseline[s])]


def paired_difference(
    values: Mapping[int, float | None],
    baseline: Mapping[int, float | None],
    higher_is_better: bool,
) -> PairedDifference:
    """The paired difference of a method from the baseline, with its interval and verdict.

    Args:
        values: the method's value per seed (None or NaN: missing).
        baseline: the baseline's value per seed.
        higher_is_better: the metric's direction.

    Returns:
        The mean of ``values[s] − baseline[s]`` over the shared seeds; its interval
        ``mean ± t(0.975, n − 1) · sd / √n`` (sd with ddof = 1) for n ≥ 2 shared seeds; the
        verdict ``too few seeds`` for n < :data:`MIN_SEEDS`, else ``better``/``worse`` when 0
        lies strictly outside the interval (an end that touches 0 is p = 0.05: not
        significant), else ``no significant difference``. Equal differences give an interval of
        zero width, significant unless they are all 0.
    """
    differences = [values[s] - baseline[s] for s in _shared(values, baseline)]
    n = len(differences)
    if n == 0:
        return PairedDifference(None, None, None, "too few seeds", 0)
    mean = statistics.fmean(differences)
    if n == 1:
        return PairedDifference(mean, None, None, "too few seeds", 1)
    half = float(student_t.ppf((1 + CONFIDENCE) / 2, n - 1)) * statistics.stdev(differences) \
        / math.sqrt(n)
    low, high = mean - half, mean + half
    if n < MIN_SEEDS:
        verdict = "too few seeds"
    else:
        tolerance = _TOUCH_TOLERANCE * max(abs(mean), half)
        if low > tolerance or high < -tolerance:
            verdict = "better" if (mean > 0) == higher_is_better else "worse"
        else:
            verdict = "no significant difference"
    return PairedDifference(mean, low, high, verdict, n)


def step_time_ratio(values: Mapping[int, float | None],
                    baseline: Mapping[int, float | None]) -> float | None:
    """The median over shared seeds of each seed's time per step over the baseline's (None
    without a seed where both were measured and the baseline's time is positive)."""
    return median([values[s] / baseline[s] for s in _shared(values, baseline) if baseline[s] > 0])


def _method_summary(method: str, runs: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    """One method's row: means ± std, medians, counts over its seeds (a diverged run's figures
    are None, so it counts only under ``diverged``)."""
    test_mean, test_std = mean_std([r[f"test_{metric}"] for r in runs])
    val_mean, val_std = mean_std([r[f"validation_{metric}"] for r in runs])
    cos_mean, cos_std = mean_std([r["last_layer_cosine_similarity"] for r in runs])
    return {
        "method": method,
        "runs": len(runs),
        "diverged": sum(1 for r in runs if r.get("diverged")),
        f"test_{metric}_mean": test_mean,
        f"test_{metric}_std": test_std,
        f"validation_{metric}_mean": val_mean,
        f"validation_{metric}_std": val_std,
        "step_time_s_median": median([r["step_time_s"] for r in runs]),
        "peak_memory_bytes_median": median([r["peak_memory_bytes"] for r in runs]),
        "num_parameters": runs[0]["num_parameters"],
        "last_layer_cosine_similarity_mean": cos_mean,
        "last_layer_cosine_similarity_std": cos_std,
        "train_time_s_mean": mean_std([r["train_time_s"] for r in runs])[0],
    }


def summarize(
    runs: Sequence[dict[str, Any]], methods: Sequence[str], metric: str, baseline: str
) -> list[dict[str, Any]]:
    """The per-method rows of ``results.json``, each compared with the baseline.

    Args:
        runs: run records with ``method``, ``seed`` and every key of :func:`compared_metrics`
            (plus the summarised ones: validation metric, peak memory, parameters, train time).
        methods: the method names, in table order; each must have at least one run.
        metric: the task's selection metric.
        baseline: the method the others are compared with.

    Returns:
        One row per method: ``runs`` and how many of them ``diverged`` (records with a
        ``diverged`` entry and None figures, left out of every statistic), means ± std over
        seeds, medians, ``step_time_ratio`` (median over shared seeds of time per step over the
        baseline's; 1.0 for the baseline itself, None without times) and ``difference``: for
        each key of :func:`compared_metrics`, the
        :class:`PairedDifference` as a dict. The baseline's own ``difference`` is None.
    """
    if baseline not in methods:
        raise ValueError(f"baseline {baseline!r} is not among the methods: {', '.join(methods)}")
    per_method = {m: [r for r in runs if r["method"] == m] for m in methods}
    empty = [m for m, mine in per_method.items() if not mine]
    if empty:
        raise ValueError(f"no runs of method(s) {', '.join(empty)}")

    def by_seed(method: str, key: str) -> dict[int, float | None]:
        return {r["seed"]: r[key] for r in per_method[method]}

    rows = []
    for method in methods:
        row = _method_summary(method, per_method[method], metric)
        row["step_time_ratio"] = step_time_ratio(by_seed(method, "step_time_s"),
                                                 by_seed(baseline, "step_time_s"))
        row["difference"] = None if method == baseline else {
            key: paired_difference(by_seed(method, key), by_seed(baseline, key), higher).to_dict()
            for key, higher in compared_metrics(metric).items()
        }
        rows.append(row)
    return rows


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
