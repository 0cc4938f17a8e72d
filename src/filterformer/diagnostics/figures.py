"""Figures of :class:`DiagnosticsReport` s: the plots every over-smoothing paper rests on.

Figures are built with :class:`matplotlib.figure.Figure` directly, never through ``pyplot``, so
no global backend is touched: saving renders with Agg, and notebooks display them as they are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch import Tensor

from .learned_filters import agf_polynomial_responses
from .report import DiagnosticsReport, LearnedFilterCurves

__all__ = [
    "FIGURE_FORMATS",
    "LAYER_METRICS",
    "plot_agf_polynomials",
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
#: File formats :func:`save_figure` writes by default.
FIGURE_FORMATS = ("png", "svg")


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
    for report in _as_list(reports):
        values = getattr(report, metric)
        if values is None:
            continue
        # Hidden-state metrics start at the embeddings (layer 0); layer metrics at layer 1.
        first = 0 if len(values) == report.num_layers + 1 else 1
        ax.plot(range(first, first + len(values)), values, marker="o", ms=3, label=report.label)
    ax.set_xlabel("layer (0 = embeddings)")
    ax.set_ylabel(LAYER_METRICS[metric])
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return figure


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
    for report in _as_list(reports):
        values = report.pooled_singular_spectrum if pooled else report.singular_spectrum[layer]
        ax.plot(range(1, len(values) + 1), values, label=report.label)
    ax.set_xlabel("singular value index")
    ax.set_ylabel("σ_i / σ_1")
    ax.set_title("pooled, last layer" if pooled else f"layer {layer}", fontsize="small")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return figure


def plot_frequency_responses(
    reports: DiagnosticsReport | Iterable[DiagnosticsReport],
    *,
    layer: int | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Normalised frequency response of the attention filters, one line per model.

    Args:
        reports: one report or several (those without responses are skipped).
        layer: 0-based attention layer; None averages the responses of every layer.
        ax: axes to draw on.
    """
    figure, ax = _axes(ax)
    for report in _as_list(reports):
        if report.frequency_response is None:
            continue
        responses = torch.tensor(report.frequency_response)
        values = responses.nanmean(dim=0) if layer is None else responses[layer]
        ax.plot(report.frequencies, values.tolist(), label=report.label)
    ax.set_xlabel("frequency (cycles per token)")
    ax.set_ylabel("normalised magnitude")
    ax.set_title("mean over layers" if layer is None else f"attention layer {layer}",
                 fontsize="small")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return figure


def _grid(count: int, columns: int) -> tuple[Figure, list[Axes]]:
    columns = max(1, min(columns, count))
    rows = math.ceil(count / columns)
    figure = Figure(figsize=(2.4 * columns, 1.9 * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False, sharex=True).ravel().tolist()
    for extra in axes[count:]:
        extra.set_visible(False)
    return figure, axes[:count]


def plot_learned_filters(curves: Sequence[LearnedFilterCurves], *, columns: int = 4) -> Figure:
    """A per-layer grid of learned filter responses ``g(σ)``, one line per head.

    Args:
        curves: one entry per layer (``DiagnosticsReport.gfsa_filters`` or ``agf_filters``).
        columns: subplots per row.
    """
    if not curves:
        raise ValueError("curves must hold at least one layer's learned filter")
    figure, axes = _grid(len(curves), columns)
    for index, (ax, curve) in enumerate(zip(axes, curves, strict=True)):
        for head, response in enumerate(curve.response):
            ax.plot(curve.sigma, response, lw=1, label=f"head {head}")
        ax.axhline(0.0, color="0.6", lw=0.5)
        ax.set_title(f"layer {index}: {curve.name}", fontsize="x-small")
        ax.tick_params(labelsize="x-small")
    figure.supxlabel("σ (graph frequency)", fontsize="small")
    figure.supylabel("g(σ)", fontsize="small")
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
    valid = ("png", "svg", "pdf")
    bad = [f for f in formats if f not in valid]
    if bad or not formats:
        raise ValueError(f"formats must be a non-empty selection of {valid}; got {list(formats)}")
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
    ``singular_spectrum`` and, when measured, ``frequency_response``, ``attention_similarity``,
    ``layer_norm_sigma`` and a ``gfsa_filters_<label>`` / ``agf_filters_<label>`` grid per
    model with GFSA / AGF layers.

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
        figures["frequency_response"] = plot_frequency_responses(reports)
    if any(r.attention_similarity for r in reports):
        figures["attention_similarity"] = plot_layer_metric(reports, "attention_similarity")
    if any(r.layer_norm_product is not None for r in reports):
        figures["layer_norm_sigma"] = plot_layer_metric(reports, "layer_norm_product")
    for report in reports:
        for kind, curves in (("gfsa", report.gfsa_filters), ("agf", report.agf_filters)):
            if curves:
                figures[f"{kind}_filters_{_slug(report.label)}"] = plot_learned_filters(curves)
    return {name: save_figure(fig, directory / name, formats) for name, fig in figures.items()}


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)
