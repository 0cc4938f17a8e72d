"""The comparison's figures: methods drawn where they separate."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from filterformer.diagnostics import diagnose
from filterformer.models import Transformer, TransformerConfig
from filterformer.training.compare import figures as compare_figures


def _draw(reports, directory, monkeypatch):
    """The comparison's figures of ``reports`` with softmax as the baseline: the written list,
    and each figure drawn, by file name (nothing saved)."""
    summary = [{"method": method, "difference": None if method == "softmax" else {},
                "step_time_s_median": None, "test_accuracy_mean": None,
                "test_accuracy_std": None} for method in reports]
    drawn = {}
    monkeypatch.setattr(compare_figures, "save_figure",
                        lambda figure, path, **options: drawn.setdefault(path.name, figure))
    return compare_figures.comparison_figures(reports, summary, "accuracy", directory), drawn


@pytest.mark.filterwarnings("ignore:No artists with labels")  # no cost: an empty legend
def test_frequency_responses_are_drawn_beside_their_difference_from_the_baseline(
        tmp_path, monkeypatch):
    ids = torch.randint(1, 20, (3, random.randint(5, 9)))
    reports, depth = {}, random.randint(2, 3)
    for method, extra in (("gfsa", {"attention": "gfsa"}), ("softmax", {}),
                          ("neutreno", {"neutreno_lambda": 0.6})):
        config = TransformerConfig(dim=8, depth=depth, num_heads=2,
                                   vocab_size=20, **extra)
        model = Transformer(config)
        if method == "gfsa":
            with torch.no_grad():
                for block in model.blocks:
                    block.attn.wK.normal_()
        reports[method] = diagnose(model, [{"input_ids": ids}], label=method)
    # The baseline, softmax, is not the first method: the differences follow the baseline.
    written, drawn = _draw(reports, tmp_path, monkeypatch)
    gains, difference = drawn["frequency_response"].axes
    assert gains.get_yscale() == "log"
    lines = {line.get_label(): line for line in difference.get_lines()
             if not line.get_label().startswith("_")}
    assert set(lines) == {"gfsa", "neutreno"} and "softmax" in difference.get_ylabel()
    softmax = np.nanmean(np.array(reports["softmax"].frequency_response), axis=0)
    for method, line in lines.items():
        mean = np.nanmean(np.array(reports[method].frequency_response), axis=0)
        np.testing.assert_allclose(line.get_ydata(), mean - softmax)
    caption = next(f.caption for f in written if f.name == "frequency_response")
    assert "minus softmax's" in caption
    # GFSA's filters: their departure from the attention they start as.
    filters = drawn["gfsa_filters_gfsa"]
    first = next(ax for ax in filters.axes if ax.get_visible())
    curve = reports["gfsa"].gfsa_filters[0]
    np.testing.assert_allclose(first.get_lines()[0].get_ydata(),
                               np.array(curve.response[0]) - np.array(curve.sigma))


@pytest.mark.filterwarnings("ignore:No artists with labels")
def test_the_last_layers_frequency_figure_takes_each_methods_own_last_layer(
        tmp_path, monkeypatch):
    """A method whose entry sets another depth: each is drawn at its own last layer."""
    ids = torch.randint(1, 20, (2, random.randint(5, 9)))
    depths = {"softmax": random.randint(2, 3), "deeper": random.randint(4, 5)}
    reports = {method: diagnose(Transformer(TransformerConfig(
        dim=8, depth=depth, num_heads=2, vocab_size=20)), [{"input_ids": ids}], label=method)
        for method, depth in depths.items()}
    _, drawn = _draw(reports, tmp_path, monkeypatch)
    gains, difference = drawn["frequency_response_last"].axes
    assert "last attention layer" in gains.get_title()
    (line,) = [line for line in difference.get_lines() if line.get_label() == "deeper"]
    last = {m: np.array(r.frequency_response[-1]) for m, r in reports.items()}
    np.testing.assert_allclose(line.get_ydata(), last["deeper"] - last["softmax"])
