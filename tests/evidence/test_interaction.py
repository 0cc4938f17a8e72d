"""An interaction row: how much more a method gains on the baseline in one setting than in
another, checked against a difference of differences computed here with numpy and scipy."""

from __future__ import annotations

import random

import numpy as np
import pytest
import yaml
from scipy import stats

from filterformer.evidence import write_document
from filterformer.evidence.claims import parse_claims
from filterformer.evidence.judged_rows import judge_claim

from .results_fixture import comparison, make_results, shifted, write_results

SEEDS = range(5)
ROW = {"method": "gfsa", "metric": "test_accuracy", "paper": "the deepest gain most",
       "expect": "better", "settings": ["deep"], "versus": "shallow", "interaction": True}


def _claim_data(tests: list[dict]) -> list[dict]:
    return [{"id": "C", "title": "t", "papers": "p", "claim": "c",
             "settings": [{"results": "shallow", "label": "depth 4"},
                          {"results": "deep", "label": "depth 16"}],
             "tests": tests}]


def _setting(gain: float, seeds=SEEDS, depth: int = 4) -> dict:
    """A comparison in which gfsa gains about ``gain`` on softmax, seed by seed."""
    base = {s: random.uniform(0.55, 0.75) for s in seeds}
    return make_results({"softmax": {"test_accuracy": base},
                         "gfsa": {"test_accuracy": shifted(base, gain, noise=0.01)}},
                        depth=depth)


def _accuracy(results: dict, method: str) -> dict[int, float | None]:
    return {r["seed"]: r["test_accuracy"] for r in results["runs"] if r["method"] == method}


def _hand_interaction(deep: dict, shallow: dict) -> np.ndarray:
    """Per seed present and finite in all four runs: (gfsa − softmax) deep − (gfsa − softmax)
    shallow."""
    runs = [_accuracy(deep, "gfsa"), _accuracy(deep, "softmax"), _accuracy(shallow, "gfsa"),
            _accuracy(shallow, "softmax")]
    seeds = [s for s in SEEDS if all(r.get(s) is not None for r in runs)]
    return np.array([(runs[0][s] - runs[1][s]) - (runs[2][s] - runs[3][s]) for s in seeds])


def _assert_t_test_of(difference: dict, d: np.ndarray) -> None:
    n = len(d)
    low, high = stats.t.interval(0.95, n - 1, loc=d.mean(), scale=stats.sem(d))
    assert difference["seeds"] == n
    assert difference["mean"] == pytest.approx(float(d.mean()), abs=1e-12)
    assert difference["ci_low"] == pytest.approx(float(low), abs=1e-12)
    assert difference["ci_high"] == pytest.approx(float(high), abs=1e-12)


def test_an_interaction_row_is_each_seed_s_difference_of_differences():
    shallow, deep = _setting(random.uniform(-0.005, 0.005)), _setting(random.uniform(0.04, 0.06))
    claim = parse_claims(_claim_data([{**ROW, "paper_effect": 0.01}]))[0]
    assert claim.tests[0].interaction and claim.tests[0].settings == ("deep",)
    row = judge_claim(claim, {"shallow": comparison(shallow), "deep": comparison(deep)})[0]
    d = _hand_interaction(deep, shallow)
    _assert_t_test_of(row.difference, d)
    assert row.p_value == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue, rel=1e-9)
    # A gain of ~5 pp against ~0 with ±0.5 pp noise: decisive, the method gains more deep.
    assert row.difference["verdict"] == "better" and row.verdict == "supports"
    assert row.adjusted_p == row.p_value  # alone in its family
    # Power from the spread of d: the detectable effect is detected with probability 0.8.
    sd, n = float(np.std(d, ddof=1)), len(d)
    critical = stats.t.ppf(0.975, n - 1)
    noncentrality = row.detectable * np.sqrt(n) / sd
    detected = stats.nct.sf(critical, n - 1, noncentrality) + \
        stats.nct.cdf(-critical, n - 1, noncentrality)
    assert detected == pytest.approx(0.8, abs=1e-6)
    assert row.seeds_for_paper is not None and row.seeds_for_paper >= 3


def test_the_expectation_is_in_compare_s_orientation_and_margins_and_holm_apply():
    # The method gains less deep than shallow: a claim that it gains more is contradicted.
    shallow, deep = _setting(random.uniform(0.04, 0.06)), _setting(random.uniform(-0.005, 0.005))
    tests = [ROW, {**ROW, "expect": "same", "margin": 0.01},
             {**ROW, "expect": "not worse", "margin": 0.2},
             {**ROW, "interaction": False, "expect": "worse"}]
    claim = parse_claims(_claim_data(tests))[0]
    rows = judge_claim(claim, {"shallow": comparison(shallow), "deep": comparison(deep)})
    d = _hand_interaction(deep, shallow)
    assert [r.verdict for r in rows[:3]] == ["contradicts", "contradicts", "supports"]
    # Without the key the row compares gfsa with itself: deep gfsa against shallow gfsa.
    gfsa = {s: _accuracy(deep, "gfsa")[s] - _accuracy(shallow, "gfsa")[s] for s in SEEDS}
    assert rows[3].difference["mean"] == pytest.approx(np.mean(list(gfsa.values())))
    assert rows[0].difference["mean"] == pytest.approx(d.mean())
    raw = [r.p_value for r in rows]
    assert raw[0] == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue, rel=1e-9)
    order = np.argsort(raw)
    expected = np.empty(len(raw))
    expected[order] = np.maximum.accumulate(np.minimum(1, (len(raw) - np.arange(len(raw)))
                                                       * np.sort(raw)))
    assert [r.adjusted_p for r in rows] == pytest.approx(list(expected), rel=1e-9)


def test_a_seed_missing_or_diverged_in_either_setting_is_left_out():
    shallow, deep = _setting(0.0), _setting(0.03)
    diverged = next(r for r in deep["runs"] if r["method"] == "softmax" and r["seed"] == 1)
    diverged.update(test_accuracy=None, diverged="loss is nan")
    shallow["runs"] = [r for r in shallow["runs"]
                       if not (r["method"] == "gfsa" and r["seed"] == 3)]
    claim = parse_claims(_claim_data([ROW]))[0]
    row = judge_claim(claim, {"shallow": comparison(shallow), "deep": comparison(deep)})[0]
    d = _hand_interaction(deep, shallow)
    assert len(d) == 3
    _assert_t_test_of(row.difference, d)


def test_interaction_is_refused_without_versus_or_as_anything_but_true_or_false():
    without = {k: v for k, v in ROW.items() if k != "versus"}
    with pytest.raises(ValueError, match=r"claim C, tests\[0\]: 'interaction' .* needs "
                                         r"'versus'"):
        parse_claims(_claim_data([without]))
    with pytest.raises(ValueError, match=r"claim C, tests\[1\]: 'interaction' must be true or "
                                         "false; got 'yes'"):
        parse_claims(_claim_data([ROW, {**ROW, "interaction": "yes"}]))
    assert not parse_claims(_claim_data([{**ROW, "interaction": None}]))[0].tests[0].interaction


def test_settings_with_other_seeds_or_baselines_are_refused_naming_both_files(tmp_path):
    claim = parse_claims(_claim_data([ROW]))[0]
    shallow, deep = _setting(0.0, seeds=range(1, 6)), _setting(0.03)
    files = [write_results(tmp_path, name, results)
             for name, results in (("deep", deep), ("shallow", shallow))]
    with pytest.raises(ValueError) as error:
        judge_claim(claim, {"shallow": comparison(shallow), "deep": comparison(deep)},
                    results_root=tmp_path)
    message = str(error.value)
    assert message.startswith("claim C, setting deep:")
    assert all(str(f) in message for f in files)
    assert "[0, 1, 2, 3, 4]" in message and "[1, 2, 3, 4, 5]" in message
    base = {s: random.uniform(0.55, 0.75) for s in SEEDS}
    other = make_results({"softmax": {"test_accuracy": base},
                          "gfsa": {"test_accuracy": shifted(base, 0.01)},
                          "agf": {"test_accuracy": shifted(base, 0.02)}}, baseline="agf")
    with pytest.raises(ValueError, match="one baseline in both settings"):
        judge_claim(claim, {"shallow": comparison(other), "deep": comparison(deep)},
                    results_root=tmp_path)


def test_the_row_is_labelled_as_a_difference_of_differences_in_the_document(tmp_path):
    shallow, deep = _setting(-0.02), _setting(0.05, depth=16)
    results = tmp_path / "results"
    write_results(results, "shallow", shallow)
    write_results(results, "deep", deep)
    claims = tmp_path / "claims.yaml"
    claims.write_text(yaml.safe_dump(_claim_data([ROW]), sort_keys=False))
    write_document(claims, results, tmp_path / "RESULTS.md", draw_figures=False)
    markdown = (tmp_path / "RESULTS.md").read_text()
    line = next(line for line in markdown.splitlines() if line.startswith("| (gfsa"))
    cells = line.split(" | ")
    assert cells[0] == "| (gfsa − softmax) at depth 16 − at depth 4"
    differences = [next(r["difference"]["test_accuracy"]["mean"] for r in res["summary"]
                        if r["method"] == "gfsa") for res in (shallow, deep)]
    assert cells[5] == " → ".join(f"{100 * m:+.2f} pp" for m in differences)
    assert "(gfsa − softmax) − the same at depth 4, test accuracy: **" in markdown
