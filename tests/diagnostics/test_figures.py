import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch
from scipy.special import eval_jacobi

from filterformer.diagnostics import diagnose
from filterformer.diagnostics.figures import (
    plot_agf_polynomials,
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
