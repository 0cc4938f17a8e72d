"""``bench.md``: the machine, time and memory tables, the targets, what one step runs, what
failed and what was skipped; on CUDA every heading names the GPU."""

from __future__ import annotations

from typing import Any

from .method_table import get_method
from .records import BenchRecord
from .step_cases import ALL_MODES
from .targets import Target, TargetResult

__all__ = ["markdown_report", "quantity_table", "targets_table"]

_MODE_TITLES = {"train": "training (forward + backward)", "inference": "inference (forward)",
                "compiled": "compiled training (forward + backward)"}
_METHOD = ("- Time: the median over rounds of a block's mean step; a target's cases alternate in "
           "rounds, its ratio the median of the rounds' ratios (middle half in parentheses). "
           "Memory: the first full-size step's extra memory (CPU: peak RSS growth; CUDA: peak "
           "allocated). How: docs/bench.md.")


def _find(records: list[BenchRecord], method: str, N: int, mode: str) -> BenchRecord | None:
    return next((r for r in records if (r.method, r.N, r.mode) == (method, N, mode)), None)


def _number(value: float) -> str:
    if 0 < abs(value) < 0.01:
        return f"{value:.1e}"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _value_text(value: float, target: Target) -> str:
    """``value`` as :func:`_number` writes it, with more decimals (up to six) where that would
    read as the bound itself: 0.9494 against ``>= 0.95`` is a miss, and reads 0.949."""
    text, decimals = _number(value), 2
    while (target.direction != "info" and value != target.bound and decimals < 6
           and float(text) == target.bound):
        decimals += 1
        text = f"{value:.{decimals}f}"
    return text


def _cell(records: list[BenchRecord], record: BenchRecord | None, quantity: str) -> str:
    value = None if record is None else getattr(record, quantity)
    if record is None or not record.measured or value is None:
        return "" if record is None else "skip"
    baseline = get_method(record.method).baseline
    base = baseline and _find(records, baseline, record.N, record.mode)
    if base and base.measured and (getattr(base, quantity) or 0) > 0:
        return f"{_number(value)} ({value / getattr(base, quantity):.2f}×)"
    return _number(value)


def _revision(source: dict[str, Any]) -> str:
    """`` at commit abc1234`` (and whether the tree differed from it); nothing where unknown."""
    if not source.get("commit"):
        return ""
    return f" at commit {source['commit'][:7]}" + (
        " (with uncommitted changes)" if source.get("modified") else "")


def quantity_table(records: list[BenchRecord], quantity: str, mode: str) -> str:
    """``quantity`` (``median_ms``, ``peak_mb``) in ``mode``: a row per method, a column per N."""
    rows = [r for r in records if r.mode == mode]
    lengths = sorted({r.N for r in rows})
    lines = ["| method | level | baseline | " + " | ".join(f"N={N}" for N in lengths) + " |",
             "|---|---|---|" + "---:|" * len(lengths)]
    for method in dict.fromkeys(r.method for r in rows):
        row = get_method(method)
        cells = [_cell(records, _find(records, method, N, mode), quantity) for N in lengths]
        lines.append(f"| {method} | {row.level} | {row.baseline or ''} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) if rows else ""


def targets_table(results: list[TargetResult]) -> str:
    """The targets: their cases' modes, value (and spread), the bound and the verdict."""
    lines = ["| target | mode | value | required | result |", "|---|---|---:|---|---|"]
    for result in results:
        target, spread = result.target, result.spread
        value = "—" if result.value is None else _value_text(result.value, target) + (
            " ({:.2f}–{:.2f})".format(*spread) if spread else "")
        verdict = {None: result.note or "not measured", True: "pass", False: "**miss**"}[
            result.passed]
        if target.direction == "info" and result.value is not None:
            verdict = "information"
        modes = " / ".join(dict.fromkeys((target.numerator.mode, target.denominator.mode)))
        required = "—" if target.direction == "info" else f"{target.direction} {target.bound:g}"
        lines.append(f"| {target.name} | {modes} | {value} | {required} | {verdict} |")
    return "\n".join(lines)


def markdown_report(records: list[BenchRecord], results: list[TargetResult],
                    machine: dict[str, Any], command: str, *, unfinished: str | None = None) -> str:
    """The whole run as one markdown document; ``unfinished``: why it is not whole yet (said at
    its top), None for a run that has ended."""
    m, on = machine, f" — {machine['gpu']}" if machine.get("gpu") else ""
    sides = [side for result in results for side in result.sides]
    failed = [r for r in records + sides if r.failed]
    lines = [f"# filterformer bench{on}", "",
             *([f"**Unfinished: {unfinished}.**", ""] if unfinished else []),
             f"- Machine: {m.get('gpu') or m.get('cpu')} ({m.get('device')}; {m.get('cpu_count')}"
             f" CPU cores, torch threads {m.get('torch_threads')}), torch {m.get('torch')}, "
             f"x-transformers {m.get('x_transformers')}, {m.get('date')}, load average (1, 5, "
             f"15 min) at start {m.get('load_average')}, at "
             f"{'this write' if unfinished else 'end'} {m.get('load_average_end')}.",
             f"- Command: `{command}`{_revision(m.get('source') or {})}"]
    first = next((r for r in records if r.batch is not None), None)
    if first is not None:
        lines.append(f"- Shapes: kernels take q, k, v of shape (B={first.batch}, h={first.heads}, "
                     f"N, d={first.dim}); modules and models take x of shape (B={first.batch}, N, "
                     f"D={first.heads * first.dim}). Modules include their projections.")
    lines.append(_METHOD)
    if m.get("heap"):
        lines.append(f"- CPU heap: {m['heap']} (reuse: freed memory kept for the next step).")
    if failed:
        lines.append(f"- **Failed: {len(failed)} of {len(records + sides)} configurations** "
                     "(their errors under Failed below).")
    lines.append("")
    for quantity, title in (("median_ms", "Time per step (median ms"),
                            ("peak_mb", "Extra memory per step (MiB")):
        for mode in (mode for mode in ALL_MODES if any(r.mode == mode for r in records)):
            lines += [f"## {title}, {_MODE_TITLES[mode]}; × baseline in parentheses){on}", "",
                      quantity_table(records, quantity, mode), ""]
    lines += [f"## Targets{on}", "", targets_table(results), "",
              "## What one step runs", "", "| method | level | one step |", "|---|---|---|"]
    rows = map(get_method, dict.fromkeys(r.method for r in records + sides))
    lines += [f"| {row.name} | {row.level} | {row.timed} |" for row in rows]
    for title, rows in (("Failed", failed),
                        ("Skipped", [r for r in records + sides if not (r.measured or r.failed)])):
        if rows:
            lines += ["", f"## {title}", "", *(f"- {r.method}, N={r.N}, {r.mode}: {r.skipped}"
                                              for r in rows)]
    return "\n".join(lines) + "\n"
