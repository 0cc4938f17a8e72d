"""A results.json the document cannot trust is refused, naming the file and the field: a
non-finite number, a value of the wrong kind, a missing field, a deleted ``difference``."""

from __future__ import annotations

import copy
import random
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from filterformer.evidence import parse_claims, render_document
from filterformer.evidence.comparisons import load_comparison

from .activity_fixture import random_activity
from .results_fixture import comparison, make_results, shifted, write_results


def _results() -> dict:
    seeds = range(random.randint(3, 6))
    base = dict(zip(seeds, torch.rand(len(seeds)).tolist(), strict=True))
    results = make_results({"softmax": {"test_accuracy": base},
                            "gfsa": {"test_accuracy": shifted(base, 0.1)},
                            "agf": {"test_accuracy": shifted(base, -0.05)}})
    activity = random_activity(len(seeds))
    results["method_activity"] = {m: activity[m] for m in results["methods"]}
    return results


def _refused(tmp_path, results, *fragments: str) -> str:
    path = write_results(tmp_path, "c", results)
    with pytest.raises(ValueError) as err:
        load_comparison(tmp_path, "c")
    message = str(err.value)
    for fragment in (str(path), *fragments):
        assert fragment in message, (fragment, message)
    return message


def _run_of(results: dict, method: str) -> int:
    return next(i for i, run in enumerate(results["runs"]) if run["method"] == method)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("field", ["ci_low", "ci_high", "mean"])
def test_a_non_finite_difference_is_refused_naming_the_file_and_field(tmp_path, field, value):
    results = _results()
    row = random.choice([1, 2])
    results["summary"][row]["difference"]["test_accuracy"][field] = value
    _refused(tmp_path, results, f"summary[{row}].difference.test_accuracy.{field}", "finite")


@pytest.mark.parametrize("where", ["summary", "runs", "elapsed_s", "per layer", "diagnostics"])
def test_a_non_finite_number_anywhere_is_refused(tmp_path, where):
    results = _results()
    if where == "summary":
        results["summary"][0]["test_accuracy_mean"] = float("nan")
        field = "summary[0].test_accuracy_mean"
    elif where == "runs":
        run = _run_of(results, "gfsa")
        results["runs"][run]["last_layer_cosine_similarity"] = float("inf")
        field = f"runs[{run}].last_layer_cosine_similarity"
    elif where == "elapsed_s":
        results["elapsed_s"] = float("nan")
        field = "elapsed_s"
    elif where == "per layer":
        results["runs"][-1]["cosine_similarity_per_layer"][2] = float("nan")
        field = f"runs[{len(results['runs']) - 1}].cosine_similarity_per_layer[2]"
    else:
        results["diagnostics"] = {"gfsa": {"effective_rank": [1.0, float("-inf")]}}
        field = "diagnostics.gfsa.effective_rank[1]"
    _refused(tmp_path, results, field)


def test_a_file_of_the_wrong_shape_is_refused_naming_the_file(tmp_path):
    results = _results()
    _refused(tmp_path, [results], "mapping", "list")
    _refused(tmp_path, {**results, "summary": {r["method"]: r for r in results["summary"]}},
             "'summary'", "list")
    _refused(tmp_path, {**results, "summary": [list(results["summary"][0].items()),
                                               *results["summary"][1:]]},
             "summary[0]", "mapping")
    _refused(tmp_path, {**results, "runs": "none"}, "'runs'", "list")


@pytest.mark.parametrize("field", ["method", "seed", "test_accuracy", "step_time_s"])
def test_a_run_record_missing_a_field_is_refused_naming_it(tmp_path, field):
    results = _results()
    run = random.randrange(len(results["runs"]))
    del results["runs"][run][field]
    _refused(tmp_path, results, f"runs[{run}]", field)


def test_a_summary_row_missing_its_method_or_a_method_missing_its_row_is_refused(tmp_path):
    results = _results()
    del results["summary"][2]["method"]
    _refused(tmp_path, results, "summary[2]", "'method'")
    results = _results()
    del results["summary"][1]
    _refused(tmp_path, results, "summary", "gfsa")


def test_a_deleted_difference_names_what_is_missing_not_the_baseline(tmp_path):
    results = _results()
    row = random.choice([1, 2])
    method = results["summary"][row]["method"]
    del results["summary"][row]["difference"]
    message = _refused(tmp_path, results, f"summary[{row}]", "'difference'", method,
                       "baseline softmax")
    assert f"method {method!r} is the baseline" not in message
    results = _results()
    del results["summary"][1]["difference"]["test_accuracy"]
    _refused(tmp_path, results, "summary[1].difference", "test_accuracy")


@pytest.mark.parametrize("field, value", [
    (("seeds",), "ten"), (("seeds",), [0, "one"]), (("seeds",), 10),
    (("summary", 1, "difference", "test_accuracy", "seeds"), "ten"),
    (("summary", 1, "difference", "test_accuracy", "seeds"), 2.5),
    (("summary", 1, "difference", "test_accuracy", "mean"), "0.1"),
    (("summary", 1, "difference", "test_accuracy", "verdict"), "much better"),
    (("summary", 0, "test_accuracy_mean"), "high"), (("summary", 1, "step_time_ratio"), [1]),
    (("runs", 0, "seed"), "zero"), (("runs", 0, "test_accuracy"), True),
    (("runs", 0, "cosine_similarity_per_layer"), "flat"),
    (("methods",), "softmax"), (("methods",), ["softmax", 3]), (("baseline",), "nobody"),
    (("metric",), "f1"), (("elapsed_s",), "long"), (("budget",), ["lr"]),
    (("method_entries", "gfsa", "set"), ["optimizer.lr"]), (("provenance",), "git"),
])
def test_a_value_of_the_wrong_kind_is_refused_naming_the_field(tmp_path, field, value):
    results = _results()
    target = results
    for part in field[:-1]:
        target = target[part]
    target[field[-1]] = value
    named = field[0] + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in field[1:])
    _refused(tmp_path, results, named)


@pytest.mark.parametrize(("field", "value"), [
    (("method_activity",), ["gfsa"]), (("method_activity", "gfsa"), 0.1),
    (("method_activity", "gfsa", "runs_measured"), -1),
    (("method_activity", "gfsa", "runs_unmeasured"), 1.5),
    (("method_activity", "gfsa", "parameters"), []),
    (("method_activity", "gfsa", "parameters", "gfsa"), 0.1),
    (("method_activity", "gfsa", "parameters", "gfsa", "max_abs_change"), "small"),
    (("method_activity", "gfsa", "parameters", "gfsa", "max_abs_change"), -0.1),
    (("method_activity", "gfsa", "parameters", "gfsa", "response_max_abs_change"), "flat"),
])
def test_a_malformed_activity_is_refused_naming_the_field(tmp_path, field, value):
    results = _results()
    target = results
    for part in field[:-1]:
        target = target[part]
    target[field[-1]] = value
    _refused(tmp_path, results, ".".join(field))


@pytest.mark.parametrize(("where", "key"), [
    (("method_activity",), "neutreno"), (("method_activity", "gfsa", "parameters"), "gfsa2")])
def test_activity_of_an_unknown_method_or_kind_is_refused_naming_it(tmp_path, where, key):
    results = _results()
    target = results
    for part in where:
        target = target[part]
    target[key] = {"runs_measured": 1, "runs_unmeasured": 0, "parameters": {},
                   "max_abs_change": 0.1, "response_max_abs_change": None}
    _refused(tmp_path, results, ".".join((*where, key)), "must be a key among")


@pytest.mark.parametrize("key", ["runs_measured", "parameters"])
def test_activity_missing_a_field_is_refused_naming_it(tmp_path, key):
    results = _results()
    del results["method_activity"]["gfsa"][key]
    _refused(tmp_path, results, "method_activity.gfsa", key)


def test_a_file_compare_writes_is_accepted_as_written(tmp_path):
    results = _results()
    write_results(tmp_path, "c", results)
    assert load_comparison(tmp_path, "c") == comparison(results)


def _paths(value, path=()):
    """Every path into ``value`` (dict keys and list indices), depth first."""
    yield path
    children = value.items() if isinstance(value, dict) else \
        enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from _paths(child, (*path, key))


CLAIM = {"id": "C1", "title": "t", "papers": "p", "claim": "c", "tuning": "lr",
         "settings": [{"results": "a"}, {"results": "b"}],
         "tests": [{"method": "gfsa", "metric": "test_accuracy", "paper": "x",
                    "expect": "better"},
                   {"method": "gfsa", "metric": "last_layer_cosine_similarity", "paper": "x",
                    "expect": "better", "settings": ["a"], "versus": "b"}]}
ODD_VALUES = [None, "ten", 5, -1, 2.5, True, [], {}, [1], {"a": 1}, "", float("nan")]


@settings(max_examples=50, deadline=None)
@given(victim=st.sampled_from(["a", "b", "lr"]), pick=st.floats(0, 1, exclude_max=True),
       delete=st.booleans(), value=st.sampled_from(ODD_VALUES))
def test_a_results_file_changed_anywhere_gives_the_document_or_an_error_naming_it(
        victim, pick, delete, value):
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        data = {name: _results() for name in ("a", "b", "lr")}
        paths = list(_paths(data[victim]))[1:]
        path = paths[int(pick * len(paths))]
        target = data[victim]
        for part in path[:-1]:
            target = target[part]
        if delete:
            del target[path[-1]]
        else:
            target[path[-1]] = copy.deepcopy(value)
        for name, results in data.items():
            write_results(root, name, results)
        try:
            render_document(parse_claims([CLAIM]), root, root / "RESULTS.md", "x")
        except ValueError as err:
            assert str(root / victim / "results.json") in str(err), str(err)
