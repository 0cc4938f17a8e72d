"""The key figures the document draws itself, across a claim's comparisons.

- ``trend``: metrics against a value that changes from setting to setting (the depth), one line
  per method (line style per group, e.g. the LayerNorm position), one panel per metric;
- ``layers``: the token cosine similarity after each layer, one panel per setting, one line per
  method.

Every point is the mean over seeds with its 95 % Student-t interval. A claim's drawn figure is
``figures/<id>_<kind>.png`` in its first setting's results directory; a ``file`` figure is one
that compare wrote there.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from scipy.stats import t as student_t

from ..diagnostics.figures import save_figure
from ..training.compare.comparison_results import ComparisonResults
from ..training.compare.statistics import CONFIDENCE
from .claims import Claim, Setting
from .numbers import metric_label, metric_scale

__all__ = ["claim_figure_path", "draw_claim_figure", "figure_caption", "mean_interval"]

#: Line styles of a trend's groups, in order of appearance.
_LINE_STYLES = ("-", "--", ":", "-.")
#: A comparison of a claim: its setting and its results (None: not run yet).
Comparison = tuple[Setting, ComparisonResults | None]


def mean_interval(values: Sequence[float | None]) -> tuple[float, float, float] | None:
    """The mean of the finite ``values`` and its 95 % Student-t interval ``(mean, low, high)``
    (the interval is the mean itself for one value); None without a finite value."""
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return None
    mean = statistics.fmean(finite)
    if len(finite) < 2:
        return mean, mean, mean
    half = float(student_t.ppf((1 + CONFIDENCE) / 2, len(finite) - 1)) \
        * statistics.stdev(finite) / math.sqrt(len(finite))
    return mean, mean - half, mean + half


def claim_figure_path(claim: Claim, results_root: str | Path) -> Path | None:
    """Where the claim's key figure is (``file``) or is drawn (``trend``, ``layers``): in the
    first setting's results directory; None when the claim has no figure."""
    if claim.figure is None:
        return None
    first = Path(results_root) / claim.settings[0].results
    if claim.figure.kind == "file":
        return first / claim.figure.file
    return first / "figures" / f"{claim.id}_{claim.figure.kind}.png"


def figure_caption(claim: Claim, comparisons: Sequence[Comparison]) -> str:
    """What the claim's key figure shows, in words (with the x values of a trend)."""
    figure = claim.figure
    if figure is None or figure.kind == "file":
        return ""
    interval = f"mean and {CONFIDENCE * 100:.0f} % Student-t interval over seeds"
    if figure.kind == "layers":
        return (f"Token cosine similarity after each layer (0 = the embeddings), {interval}; "
                "one panel per setting, one line per method.")
    xs = [_single_value(r, figure.x, f"claim {claim.id}, setting {s.results}")
          for s, r in comparisons if r is not None]
    metrics = ", ".join(metric_label(m) for m in figure.metrics)
    metrics = metrics[0].upper() + metrics[1:]
    grouped = f", line style per {figure.group}" if figure.group else ""
    return (f"{metrics} against {figure.x} ({', '.join(map(str, xs))}), {interval}; one line "
            f"per method{grouped}, one panel per metric.")


def _panels(count: int, size: tuple[float, float] = (4.6, 3.4)) -> tuple[Figure, list[Axes]]:
    figure = Figure(figsize=(size[0] * count, size[1]), layout="constrained")
    return figure, list(figure.subplots(1, count, squeeze=False)[0])


def _draw_line(ax: Axes, xs: Sequence[float], points: Sequence[tuple[float, float, float]],
               scale: float, *, band: bool, **style: Any) -> None:
    """Means joined by a line, their intervals as a shaded band or as error bars."""
    means, lows, highs = ([p[i] * scale for p in points] for i in range(3))
    if band:
        (line,) = ax.plot(xs, means, marker="o", markersize=3, **style)
        ax.fill_between(xs, lows, highs, color=line.get_color(), alpha=0.12, linewidth=0)
    else:
        errors = [[m - lo for m, lo in zip(means, lows, strict=True)],
                  [hi - m for m, hi in zip(means, highs, strict=True)]]
        ax.errorbar(xs, means, yerr=errors, marker="o", capsize=3, **style)


def _single_value(results: ComparisonResults, path: str, where: str) -> Any:
    """A trend's x or group value: a number, text, a bool or null, not a mapping or list."""
    value = results.value_at(path, where)
    if isinstance(value, (dict, list)):
        raise ValueError(f"{where}: {path!r} is {value!r} in results.json, not a single value "
                         "(a number or text) to draw along: name a path to one")
    return value


def _check_run_key(claim: Claim, ran: Sequence[Comparison], key: str) -> None:
    """A trend's metric must be a number (or null) in the run records, and in one at least:
    a misspelt key would draw an empty panel."""
    present: set[str] = set()
    for setting, results in ran:
        for run in results.runs:
            present.update(run)
            value = run.get(key)
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, (int, float))):
                raise ValueError(f"claim {claim.id}, setting {setting.results}: run-record key "
                                 f"{key!r} of method {run['method']}, seed {run['seed']} is "
                                 f"{value!r}, not a number")
    if key not in present:
        raise ValueError(f"claim {claim.id}: the trend's metric {key!r} is in no run record; "
                         f"run-record keys: {', '.join(sorted(present))}")


def _draw_trend(claim: Claim, comparisons: Sequence[Comparison]) -> Figure:
    spec = claim.figure
    ran = [(s, r) for s, r in comparisons if r is not None]
    x_of = {s.results: _single_value(r, spec.x, f"claim {claim.id}, setting {s.results}")
            for s, r in ran}
    group_of = {s.results: (_single_value(r, spec.group, f"claim {claim.id}, setting "
                                          f"{s.results}") if spec.group else None)
                for s, r in ran}
    numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in x_of.values())
    categories = list(dict.fromkeys(map(str, x_of.values())))
    methods = list(dict.fromkeys(m for _, r in ran for m in r.methods))
    groups = list(dict.fromkeys(group_of.values()))
    colors = {m: f"C{i % 10}" for i, m in enumerate(methods)}
    for metric in spec.metrics:
        _check_run_key(claim, ran, metric)
    figure, axes = _panels(len(spec.metrics))
    for ax, metric in zip(axes, spec.metrics, strict=True):
        scale, unit = metric_scale(metric)
        for method in methods:
            for g, group in enumerate(groups):
                line = []
                for setting, results in ran:
                    if group_of[setting.results] != group or method not in results.methods:
                        continue
                    point = mean_interval(list(results.seed_values(method, metric).values()))
                    x = x_of[setting.results]
                    if point is not None:
                        line.append((x if numeric else categories.index(str(x)), point))
                if not line:
                    continue
                line.sort(key=lambda item: item[0])
                label = method if group is None else f"{method}, {group}"
                _draw_line(ax, [x for x, _ in line], [p for _, p in line], scale, band=False,
                           color=colors[method], linestyle=_LINE_STYLES[g % len(_LINE_STYLES)],
                           label=label)
        if numeric:
            ax.set_xticks(sorted(set(x_of.values())))
        else:
            ax.set_xticks(range(len(categories)), categories)
        ax.set_xlabel(spec.x_label or spec.x)
        ax.set_ylabel(metric_label(metric) + (f" ({unit})" if unit else ""))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize="x-small")
    return figure


def _draw_layers(comparisons: Sequence[Comparison]) -> Figure:
    ran = [(s, r) for s, r in comparisons if r is not None]
    figure, axes = _panels(len(ran))
    for ax, (setting, results) in zip(axes, ran, strict=True):
        for method in results.methods:
            curves = [c for c in results.seed_values(method, "cosine_similarity_per_layer")
                      .values() if c]
            if not curves:
                continue
            layers = min(map(len, curves))
            points = [mean_interval([c[i] for c in curves]) or (math.nan,) * 3
                      for i in range(layers)]
            _draw_line(ax, list(range(layers)), points, 1.0, band=True, label=method)
        ax.set_title(setting.label, fontsize="medium")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("layer (0 = embeddings)")
        ax.set_ylabel("token cosine similarity")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small")
    return figure


def draw_claim_figure(claim: Claim, comparisons: Sequence[Comparison], path: Path) -> Path | None:
    """Draw the claim's ``trend`` or ``layers`` figure as the PNG ``path`` from the comparisons
    that have run; None (nothing drawn) for a ``file`` figure, no figure, or no results yet.

    Raises:
        ValueError: naming the claim: a trend's path or metric is not in the results, or the
            figure cannot be written (naming ``path``).
    """
    if claim.figure is None or claim.figure.kind == "file":
        return None
    if all(results is None for _, results in comparisons):
        return None
    figure = (_draw_trend(claim, comparisons) if claim.figure.kind == "trend"
              else _draw_layers(comparisons))
    try:
        return save_figure(figure, path, formats=("png",), dpi=110)[0]
    except OSError as err:
        raise ValueError(f"claim {claim.id}: its figure {path} cannot be written: "
                         f"{err.strerror or err} ({err.filename or path})") from None
