import numpy as np
import pytest
from scipy import stats

from filterformer.evidence.claims import ClaimTest, Setting, parse_claims
from filterformer.evidence.judged_rows import JudgedRow, holm, judge_claim, verdict_text

from .results_fixture import comparison, make_results


def _row(verdict, expect, difference, metric="test_accuracy", fixed="fixed before"):
    return JudgedRow(ClaimTest("gfsa", metric, "1 → 2", expect, ("a",)), Setting("a", "a"),
                     {}, difference, verdict, fixed=fixed)


@pytest.mark.parametrize(("verdict", "expect", "difference", "fixed", "text"), [
    ("supports", "better", {"ci_low": 0.01, "ci_high": 0.03, "verdict": "better", "seeds": 5},
     "fixed before", "**supports**"),
    ("supports", "better", {"ci_low": 0.01, "ci_high": 0.03, "verdict": "better", "seeds": 5},
     "post hoc", "**supports** *post hoc*"),
    ("inconclusive at this scale", "better",
     {"ci_low": -0.012, "ci_high": 0.004, "verdict": "no significant difference", "seeds": 5},
     "unknown", "**inconclusive at this scale**"),
    ("inconclusive at this scale", "worse",
     {"ci_low": -0.03, "ci_high": 0.01, "verdict": "too few seeds", "seeds": 2},
     "fixed before", "**inconclusive at this scale** (too few seeds: 2)"),
    ("inconclusive at this scale", "better",
     {"ci_low": None, "ci_high": None, "verdict": "too few seeds", "seeds": 1},
     "fixed before", "**inconclusive at this scale** (too few seeds for an interval: 1)"),
    ("not run yet", "better", None, "unknown", "**not run yet**"),
])
def test_verdict_text_says_what_qualifies_the_verdict(verdict, expect, difference, fixed, text):
    assert verdict_text(_row(verdict, expect, difference, fixed=fixed)) == text


def test_holm_adjusts_a_textbook_family_and_leaves_rows_without_a_test_out():
    p = [0.01, 0.04, None, 0.03, 0.005]
    # Sorted: 0.005·4, 0.01·3, 0.03·2, 0.04·1, each at least the one before.
    assert holm(p) == pytest.approx([0.03, 0.06, None, 0.06, 0.02])
    assert holm([]) == [] and holm([0.7, 0.9]) == [1.0, 1.0]


def test_rows_of_a_claim_are_adjusted_together_with_scipy_s_paired_p_values():
    seeds = range(4)
    base = {s: 0.6 + 0.01 * s for s in seeds}
    shifts = {"gfsa": [0.020, 0.031, 0.024, 0.027], "neutreno": [0.010, -0.004, 0.016, 0.006],
              "agf": [0.030, 0.011, 0.041, 0.019]}
    results = make_results({"softmax": {"test_accuracy": base},
                            **{m: {"test_accuracy": {s: base[s] + d[s] for s in seeds}}
                               for m, d in shifts.items()}})
    claim = parse_claims([{
        "id": "C", "title": "t", "papers": "p", "claim": "c", "settings": [{"results": "a"}],
        "tests": [{"method": m, "metric": "test_accuracy", "paper": "x", "expect": "better"}
                  for m in shifts]}])[0]
    rows = judge_claim(claim, {"a": comparison(results)})
    raw = [stats.ttest_rel([base[s] + shifts[m][s] for s in seeds],
                           [base[s] for s in seeds]).pvalue for m in shifts]
    order = np.argsort(raw)
    expected = np.empty(3)
    expected[order] = np.maximum.accumulate(np.minimum(1, (3 - np.arange(3)) * np.sort(raw)))
    assert [r.p_value for r in rows] == pytest.approx(raw, rel=1e-9)
    assert [r.adjusted_p for r in rows] == pytest.approx(list(expected), rel=1e-9)
    for row in rows:
        assert row.verdict == ("supports" if row.p_value < 0.05 else
                               "inconclusive at this scale")
        assert row.adjusted_verdict == ("supports" if row.adjusted_p < 0.05 else
                                        "inconclusive at this scale")
    # The fixed shifts: gfsa significant before and after, agf (p ≈ 0.031) before only.
    assert [(r.verdict, r.adjusted_verdict) for r in rows] == [
        ("supports", "supports"), ("inconclusive at this scale",) * 2,
        ("supports", "inconclusive at this scale")]


def test_each_row_is_judged_on_each_of_its_settings_from_compare_s_verdict():
    claim = parse_claims([{
        "id": "C", "title": "t", "papers": "p", "claim": "c",
        "settings": [{"results": "a"}, {"results": "b"}, {"results": "c"}],
        "tests": [{"method": "gfsa", "metric": "test_accuracy", "paper": "x", "expect": "worse"},
                  {"method": "gfsa", "metric": "step_time_s", "paper": "y", "expect": "same",
                   "settings": ["c"]}]}])[0]
    seeds = {s: 0.5 + 0.1 * s for s in range(3)}
    results = make_results({"softmax": {"test_accuracy": seeds},
                            "gfsa": {"test_accuracy": {s: v + 0.1 + 0.01 * s
                                                       for s, v in seeds.items()}}})
    results = comparison(results)
    rows = judge_claim(claim, {"a": results, "b": None, "c": results})
    assert [(r.test.metric, r.setting.results) for r in rows] == [
        ("test_accuracy", "a"), ("test_accuracy", "b"), ("test_accuracy", "c"),
        ("step_time_s", "c")]
    difference = results.summary[1]["difference"]
    assert difference["test_accuracy"]["verdict"] == "better"  # against a claim of worse
    assert [r.verdict for r in rows[:3]] == ["contradicts", "not run yet", "contradicts"]
    assert rows[0].difference == difference["test_accuracy"] and rows[1].difference is None
    assert rows[3].difference == difference["step_time_s"]


def test_a_versus_row_compares_the_method_with_itself_in_another_setting():
    import random

    from .results_fixture import reference_difference, shifted

    claim = parse_claims([{
        "id": "C", "title": "t", "papers": "p", "claim": "c",
        "settings": [{"results": "deep"}, {"results": "shallow"}],
        "tests": [{"method": "softmax", "metric": "last_layer_cosine_similarity",
                   "paper": "higher when deeper", "expect": "worse", "versus": "shallow"}]}])[0]
    assert claim.tests[0].settings == ("deep",)  # the versus setting is not judged against itself
    shallow_cos = {s: random.uniform(0.2, 0.4) for s in range(5)}
    deep_cos = shifted(shallow_cos, random.uniform(0.2, 0.3))
    shallow = comparison(make_results({"softmax": {"last_layer_cosine_similarity": shallow_cos},
                                       "gfsa": {}}))
    deep = comparison(make_results({"softmax": {"last_layer_cosine_similarity": deep_cos},
                                    "gfsa": {}}))
    rows = judge_claim(claim, {"deep": deep, "shallow": shallow})
    expected = reference_difference(deep_cos, shallow_cos, higher=False)
    assert rows[0].difference["verdict"] == expected["verdict"] == "worse"
    assert rows[0].difference["mean"] == pytest.approx(expected["mean"])
    assert rows[0].difference["ci_low"] == pytest.approx(expected["ci_low"])
    assert rows[0].difference["ci_high"] == pytest.approx(expected["ci_high"])
    assert rows[0].verdict == "supports"
    assert judge_claim(claim, {"deep": deep, "shallow": None})[0].verdict == "not run yet"
    with pytest.raises(ValueError, match="'versus' must be one of"):
        parse_claims([{**{"id": "C", "title": "t", "papers": "p", "claim": "c"},
                       "settings": [{"results": "a"}],
                       "tests": [{"method": "m", "metric": "test_accuracy", "paper": "x",
                                  "expect": "better", "versus": "b"}]}])
