"""Log-log plot of time and extra memory against N, one line per method.

Built on :class:`matplotlib.figure.Figure` directly, never through ``pyplot``, so plotting needs
no display and leaves the caller's matplotlib backend alone.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib import colormaps
from matplotlib.figure import Figure

from .config import MODES
from .methods import BENCH_METHODS
from .records import BenchRecord

__all__ = ["plot_records"]

_LINESTYLES = {"kernel": "-", "module": "--", "model": ":"}
_QUANTITIES = (("median_ms", "time per step (ms)"), ("peak_mb", "extra memory per step (MiB)"))


def plot_records(records: list[BenchRecord], path: str | Path) -> Path:
    """Save a grid of log-log plots: rows time and memory, columns the modes present.

    Kernels are solid lines, modules dashed, models dotted; skipped configurations leave gaps.

    Args:
        records: the run.
        path: the PNG to write.

    Returns:
        ``path``.
    """
    path = Path(path)
    modes = [m for m in MODES if any(r.mode == m for r in records)]
    if not modes:
        raise ValueError("records must hold at least one configuration to plot")
    names = [n for n in BENCH_METHODS if any(r.method == n for r in records)]
    # tab20 pairs similar shades; taking the dark ones first keeps neighbours apart.
    palette = colormaps["tab20"]
    colors = [palette(i) for i in (*range(0, 20, 2), *range(1, 20, 2))]
    fig = Figure(figsize=(6.5 * len(modes) + 2.5, 9))
    axes = fig.subplots(len(_QUANTITIES), len(modes), squeeze=False)
    for col, mode in enumerate(modes):
        for row, (quantity, label) in enumerate(_QUANTITIES):
            ax = axes[row][col]
            for index, name in enumerate(names):
                points = sorted(
                    (r.N, getattr(r, quantity)) for r in records
                    if r.method == name and r.mode == mode and r.measured
                    and getattr(r, quantity) is not None and getattr(r, quantity) > 0
                )
                if not points:
                    continue
                lengths, values = zip(*points, strict=True)
                ax.plot(
                    lengths, values, marker="o", markersize=3, label=name,
                    linestyle=_LINESTYLES[BENCH_METHODS[name].level], color=colors[index % 20],
                )
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("N (tokens)")
            ax.set_ylabel(label)
            ax.set_title(f"{mode}: {label}")
            ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes.flat:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            if text not in labels:
                handles.append(handle)
                labels.append(text)
    fig.legend(handles, labels, loc="center right", fontsize=8)
    fig.tight_layout(rect=(0, 0, 0.8, 1))
    fig.savefig(path, dpi=120)
    return path
