"""Reading a comparison's ``results.json`` (written by ``filterformer compare``).

A results directory of a pending claim that does not exist yet, or holds no ``results.json``, is
a comparison not run yet (None): the document is written while experiments are still missing.
For any other claim it is an error (a misspelt directory must not read as "not run yet"). Every
file read is checked first (:func:`~filterformer.evidence.results_checks.check_results`). What is
read is never recomputed when ``results.json`` has it: the summary's means and standard
deviations and each method's ``difference`` from the baseline are taken as written.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from ..training.compare.comparison_results import (
    RESULTS_FILE,
    ComparisonResults,
    check_schema_version,
    read_results_data,
)
from ..training.compare.statistics import compared_metrics, mean_std, paired_difference
from ..training.evaluation import MODEL_SELECTION
from .results_checks import check_results

__all__ = [
    "RESULTS_FILE",
    "compared_keys",
    "load_comparison",
    "method_difference",
    "metric_direction",
    "metric_mean_std",
    "near_names",
    "setting_difference",
]


def near_names(path: Path) -> str:
    """`` (did you mean …?)`` with the existing names beside ``path`` that are close to its
    name; empty when there are none."""
    try:
        siblings = [p.name for p in path.parent.iterdir()]
    except OSError:
        return ""
    near = difflib.get_close_matches(path.name, siblings, n=3)
    return f" (did you mean {' or '.join(near)}?)" if near else ""


def load_comparison(results_root: str | Path, name: str, *,
                    pending: bool = False) -> ComparisonResults | None:
    """The comparison in ``<results_root>/<name>/results.json``, checked.

    Args:
        results_root: the directory of the comparisons' results directories.
        name: the results directory, relative to ``results_root``.
        pending: whether the comparison may not have run yet (its claim is marked ``pending``):
            then a missing directory or ``results.json`` gives None.

    Raises:
        ValueError: naming the path: the directory or its ``results.json`` is missing (unless
            ``pending``), the file cannot be read, is not JSON, is of a schema version this
            library does not read
            (:func:`~filterformer.training.compare.comparison_results.check_schema_version`), or
            fails :func:`~filterformer.evidence.results_checks.check_results`.
    """
    directory = Path(results_root) / name
    path = directory / RESULTS_FILE
    if not path.exists():
        if pending:
            return None
        how = ("mark the claim `pending: true` while its comparisons have not run, so that they "
               "are reported as not run yet")
        if not directory.is_dir():
            raise ValueError(f"{directory} does not exist{near_names(directory)}: check the "
                             f"name, or {how}")
        raise ValueError(f"{path} does not exist: the comparison has not finished (run it to "
                         f"the end), or {how}")
    data = read_results_data(path)
    check_schema_version(data, path)  # before the checks of a layout the file may not have
    return ComparisonResults.from_dict(check_results(data, path), path)


def compared_keys() -> tuple[str, ...]:
    """Every run-record key compare compares for some task (``test_accuracy``,
    ``test_perplexity``, …, ``last_layer_cosine_similarity``, ``step_time_s``)."""
    keys = [key for metric, _ in MODEL_SELECTION.values() for key in compared_metrics(metric)]
    return tuple(dict.fromkeys(keys))


def metric_mean_std(results: ComparisonResults, method: str,
                    key: str) -> tuple[float | None, float | None]:
    """The mean ± std over seeds of run-record key ``key`` for ``method``: the summary's
    ``<key>_mean`` and ``<key>_std`` when it has them, else computed from the runs as compare
    computes them (:func:`~filterformer.training.compare.statistics.mean_std`)."""
    row = results.summary_row(method, RESULTS_FILE)
    if f"{key}_mean" in row and f"{key}_std" in row:
        return row[f"{key}_mean"], row[f"{key}_std"]
    return mean_std(list(results.seed_values(method, key).values()))


def metric_direction(key: str) -> bool | None:
    """Whether compare counts a higher value of run-record key ``key`` as better (its verdict
    ``better``), for any task's metric; None for a key compare does not compare."""
    for metric, _ in MODEL_SELECTION.values():
        directions = compared_metrics(metric)
        if key in directions:
            return directions[key]
    return None


def method_difference(results: ComparisonResults, method: str, metric: str,
                      where: str) -> dict[str, Any]:
    """The method's paired ``difference`` from the baseline on ``metric`` (``mean``,
    ``ci_low``, ``ci_high``, ``verdict``, ``seeds``), as ``results.json`` holds it.

    Raises:
        ValueError: naming ``where``, when the method is not compared, is the baseline, or has
            no difference on ``metric`` (with the metrics it has).
    """
    row = results.summary_row(method, where)
    if method == results.baseline:
        raise ValueError(f"{where}: method {method!r} is the baseline; a test row needs another "
                         f"method (compared: {', '.join(results.methods)})")
    differences = row["difference"]  # every other method's, as check_results ensures
    if metric not in differences:
        raise ValueError(f"{where}: metric {metric!r} is not compared in results.json; compared "
                         f"metrics: {', '.join(differences)}")
    return differences[metric]


def setting_difference(results: ComparisonResults, versus: ComparisonResults, method: str,
                       metric: str, where: str) -> dict[str, Any]:
    """``method`` in one comparison against itself in another, seed by seed: the paired
    difference ``results − versus`` on run-record key ``metric``, with its interval and
    verdict as compare computes them
    (:func:`~filterformer.training.compare.statistics.paired_difference`).

    Raises:
        ValueError: naming ``where``, when the method is not compared in both, or compare does
            not compare ``metric``.
    """
    higher = metric_direction(metric)
    if higher is None:
        raise ValueError(f"{where}: metric {metric!r} is not one compare compares: "
                         f"{', '.join(compared_keys())}")
    for compared in (results, versus):
        compared.summary_row(method, where)
    return paired_difference(results.seed_values(method, metric),
                             versus.seed_values(method, metric), higher).to_dict()
