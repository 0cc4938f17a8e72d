"""Figures of :class:`DiagnosticsReport` s: the plots every over-smoothing paper rests on.

Figures are built with :class:`matplotlib.figure.Figure` directly, never through ``pyplot``, so
no global backend is touched: saving renders with Agg, and notebooks display them as they are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from torch import Tensor

from .coinciding import coincidence_note, coinciding_reports, untrained_gfsa
from .figure_labels import layer_title, wrap_title
from .learned_filters import agf_polynomial_responses
from .report import DiagnosticsReport, LearnedFilterCurves

__all__ = [
    "FIGURE_FORMATS",
    "LAYER_METRICS",
    "LEARNED_FILTER_FIGURES",
    "REPORT_FIGURES",
    "SAVED_FORMATS",
    "plot_agf_polynomials",
    "plot_frequency_comparison",
    "plot_frequency_responses",
    "plot_layer_metric",
    "plot_learned_filters",
    "plot_report",
    "plot_singular_spectra",
    "save_figure",
]

#: Per-layer metrics of a report over hidden states, and their axis labels.
LAYER_METRICS = {
    "token_cosine_similarity": "cosine similarity",
    "identical_token_distance": "d_M(H)",
    "relative_identical_token_distance": "d_M(H) / ‖H‖_F",
    "high_low_frequency_ratio": "high / low frequency",
    "effective_rank": "effective rank",
    "attention_similarity": "attention map similarity",
    "layer_norm_product": "σ1σ2",
}
#: The figures :func:`plot_report` may write, by file name without suffix; and the prefixes of
#: its per-model learned filter grids (``gfsa_filters_<label>``).
REPORT_FIGURES = (
    "cosine_similarity",
    "identical_token_distance",
    "effective_rank",
    "singular_spectrum",
    "frequency_response",
    "attention_similarity",
    "layer_norm_sigma",
)
LEARNED_FILTER_FIGURES = ("gfsa_filters_", "agf_filters_")
#: File formats :func:`save_figure` writes by default, and those it can write.
FIGURE_FORMATS = ("png", "svg")
SAVED_FORMATS = ("png", "svg", "pdf")


def _axes(ax: Axes | None, size: tuple[float, float] = (4.5, 3.2)) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax
    figure = Figure(figsize=size, layout="constrained")
    return figure, figure.add_subplot()


def _as_list(reports: DiagnosticsReport | Iterable[DiagnosticsReport]) -> list[DiagnosticsReport]:
    return [reports] if isinstance(reports, DiagnosticsReport) else list(reports)


def plot_layer_metric(
    reports: DiagnosticsReport | Iterable[DiagnosticsReport],
    metric: str = "token_cosine_similarity",
    *,
    ax: Axes | None = None,
) -> Figure:
    """A per-layer metric against depth, one line per model on the same axes.

    Args:
        reports: one report or several (e.g. a model with and without a method).
        metric: one of :data:`LAYER_METRICS`.
        ax: axes to draw on; a new figure when None.

    Returns:
        The figure.
    """
    if metric not in LAYER_METRICS:
        raise ValueError(f"metric must be one of {tuple(LAYER_METRICS)}; got {metric!r}")
    figure, ax = _axes(ax)
    layers: list[int] = []
    for report in _as_list(reports):
        values = getattr(report, metric)
        if values is None:
            continue
        # Hidden-state metrics start at the embeddings (layer 0); layer metrics at layer 1.
        first = 0 if len(values) == report.num_layers + 1 else 1
        layers += [first, first + len(values) - 1]
        ax.plot(range(first, first + len(values)), values, marker="o", ms=3, label=report.label)
    _whole_number_ticks(ax, layers)
    ax.set_xlabel("layer (0 = embeddings)")
    ax.set_ylabel(LAYER_METRICS[metric])
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return figure


def _whole_number_ticks(ax: Axes, values: Sequence[int], most: int = 12) -> None:
    """Ticks on the x axis at whole numbers only: every one from the least to the greatest of
    ``values`` when there are at most ``most``, else integer steps chosen by matplotlib."""
    if not values:
        return
    low, high = min(values), max(values)
    if high - low < most:
        ax.set_xticks(range(low, high + 1))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def plot_singular_spectra(
    reports: DiagnosticsReport | Iterable[DiagnosticsReport],
    *,
    layer: int = -1,
    pooled: bool = False,
    ax: Axes | None = None,
) -> Figure:
    """Normalised singular values ``σ_i/σ_1`` of one layer's features, one line per model.

    Args:
        reports: one report or several.
        layer: index into the hidden states (0 = embeddings, −1 = last layer).
        pooled: plot the spectrum of every token of every sample together (last layer only)
            instead of the mean per-sample spectrum.
        ax: axes to draw on.
    """
    figure, ax = _axes(ax)
    reports = _as_list(reports)
    layers = set()
    for report in reports:
        values = report.pooled_singular_spectrum if pooled else report.singular_spectrum[layer]
        index = range(report.num_layers + 1)[layer]  # −1 named by its index: the last layer
        layers.add(index)
        label = report.label if pooled or len(set(r.num_layers for r in reports)) == 1 else (
            f"{report.label} (layer {index})")
        ax.plot(range(1, len(values) + 1), values, label=label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # singular values are counted
    ax.set_xlabel("singular value index")
    ax.set_ylabel("σ_i / σ_1")
    if pooled:
        title = "every token pooled, last layer"
    elif len(layers) == 1:
        (index,) = layers
        title = f"layer {index}" + (" (last)" if index == reports[0].num_layers else "")
    else:
        title = "each model's layer, as labelled"
    ax.set_title(title, fontsize="small")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return figure


def plot_frequency_responses(
    reports: DiagnosticsReport | Iterable[DiagnosticsReport],
    *,
    layer: int | None = None,
    relative_to: str | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Normalised frequency response of the attention filters, one line per model.

    Every attention is a low-pass filter with gain 1 at frequency 0: on a linear scale the
    methods are one spike drawn on top of each other. The gains are drawn on a log scale, or,
    with ``relative_to``, as differences from one model's, where the methods separate.

    Args:
        reports: one report or several (those without responses are skipped).
        layer: 0-based attention layer (-1: each model's last); None averages the responses of
            every layer.
        relative_to: the label of the report to subtract (it is not drawn itself; read on each
            model's frequency grid where the grids differ); None draws the gains themselves.
        ax: axes to draw on.

    Raises:
        ValueError: when no report with a frequency response is labelled ``relative_to``.
    """
    figure, ax = _axes(ax)
    measured = [r for r in _as_list(reports) if r.frequency_response is not None]

    def gains(report: DiagnosticsReport) -> Tensor:
        responses = torch.tensor(report.frequency_response, dtype=torch.float64)
        return responses.nanmean(dim=0) if layer is None else responses[layer]

    reference = None
    if relative_to is not None:
        matches = [r for r in measured if r.label == relative_to]
        if not matches:
            raise ValueError(f"relative_to must be the label of a report with a frequency "
                             f"response, one of {[r.label for r in measured]}; got "
                             f"{relative_to!r}")
        reference = matches[0]
    for index, report in enumerate(measured):
        if report.label == relative_to:
            continue
        values = gains(report)
        if reference is not None:
            # Models diagnosed on other inputs (--compare) have other grids: the reference is
            # read on each model's grid, periodically, as the responses are (frequency.py).
            values = values - torch.from_numpy(np.interp(
                report.frequencies, reference.frequencies, gains(reference).numpy(),
                period=1.0))
        # A model keeps its colour whether or not the reference is drawn beside it.
        ax.plot(report.frequencies, values.tolist(), label=report.label, color=f"C{index % 10}")
    ax.set_xlabel("frequency (cycles per token)")
    where = ("mean over layers" if layer is None else "last attention layer" if layer == -1
             else f"attention layer {layer}")
    if reference is None:
        ax.set_yscale("log")
        ax.set_ylabel("normalised gain (log scale)")
        ax.set_title(where, fontsize="small")
    else:
        ax.axhline(0.0, color="0.4", lw=0.8, label=f"_{relative_to}")
        ax.set_ylabel(wrap_title(f"gain − gain of {relative_to}", 32))
        ax.set_title(wrap_title(f"difference from {relative_to}, {where}", 40),
                     fontsize="small")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    return figure


def plot_frequency_comparison(
    reports: DiagnosticsReport | Iterable[DiagnosticsReport],
    *,
    layer: int | None = None,
    reference: str | None = None,
) -> Figure:
    """The frequency responses on a log scale and, beside them, every model's difference from
    a reference model's.

    Args:
        reports: one report or several (those without responses are skipped); one panel when
            fewer than two have a response.
        layer: 0-based attention layer; None averages the responses of every layer.
        reference: the label of the model subtracted (a baseline); the first model with a
            response (the unpatched one, as ``diagnose`` orders them) when None.
    """
    measured = [r for r in _as_list(reports) if r.frequency_response is not None]
    if len(measured) < 2:
        return plot_frequency_responses(measured, layer=layer)
    figure = Figure(figsize=(9.0, 3.4), layout="constrained")
    gains, difference = figure.subplots(1, 2)
    plot_frequency_responses(measured, layer=layer, ax=gains)
    plot_frequency_responses(measured, layer=layer, ax=difference,
                             relative_to=measured[0].label if reference is None else reference)
    return figure


def _grid(count: int, columns: int) -> tuple[Figure, list[Axes]]:
    columns = max(1, min(columns, count))
    rows = math.ceil(count / columns)
    figure = Figure(figsize=(2.4 * columns, 1.9 * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False, sharex=True).ravel().tolist()
    for extra in axes[count:]:
        extra.set_visible(False)
    return figure, axes[:count]


def plot_learned_filters(
    curves: Sequence[LearnedFilterCurves],
    *,
    columns: int = 4,
    relative_to_attention: bool = False,
    title: str | None = None,
) -> Figure:
    """A per-layer grid of learned filter responses ``g(σ)``, one line per head.

    Each panel is titled by the layer's index read from its module path (``layer 0`` for
    ``encoder.layer.0.attention.self``).

    Args:
        curves: one entry per layer (``DiagnosticsReport.gfsa_filters`` or ``agf_filters``).
        columns: subplots per row.
        relative_to_attention: draw ``g(σ) − σ``, the departure from the attention the filter
            starts as (GFSA's ``w1 = 1``, ``w0 = wK = 0``); ``g(σ)`` itself is a near-straight
            line whose change is too small to see.
        title: the figure's title (e.g. the model's label).
    """
    if not curves:
        raise ValueError("curves must hold at least one layer's learned filter")
    figure, axes = _grid(len(curves), columns)
    for ax, curve in zip(axes, curves, strict=True):
        sigma = torch.tensor(curve.sigma, dtype=torch.float64)
        for head, response in enumerate(curve.response):
            values = torch.tensor(response, dtype=torch.float64)
            if relative_to_attention:
                values = values - sigma
            ax.plot(curve.sigma, values.tolist(), lw=1, label=f"head {head}")
        ax.axhline(0.0, color="0.6", lw=0.5)
        ax.set_title(layer_title(curve.name), fontsize="x-small")
        ax.tick_params(labelsize="x-small")
    figure.supxlabel("σ (graph frequency)" + (
        "; g(σ) − σ = 0 is the attention the filter starts as" if relative_to_attention
        else ""), fontsize="small")
    figure.supylabel("g(σ) − σ" if relative_to_attention else "g(σ)", fontsize="small")
    if title:
        figure.suptitle(wrap_title(title, 20 * min(columns, len(curves))), fontsize="small")
    return figure


def plot_agf_polynomials(
    theta: Tensor,
    basis: str = "jacobi",
    a: float = 1.0,
    b: float = 1.0,
    *,
    num_points: int = 101,
    names: Sequence[str] | None = None,
    ax: Axes | None = None,
) -> Figure:
    """AGF's learned polynomial filters ``Σ_k θ_k P_k(σ)``, one line per layer.

    Args:
        theta: ``(K+1,)`` or ``(L, K+1)`` coefficients, ``θ_0`` first.
        basis, a, b: the polynomial basis (see :func:`agf_polynomial_responses`).
        num_points: frequencies sampled in ``[0, 1]``.
        names: one label per layer (``layer 0``, … when None).
        ax: axes to draw on.
    """
    sigma, responses = agf_polynomial_responses(theta, basis, a, b, num_points)
    if names is not None and len(names) != len(responses):
        raise ValueError(
            f"names must have one entry per layer ({len(responses)}); got {len(names)}"
        )
    figure, ax = _axes(ax)
    for index, response in enumerate(responses):
        ax.plot(sigma, response, label=names[index] if names else f"layer {index}")
    ax.set_xlabel("σ (singular value)")
    ax.set_ylabel("G(σ)")
    ax.set_title(f"{basis} basis", fontsize="small")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small")
    return figure


def save_figure(
    figure: Figure, path: str | Path, formats: Sequence[str] = FIGURE_FORMATS, *, dpi: int = 150
) -> list[Path]:
    """Write ``figure`` as ``path`` with each suffix in ``formats`` (``png``, ``svg``, ``pdf``).

    Returns:
        The written paths.
    """
    bad = [f for f in formats if f not in SAVED_FORMATS]
    if bad or not formats:
        raise ValueError(f"formats must be a non-empty selection of {SAVED_FORMATS}; got "
                         f"{list(formats)}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix in formats:
        target = path.with_suffix(f".{suffix}")
        figure.savefig(target, dpi=dpi)
        written.append(target)
    return written


def plot_report(
    reports: DiagnosticsReport | Iterable[DiagnosticsReport],
    directory: str | Path,
    formats: Sequence[str] = FIGURE_FORMATS,
) -> Mapping[str, list[Path]]:
    """Every figure the reports support, written into ``directory``.

    Writes ``cosine_similarity``, ``identical_token_distance``, ``effective_rank``,
    ``singular_spectrum`` and, when measured, ``frequency_response`` (log-scale gains and each
    model's difference from the first, :func:`plot_frequency_comparison`),
    ``attention_similarity``, ``layer_norm_sigma`` and a ``gfsa_filters_<label>`` (``g(σ) − σ``)
    / ``agf_filters_<label>`` grid per model with GFSA / AGF layers. A figure in which one
    model's lines lie on another's says so in its title (see
    :func:`~filterformer.diagnostics.coinciding.coincidence_note`).

    Returns:
        The written paths by figure name.
    """
    reports = _as_list(reports)
    directory = Path(directory)
    figures: dict[str, Figure] = {
        "cosine_similarity": plot_layer_metric(reports, "token_cosine_similarity"),
        "identical_token_distance": plot_layer_metric(
            reports, "relative_identical_token_distance"
        ),
        "effective_rank": plot_layer_metric(reports, "effective_rank"),
        "singular_spectrum": plot_singular_spectra(reports),
    }
    if any(r.frequency_response is not None for r in reports):
        figures["frequency_response"] = plot_frequency_comparison(reports)
    if any(r.attention_similarity for r in reports):
        figures["attention_similarity"] = plot_layer_metric(reports, "attention_similarity")
    if any(r.layer_norm_product is not None for r in reports):
        figures["layer_norm_sigma"] = plot_layer_metric(reports, "layer_norm_product")
    for figure in figures.values():
        _note_coinciding(figure, reports)
    for report in reports:
        if report.gfsa_filters:
            title = f"{report.label}: learned GFSA filters"
            if untrained_gfsa(report):
                title += " (untrained: every g(σ) is still σ, the attention itself)"
            figures[f"gfsa_filters_{_slug(report.label)}"] = plot_learned_filters(
                report.gfsa_filters, relative_to_attention=True, title=title)
        if report.agf_filters:
            figures[f"agf_filters_{_slug(report.label)}"] = plot_learned_filters(
                report.agf_filters, title=f"{report.label}: learned AGF filters")
    return {name: save_figure(fig, directory / name, formats) for name, fig in figures.items()}


def _note_coinciding(figure: Figure, reports: Sequence[DiagnosticsReport]) -> None:
    """Title ``figure`` with a note for each drawn line that lies on another drawn line."""
    drawn = {line.get_label() for ax in figure.axes for line in ax.get_lines()}
    notes = [coincidence_note(later, earlier) for later, earlier in coinciding_reports(reports)
             if later.label in drawn and earlier.label in drawn]
    if notes:
        width = int(figure.get_figwidth() * 14)
        figure.suptitle("\n".join(wrap_title(note, width) for note in notes),
                        fontsize="x-small", color="0.25")


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)
