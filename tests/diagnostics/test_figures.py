import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.special import eval_jacobi

from filterformer.diagnostics import LearnedFilterCurves, diagnose
from filterformer.diagnostics import figures as figures_module
from filterformer.diagnostics.figures import (
    plot_agf_polynomials,
    plot_frequency_comparison,
    plot_frequency_responses,
    plot_layer_metric,
    plot_learned_filters,
    plot_report,
    plot_singular_spectra,
    save_figure,
)
from filterformer.models import Transformer, TransformerConfig


@pytest.fixture(scope="module")
def reports():
    ids = torch.randint(1, 30, (4, 6))
    out = []
    for label, attention in (("softmax", "softmax"), ("gfsa", "gfsa")):
        config = TransformerConfig(dim=8, depth=3, num_heads=2, vocab_size=30, attention=attention)
        out.append(diagnose(Transformer(config), [{"input_ids": ids}], label=label))
    return out


def lines(figure):
    return figure.axes[0].get_lines()


def test_layer_metric_draws_every_model_on_one_axes(reports):
    figure = plot_layer_metric(reports, "token_cosine_similarity")
    assert [line.get_label() for line in lines(figure)] == ["softmax", "gfsa"]
    for line, report in zip(lines(figure), reports, strict=True):
        np.testing.assert_allclose(line.get_xdata(), range(4))
        np.testing.assert_allclose(line.get_ydata(), report.token_cosine_similarity)
    # A metric over pairs of layers starts at layer 1.
    pairs = plot_layer_metric(reports, "attention_similarity")
    np.testing.assert_allclose(lines(pairs)[0].get_xdata(), [1, 2])
    with pytest.raises(ValueError, match="metric must be one of"):
        plot_layer_metric(reports, "accuracy")


def test_spectra_and_responses_plot_the_report_values(reports):
    spectra = plot_singular_spectra(reports, layer=2)
    np.testing.assert_allclose(lines(spectra)[1].get_ydata(), reports[1].singular_spectrum[2])
    responses = plot_frequency_responses(reports, layer=0)
    np.testing.assert_allclose(lines(responses)[0].get_xdata(), reports[0].frequencies)
    np.testing.assert_allclose(lines(responses)[0].get_ydata(), reports[0].frequency_response[0])


def test_learned_filter_grid_has_one_panel_per_layer_and_one_line_per_head(reports):
    figure = plot_learned_filters(reports[1].gfsa_filters, columns=2)
    visible = [ax for ax in figure.axes if ax.get_visible()]
    assert len(visible) == 3
    for ax, curve in zip(visible, reports[1].gfsa_filters, strict=True):
        drawn = [line for line in ax.get_lines() if len(line.get_xdata()) > 2]
        assert len(drawn) == 2
        np.testing.assert_allclose(drawn[1].get_ydata(), curve.response[1])


def test_agf_polynomials_follow_the_jacobi_basis():
    theta = torch.tensor([[1.0, 0.3, -0.2], [1.0, -0.5, 0.1]])
    figure = plot_agf_polynomials(theta, "jacobi", 1.0, 1.0, num_points=11)
    sigma = np.linspace(0, 1, 11)
    for line, row in zip(lines(figure), theta.tolist(), strict=True):
        expected = sum(t * eval_jacobi(k, 1.0, 1.0, sigma) for k, t in enumerate(row))
        np.testing.assert_allclose(line.get_ydata(), expected)


def test_files_are_real_png_and_svg(tmp_path, reports):
    written = save_figure(plot_layer_metric(reports), tmp_path / "cosine")
    assert [p.suffix for p in written] == [".png", ".svg"]
    assert written[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert ET.parse(written[1]).getroot().tag.endswith("svg")
    with pytest.raises(ValueError, match="formats"):
        save_figure(plot_layer_metric(reports), tmp_path / "x", ["gif"])


def test_plot_report_writes_every_supported_figure(tmp_path, reports):
    written = plot_report(reports, tmp_path, formats=["png"])
    assert set(written) == {
        "cosine_similarity", "identical_token_distance", "effective_rank", "singular_spectrum",
        "frequency_response", "attention_similarity", "layer_norm_sigma", "gfsa_filters_gfsa",
    }
    assert all(paths[0].is_file() for paths in written.values())


def _depth_reports(depth, attentions=("softmax", "gfsa")):
    """Reports of models of ``depth`` layers on the same fresh random batch."""
    ids = torch.randint(1, 30, (3, int(torch.randint(5, 9, ()))))
    out = []
    for attention in attentions:
        config = TransformerConfig(dim=8, depth=depth, num_heads=2, vocab_size=30,
                                   attention=attention)
        out.append(diagnose(Transformer(config), [{"input_ids": ids}], label=attention))
    return out


def test_frequency_comparison_draws_each_model_minus_the_first_on_a_labelled_axis(reports):
    figure = plot_frequency_comparison(reports)
    gains, difference = figure.axes
    assert gains.get_yscale() == "log" and "log" in gains.get_ylabel()
    softmax, gfsa = (np.nanmean(np.array(r.frequency_response), axis=0) for r in reports)
    np.testing.assert_allclose(gains.get_lines()[1].get_ydata(), gfsa)
    (drawn,) = [line for line in difference.get_lines() if not line.get_label().startswith("_")]
    assert drawn.get_label() == "gfsa"
    np.testing.assert_allclose(drawn.get_ydata(), gfsa - softmax)
    assert "softmax" in difference.get_ylabel() and "difference" in difference.get_title()
    with pytest.raises(ValueError, match="relative_to must be the label"):
        plot_frequency_responses(reports, relative_to="fusion")


def test_gfsa_filters_are_drawn_as_departures_from_attention_titled_by_layer_index():
    sigma = np.linspace(0, 1, 11)
    weights = np.random.default_rng().normal(size=(3, 2))
    names = [f"encoder.layer.{index}.attention.self.filterformer_gfsa" for index in (2, 5, 7)]
    curves = [
        LearnedFilterCurves(name=name, sigma=sigma.tolist(),
                            response=[(sigma + w * sigma * (1 - sigma)).tolist() for w in row])
        for name, row in zip(names, weights, strict=True)
    ]
    figure = plot_learned_filters(curves, relative_to_attention=True)
    visible = [ax for ax in figure.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["layer 2", "layer 5", "layer 7"]
    for ax, row in zip(visible, weights, strict=True):
        drawn = [line for line in ax.get_lines() if len(line.get_xdata()) > 2]
        for line, w in zip(drawn, row, strict=True):
            np.testing.assert_allclose(line.get_ydata(), w * sigma * (1 - sigma), atol=1e-12)
    assert "g(σ) − σ" in figure.get_supylabel()


@pytest.mark.parametrize("depth", [2, 4, 5])
def test_layer_axes_tick_only_whole_layers_and_the_last_layer_is_named(depth):
    reports = _depth_reports(depth)
    for metric in ("token_cosine_similarity", "attention_similarity"):
        figure = plot_layer_metric(reports, metric)
        ticks = [t for t in figure.axes[0].get_xticks() if -0.01 <= t <= depth + 0.01]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
    assert plot_singular_spectra(reports).axes[0].get_title() == f"layer {depth} (last)"
    assert plot_singular_spectra(reports, layer=1).axes[0].get_title() == "layer 1"


def test_a_model_whose_lines_lie_on_another_is_said_in_every_figure_drawing_both(tmp_path):
    config = TransformerConfig(dim=8, depth=3, num_heads=2, vocab_size=30)
    plain = Transformer(config)
    # GFSA at initialisation, on the same weights: the attention it filters, to round-off.
    filtered = Transformer(TransformerConfig(**{**config.to_dict(), "attention": "gfsa"}))
    missing = filtered.load_state_dict(plain.state_dict(), strict=False).missing_keys
    assert missing and all(key.rsplit(".", 1)[-1] in ("w0", "w1", "wK") for key in missing)
    batches = [{"input_ids": torch.randint(1, 30, (3, 7))}]
    reports = [diagnose(plain, batches, label="plain"), diagnose(filtered, batches, label="gfsa")]
    plot_report(reports, tmp_path, formats=["svg"])
    for name in ("cosine_similarity", "frequency_response", "gfsa_filters_gfsa"):
        assert (tmp_path / f"{name}.svg").is_file()
    notes = figure_notes(reports)
    assert notes["cosine_similarity"].startswith("gfsa lies on plain: the same values")
    assert "g(σ) = σ" in notes["frequency_response"]
    assert "untrained" in notes["gfsa_filters_gfsa"]
    # Models that differ get no note.
    different = _depth_reports(3)
    assert not figure_notes(different)["cosine_similarity"]


def figure_notes(reports):
    """Each figure's title as plot_report draws it."""
    drawn = {}

    def keep(figure, path, formats=None):
        drawn[Path(path).name] = figure._suptitle.get_text() if figure._suptitle else ""
        return []

    with pytest.MonkeyPatch.context() as patcher:
        patcher.setattr(figures_module, "save_figure", keep)
        plot_report(reports, "unused")
    return drawn
