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
    "baseline_differences",
    "compared_keys",
    "interaction_difference",
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
    higher = _direction(metric, where)
    for compared in (results, versus):
        compared.summary_row(method, where)
    return paired_difference(results.seed_values(method, metric),
                             versus.seed_values(method, metric), higher).to_dict()


def _direction(metric: str, where: str) -> bool:
    higher = metric_direction(metric)
    if higher is None:
        raise ValueError(f"{where}: metric {metric!r} is not one compare compares: "
                         f"{', '.join(compared_keys())}")
    return higher


def baseline_differences(results: ComparisonResults, method: str, metric: str,
                         where: str) -> dict[int, float | None]:
    """Per seed of the comparison, ``method − baseline`` on run-record key ``metric``; None
    (or NaN) where either run is missing or has no value (a diverged run), which compare's
    paired difference leaves out.

    Raises:
        ValueError: naming ``where``, as :func:`method_difference` does.
    """
    method_difference(results, method, metric, where)  # its checks, with their messages
    values = results.seed_values(method, metric)
    baseline = results.seed_values(results.baseline, metric)
    # A NaN stays NaN here, and paired_difference leaves it out as it does None.
    return {seed: None if values.get(seed) is None or baseline.get(seed) is None
            else values[seed] - baseline[seed] for seed in results.run_seeds()}


def interaction_difference(results: ComparisonResults, versus: ComparisonResults, method: str,
                           metric: str, where: str, files: tuple[str | Path, str | Path]
                           ) -> dict[str, Any]:
    """How much more ``method`` gains on the baseline in one comparison than in another, seed
    by seed: per seed s, ``d_s = (method − baseline)_s in results − (method − baseline)_s in
    versus``, tested against 0 as compare tests every difference
    (:func:`~filterformer.training.compare.statistics.paired_difference`; its verdict
    ``better`` when the method gains more in ``results``, in the metric's direction). A seed
    missing or diverged in either comparison is left out, as in :func:`setting_difference`.

    Args:
        results, versus: the two comparisons (the row's setting and its ``versus``).
        method, metric: the row's method and run-record key.
        where: the row, named in errors.
        files: the ``results.json`` paths of ``results`` and ``versus``, named in errors.

    Raises:
        ValueError: naming ``where``: the method is not compared in both, is the baseline, or
            has no difference on ``metric`` there; naming both files, when the two comparisons
            have different baselines or different seeds (their differences would not pair).
    """
    higher = _direction(metric, where)
    if results.baseline != versus.baseline:
        raise ValueError(f"{where}: an interaction needs one baseline in both settings; "
                         f"{files[0]} has {results.baseline!r}, {files[1]} has "
                         f"{versus.baseline!r}")
    seeds, versus_seeds = sorted(results.run_seeds()), sorted(versus.run_seeds())
    if seeds != versus_seeds:
        raise ValueError(f"{where}: an interaction pairs each seed across the two settings, so "
                         f"they must have the same seeds; {files[0]} has seeds {seeds}, "
                         f"{files[1]} has seeds {versus_seeds}")
    return paired_difference(baseline_differences(results, method, metric, where),
                             baseline_differences(versus, method, metric, where),
                             higher).to_dict()
