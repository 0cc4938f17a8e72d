import statistics

import pytest
import torch

from filterformer.evidence.comparisons import (
    load_comparison,
    method_difference,
    metric_direction,
    metric_mean_std,
)
from filterformer.training.compare.statistics import summarize

from .results_fixture import comparison, make_results, null_differences, shifted, write_results


def _results():
    seeds = range(4)
    base = dict(zip(seeds, torch.rand(4).tolist(), strict=True))
    return make_results({"softmax": {"test_accuracy": base},
                         "gfsa": {"test_accuracy": {s: v + 0.1 for s, v in base.items()}}})


def test_a_missing_directory_is_not_run_yet_when_pending_and_a_broken_file_an_error(tmp_path):
    assert load_comparison(tmp_path, "absent", pending=True) is None
    with pytest.raises(ValueError, match=f"{tmp_path / 'absent'} does not exist"):
        load_comparison(tmp_path, "absent")
    (tmp_path / "empty").mkdir()
    assert load_comparison(tmp_path, "empty", pending=True) is None
    with pytest.raises(ValueError, match=f"{tmp_path / 'empty' / 'results.json'} does not "
                                         "exist"):
        load_comparison(tmp_path, "empty")
    results = _results()
    write_results(tmp_path, "nested/ok", results)
    assert load_comparison(tmp_path, "nested/ok") == comparison(results)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_comparison(tmp_path, "bad")
    (tmp_path / "bad" / "results.json").write_text('{"metric": "accuracy"}')
    with pytest.raises(ValueError, match="methods, baseline, summary, runs"):
        load_comparison(tmp_path, "bad")


def test_means_are_the_summary_s_and_else_computed_from_the_runs():
    results = comparison(_results())
    row = results.summary[1]
    assert metric_mean_std(results, "gfsa", "test_accuracy") == (row["test_accuracy_mean"],
                                                                 row["test_accuracy_std"])
    times = [r["step_time_s"] for r in results.runs if r["method"] == "gfsa"]
    mean, std = metric_mean_std(results, "gfsa", "step_time_s")  # not in the summary
    assert mean == pytest.approx(statistics.fmean(times))
    assert std == pytest.approx(statistics.stdev(times))


def test_differences_are_read_as_written():
    results = comparison(_results())
    assert method_difference(results, "gfsa", "test_accuracy", "here") == \
        results.summary[1]["difference"]["test_accuracy"]
    with pytest.raises(ValueError, match="here: method 'agf' is not compared there; methods: "
                                         "softmax, gfsa"):
        method_difference(results, "agf", "test_accuracy", "here")


def test_dotted_paths_and_directions():
    results = comparison(_results())
    assert results.value_at("budget.model.depth", "here") == 4
    with pytest.raises(ValueError, match=r"here: 'budget.model.width'.*budget.model has: dim, "
                                         "depth, norm"):
        results.value_at("budget.model.width", "here")
    assert metric_direction("test_accuracy") is True
    assert metric_direction("test_perplexity") is False
    assert metric_direction("last_layer_cosine_similarity") is False
    assert metric_direction("step_time_s") is False
    assert metric_direction("test_nothing") is None


def test_the_fixture_s_statistics_are_compare_s():
    """The test fixture's summary (numpy, scipy.stats.t) agrees with compare's own."""
    base = dict(enumerate(torch.rand(5).tolist()))
    results = make_results({"softmax": {"test_accuracy": base},
                            "gfsa": {"test_accuracy": shifted(base, 0.05)},
                            "agf": {"test_accuracy": shifted(base, null_differences(5), 0.0)}})
    ours = summarize(results["runs"], results["methods"], "accuracy", "softmax")
    for mine, theirs in zip(results["summary"], ours, strict=True):
        for key in ("test_accuracy_mean", "test_accuracy_std", "step_time_ratio"):
            assert mine[key] == pytest.approx(theirs[key])
        if mine["difference"] is None:
            assert theirs["difference"] is None
            continue
        for metric, difference in mine["difference"].items():
            assert theirs["difference"][metric] == pytest.approx(difference)
