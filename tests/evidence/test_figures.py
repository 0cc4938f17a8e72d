import pytest
import torch
from scipy import stats

from filterformer.evidence.claims import parse_claims
from filterformer.evidence.figures import (
    _draw_trend,
    claim_figure_path,
    draw_claim_figure,
    figure_caption,
    mean_interval,
)

from .results_fixture import comparison, make_results


def test_mean_interval_is_student_t_over_the_values():
    values = torch.randn(6).tolist()
    mean, low, high = mean_interval([*values, None, float("nan")])
    assert mean == pytest.approx(sum(values) / 6)
    expected = stats.t.interval(0.95, 5, loc=mean, scale=stats.sem(values))
    assert (low, high) == pytest.approx(expected)
    assert mean_interval([0.25]) == (0.25, 0.25, 0.25)
    assert mean_interval([None]) is None


def _claim(figure):
    return parse_claims([{"id": "C1", "title": "t", "papers": "p", "claim": "c",
                          "settings": [{"results": "a"}, {"results": "b"}],
                          "tests": [{"method": "gfsa", "metric": "test_accuracy", "paper": "x",
                                     "expect": "better"}],
                          "figure": figure}])[0]


def test_figures_live_in_the_first_setting_s_directory(tmp_path):
    assert claim_figure_path(_claim({"layers": {}}), tmp_path) == \
        tmp_path / "a" / "figures" / "C1_layers.png"
    assert claim_figure_path(_claim({"file": "figures/cost.png"}), tmp_path) == \
        tmp_path / "a" / "figures" / "cost.png"


def test_a_trend_is_drawn_from_the_settings_that_ran_and_names_a_missing_path(tmp_path):
    seeds = {s: 0.5 for s in range(3)}
    results = comparison(make_results({"softmax": {"test_accuracy": seeds},
                                       "gfsa": {"test_accuracy": seeds}}, depth=8))
    claim = _claim({"trend": {"x": "budget.model.depth", "metrics": ["test_accuracy"]}})
    settings = claim.settings
    path = tmp_path / "trend.png"
    assert draw_claim_figure(claim, [(settings[0], None), (settings[1], None)], path) is None
    assert draw_claim_figure(claim, [(settings[0], None), (settings[1], results)], path) == path
    assert path.read_bytes()[:4] == b"\x89PNG"
    labelled = _claim({"trend": {"x": "budget.model.depth", "x_label": "depth (layers)",
                                 "metrics": ["test_accuracy"]}})
    axes = _draw_trend(labelled, [(settings[1], results)]).axes
    assert [ax.get_xlabel() for ax in axes] == ["depth (layers)"]
    assert _draw_trend(claim, [(settings[1], results)]).axes[0].get_xlabel() == "budget.model.depth"
    wrong = _claim({"trend": {"x": "budget.depth", "metrics": ["test_accuracy"]}})
    with pytest.raises(ValueError, match=r"claim C1, setting b: 'budget\.depth'"):
        draw_claim_figure(wrong, [(settings[1], results)], path)


@pytest.mark.parametrize("key, path", [("x", "budget.model"), ("group", "budget.optimizer"),
                                       ("x", "methods")])
def test_a_trend_along_a_mapping_or_list_is_an_error_naming_the_path(tmp_path, key, path):
    seeds = dict(enumerate(torch.rand(3).tolist()))
    results = comparison(make_results({"softmax": {"test_accuracy": seeds},
                                       "gfsa": {"test_accuracy": seeds}}))
    spec = {"x": "budget.model.depth", "metrics": ["test_accuracy"], key: path}
    claim = _claim({"trend": spec})
    with pytest.raises(ValueError, match=rf"claim C1, setting b: '{path}' .* a single value"):
        draw_claim_figure(claim, [(claim.settings[0], None), (claim.settings[1], results)],
                          tmp_path / "trend.png")


def test_the_caption_of_a_trend_along_a_mapping_is_an_error_too():
    seeds = dict(enumerate(torch.rand(3).tolist()))
    results = comparison(make_results({"softmax": {"test_accuracy": seeds},
                                       "gfsa": {"test_accuracy": seeds}}))
    claim = _claim({"trend": {"x": "budget.model", "metrics": ["test_accuracy"]}})
    with pytest.raises(ValueError, match=r"claim C1, setting b: 'budget.model' .* single value"):
        figure_caption(claim, [(claim.settings[0], None), (claim.settings[1], results)])
