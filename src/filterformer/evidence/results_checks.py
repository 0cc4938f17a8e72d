"""Checking a comparison's ``results.json`` before the document reads a number from it.

The document prints what ``results.json`` holds, so a file changed by hand or damaged must not
become a wrong number in it. :func:`check_results` checks the kind of every field the document
reads, that every number anywhere in the file is finite (compare writes null for a missing
value, never NaN or infinity), that every method but the baseline has its ``difference``
from the baseline on each compared metric, and the kinds in ``method_activity``. Each error
names the file and the field, as a path into the file
(``summary[1].difference.test_accuracy.ci_low``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..jsonsafe import first_non_finite
from ..method_parameters import METHOD_LABELS
from ..training.compare.comparison_results import REQUIRED_KEYS
from ..training.compare.statistics import VERDICTS, compared_metrics
from ..training.evaluation import MODEL_SELECTION

__all__ = ["REQUIRED_KEYS", "check_results"]

#: Optional mappings of ``results.json`` whose keys the document reads.
_MAPPINGS = ("task", "budget", "provenance", "method_entries")
_BUDGET_MAPPINGS = ("model", "optimizer", "schedule", "task_options")
_INTERVAL = ("mean", "ci_low", "ci_high")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _optional(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or test(value)


class _Checker:
    """The checks of one file, each failing with ``<file>: '<field>' ...``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def expect(self, field: str, value: Any, test: Callable[[Any], bool], what: str) -> Any:
        if not test(value):
            raise ValueError(f"{self.path}: '{field}' must be {what}; got {value!r}")
        return value

    def require(self, mapping: dict[str, Any], key: str, where: str) -> Any:
        if key not in mapping:
            raise ValueError(f"{self.path}: '{where}' lacks '{key}' (it has: "
                             f"{', '.join(map(str, mapping)) or 'nothing'}); not as "
                             "filterformer compare writes it: rerun the comparison")
        return mapping[key]

    def mapping(self, field: str, value: Any, *, optional: bool = False) -> dict[str, Any]:
        def is_mapping(v: Any) -> bool:
            return isinstance(v, dict)

        self.expect(field, value, _optional(is_mapping) if optional else is_mapping,
                    "a mapping" + (" or null" if optional else ""))
        return value or {}

    def items(self, field: str, value: Any) -> list[Any]:
        return self.expect(field, value, lambda v: isinstance(v, list), "a list")

    def numbers(self, mapping: dict[str, Any], keys: tuple[str, ...], where: str, *,
                required: bool) -> None:
        for key in keys:
            if required:
                self.require(mapping, key, where)
            if key in mapping:
                self.expect(f"{where}.{key}", mapping[key], _optional(_is_number),
                            "a number or null")


def _check_header(check: _Checker, results: dict[str, Any]) -> None:
    metrics = tuple(dict(MODEL_SELECTION.values()))
    check.expect("metric", results["metric"], lambda v: v in metrics,
                 f"one of {', '.join(metrics)}")
    methods = check.expect("methods", results["methods"],
                           lambda v: isinstance(v, list) and bool(v), "a non-empty list")
    for i, method in enumerate(methods):
        check.expect(f"methods[{i}]", method, _is_text, "a method name (a non-empty string)")
    repeated = sorted({m for m in methods if methods.count(m) > 1})
    if repeated:
        raise ValueError(f"{check.path}: 'methods' repeats {', '.join(repeated)}")
    check.expect("baseline", results["baseline"], lambda v: v in methods,
                 f"one of the methods ({', '.join(methods)})")
    if "seeds" in results:
        for i, seed in enumerate(check.items("seeds", results["seeds"])):
            check.expect(f"seeds[{i}]", seed, _is_count, "a seed (an integer >= 0)")
    check.expect("elapsed_s", results.get("elapsed_s"),
                 _optional(lambda v: _is_number(v) and v >= 0), "seconds (a number >= 0) or null")
    check.expect("pretrained", results.get("pretrained"), _optional(_is_text),
                 "a model name or null")
    for key in _MAPPINGS:
        check.mapping(key, results.get(key), optional=True)
    budget = results.get("budget") or {}
    for key in _BUDGET_MAPPINGS:
        check.mapping(f"budget.{key}", budget.get(key), optional=True)
    for key in ("commit", "command"):
        check.expect(f"provenance.{key}", (results.get("provenance") or {}).get(key),
                     _optional(_is_text), "text or null")
    for name, entry in (results.get("method_entries") or {}).items():
        entry = check.mapping(f"method_entries.{name}", entry)
        check.expect(f"method_entries.{name}.method", entry.get("method", name), _is_text,
                     "a method name")
        check.mapping(f"method_entries.{name}.set", entry.get("set"), optional=True)


def _check_difference(check: _Checker, row: dict[str, Any], where: str, method: str,
                      results: dict[str, Any]) -> None:
    baseline = results["baseline"]
    difference = row.get("difference")
    if method == baseline:
        check.expect(f"{where}.difference", difference, lambda v: v is None,
                     f"null: {method} is the baseline, compared with nothing")
        return
    if difference is None:
        raise ValueError(f"{check.path}: '{where}' (method {method}) lacks 'difference', its "
                         f"paired difference from the baseline {baseline}; compare writes one "
                         "for every method but the baseline: the file was changed or damaged, "
                         "rerun the comparison")
    difference = check.mapping(f"{where}.difference", difference)
    for key in compared_metrics(results["metric"]):
        entry = check.mapping(f"{where}.difference.{key}",
                              check.require(difference, key, f"{where}.difference"))
        field = f"{where}.difference.{key}"
        check.numbers(entry, _INTERVAL, field, required=True)
        check.expect(f"{field}.verdict", check.require(entry, "verdict", field),
                     lambda v: v in VERDICTS, f"one of {', '.join(VERDICTS)}")
        check.expect(f"{field}.seeds", check.require(entry, "seeds", field), _is_count,
                     "a number of seeds (an integer >= 0)")


def _check_summary(check: _Checker, results: dict[str, Any]) -> None:
    metric, methods = results["metric"], results["methods"]
    means = tuple(f"{key}_{part}" for key in (f"test_{metric}", f"validation_{metric}",
                                               "last_layer_cosine_similarity")
                  for part in ("mean", "std"))
    seen: list[str] = []
    for i, row in enumerate(check.items("summary", results["summary"])):
        where = f"summary[{i}]"
        row = check.mapping(where, row)
        method = check.expect(f"{where}.method", check.require(row, "method", where),
                              lambda v: v in methods, f"one of the methods ({', '.join(methods)})")
        if method in seen:
            raise ValueError(f"{check.path}: 'summary' has two rows of method {method}")
        seen.append(method)
        check.numbers(row, (*means, "step_time_ratio"), where, required=False)
        _check_difference(check, row, where, method, results)
    missing = [m for m in methods if m not in seen]
    if missing:
        raise ValueError(f"{check.path}: 'summary' has no row of method(s) {', '.join(missing)}")


def _check_runs(check: _Checker, results: dict[str, Any]) -> None:
    metric, methods = results["metric"], results["methods"]
    values = (*compared_metrics(metric), f"validation_{metric}")
    for i, run in enumerate(check.items("runs", results["runs"])):
        where = f"runs[{i}]"
        run = check.mapping(where, run)
        check.expect(f"{where}.method", check.require(run, "method", where),
                     lambda v: v in methods, f"one of the methods ({', '.join(methods)})")
        check.expect(f"{where}.seed", check.require(run, "seed", where), _is_count,
                     "a seed (an integer >= 0)")
        check.numbers(run, values, where, required=True)
        curve = check.expect(f"{where}.cosine_similarity_per_layer",
                             run.get("cosine_similarity_per_layer"),
                             _optional(lambda v: isinstance(v, list)), "a list or null")
        for layer, value in enumerate(curve or []):
            check.expect(f"{where}.cosine_similarity_per_layer[{layer}]", value,
                         _optional(_is_number), "a number or null")


def _check_activity(check: _Checker, results: dict[str, Any]) -> None:
    """``method_activity`` (absent in files written before it was measured): per compared
    method, its run counts and per method-parameter kind the largest changes."""
    methods = results["methods"]
    activity = check.mapping("method_activity", results.get("method_activity"), optional=True)
    for method, entry in activity.items():
        where = f"method_activity.{method}"
        check.expect(where, method, lambda v: v in methods,
                     f"a key among the methods ({', '.join(methods)})")
        entry = check.mapping(where, entry)
        for key in ("runs_measured", "runs_unmeasured"):
            check.expect(f"{where}.{key}", check.require(entry, key, where), _is_count,
                         "a number of runs (an integer >= 0)")
        kinds = check.mapping(f"{where}.parameters", check.require(entry, "parameters", where))
        for kind, moved in kinds.items():
            field = f"{where}.parameters.{kind}"
            check.expect(field, kind, lambda v: v in METHOD_LABELS,
                         f"a key among {', '.join(METHOD_LABELS)}")
            moved = check.mapping(field, moved)
            check.expect(f"{field}.max_abs_change",
                         check.require(moved, "max_abs_change", field),
                         lambda v: _is_number(v) and v >= 0, "a distance (a number >= 0)")
            check.expect(f"{field}.response_max_abs_change",
                         check.require(moved, "response_max_abs_change", field),
                         _optional(lambda v: _is_number(v) and v >= 0),
                         "a distance (a number >= 0) or null")


def check_results(results: Any, path: str | Path) -> dict[str, Any]:
    """``results`` (the content of ``path``, a ``results.json``) once every field the
    document reads is checked.

    Raises:
        ValueError: naming ``path`` and the field: the content is not a mapping, lacks a key
            compare writes, holds a non-finite number anywhere, a value of the wrong kind, a
            summary row, run record or ``method_activity`` entry of an unknown method, or a
            method without its ``difference`` from the baseline.
    """
    path = Path(path)
    if not isinstance(results, dict):
        raise ValueError(f"{path} must hold a mapping (a JSON object), as filterformer compare "
                         f"writes it; got a {type(results).__name__}")
    found = first_non_finite(results)
    if found is not None:
        field, value = found
        raise ValueError(f"{path}: '{field}' is {value}, not a finite number; compare writes "
                         "null where a value is missing, so the file was changed or damaged: "
                         "fix the field or rerun the comparison")
    missing = [k for k in REQUIRED_KEYS if k not in results]
    if missing:
        raise ValueError(f"{path} lacks {', '.join(missing)}: not a results.json written by "
                         "filterformer compare")
    check = _Checker(path)
    _check_header(check, results)
    _check_summary(check, results)
    _check_runs(check, results)
    _check_activity(check, results)
    return results
