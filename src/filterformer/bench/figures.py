"""``bench.png``: time and extra memory against N, log-log, a line per method (drawn on a
``Figure``, never through ``pyplot``: no display needed, the caller's backend left alone)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib import colormaps
from matplotlib.figure import Figure

from ..atomic_files import atomic_write
from .method_table import BENCH_METHODS
from .records import BenchRecord
from .step_cases import ALL_MODES

__all__ = ["plot_records"]

_LINESTYLES = {"kernel": "-", "module": "--", "model": ":"}
_QUANTITIES = (("median_ms", "time per step (ms)"), ("peak_mb", "extra memory per step (MiB)"))


def plot_records(records: list[BenchRecord], path: str | Path,
                 machine: dict[str, Any] | None = None) -> Path:
    """Rows time and memory, a column per mode; kernels solid, modules dashed, models dotted;
    the title names ``machine``'s GPU, else its CPU. Written whole or not at all."""
    modes = [m for m in ALL_MODES if any(r.mode == m for r in records)]
    if not modes:
        raise ValueError("records must hold at least one configuration to plot")
    names = [n for n in BENCH_METHODS if any(r.method == n for r in records)]
    palette = colormaps["tab20"]  # its pairs are similar shades: the dark ones first
    colors = {n: palette((*range(0, 20, 2), *range(1, 20, 2))[i % 20]) for i, n in enumerate(names)}
    fig = Figure(figsize=(6.5 * len(modes) + 2.5, 9))
    axes = fig.subplots(len(_QUANTITIES), len(modes), squeeze=False)
    for col, mode in enumerate(modes):
        for row, (quantity, label) in enumerate(_QUANTITIES):
            ax = axes[row][col]
            for name in names:
                points = sorted((r.N, getattr(r, quantity)) for r in records
                                if (r.method, r.mode) == (name, mode) and r.measured
                                and (getattr(r, quantity) or 0) > 0)
                if points:
                    ax.plot(*zip(*points, strict=True), marker="o", markersize=3, label=name,
                            linestyle=_LINESTYLES[BENCH_METHODS[name].level], color=colors[name])
            ax.set(xscale="log", yscale="log", xlabel="N (tokens)", ylabel=label,
                   title=f"{mode}: {label}")
            ax.set_xscale("log", base=2)
            ax.grid(True, which="both", alpha=0.3)
    legend = {t: h for ax in axes.flat for h, t in zip(*ax.get_legend_handles_labels(),
                                                       strict=True)}
    fig.legend(list(legend.values()), list(legend), loc="center right", fontsize=8)
    where = (machine or {}).get("gpu") or (machine or {}).get("cpu")
    if where:
        fig.suptitle(f"filterformer bench on {where}")
    fig.tight_layout(rect=(0, 0, 0.8, 0.97 if where else 1))
    atomic_write(Path(path), lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    return Path(path)
