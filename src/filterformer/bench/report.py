"""The run as markdown: time and memory tables, the targets, what is timed, what was skipped."""

from __future__ import annotations

from typing import Any

from .config import MODES
from .methods import BENCH_METHODS
from .records import BenchRecord, find_record
from .targets import TargetResult

__all__ = ["markdown_report", "quantity_table", "targets_table"]

_MODE_TITLES = {"train": "training (forward + backward)", "inference": "inference (forward)"}


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _cell(records: list[BenchRecord], record: BenchRecord | None, quantity: str) -> str:
    if record is None:
        return ""
    if not record.measured:
        return "skip"
    value = getattr(record, quantity)
    text = _number(value)
    if record.baseline is None:
        return text
    base = find_record(records, record.baseline, record.N, record.mode)
    if base is not None and base.measured and getattr(base, quantity) > 0:
        text += f" ({value / getattr(base, quantity):.2f}×)"
    return text


def _ordered(values: list[str], order: tuple[str, ...]) -> list[str]:
    return sorted(set(values), key=lambda v: order.index(v) if v in order else len(order))


def quantity_table(records: list[BenchRecord], quantity: str, mode: str) -> str:
    """One markdown table: a row per method, a column per N, cells ``value (× baseline)``.

    Args:
        records: the run.
        quantity: ``median_ms`` or ``peak_mb``.
        mode: ``train`` or ``inference``.
    """
    rows = [r for r in records if r.mode == mode]
    if not rows:
        return ""
    lengths = sorted({r.N for r in rows})
    methods = _ordered([r.method for r in rows], tuple(BENCH_METHODS))
    lines = [
        "| method | level | baseline | " + " | ".join(f"N={N}" for N in lengths) + " |",
        "|---|---|---|" + "---:|" * len(lengths),
    ]
    for method in methods:
        first = next(r for r in rows if r.method == method)
        cells = [_cell(records, find_record(records, method, N, mode), quantity) for N in lengths]
        lines.append(
            f"| {method} | {first.level} | {first.baseline or ''} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def _verdict(passed: bool | None) -> str:
    return {None: "not measured", True: "pass", False: "**miss**"}[passed]


def targets_table(results: list[TargetResult]) -> str:
    """The targets with their table and paired ratios and the verdict (which reads the paired
    ratio where one was measured)."""
    lines = [
        "| target | mode | table | paired | required | result |",
        "|---|---|---:|---:|---|---|",
    ]
    for result in results:
        target = result.target
        measured = "—" if result.ratio is None else f"{result.ratio:.2f}"
        paired = result.paired if result.paired is not None else ""
        if isinstance(paired, float):
            paired = f"{paired:.2f}"
            if result.paired_spread is not None:
                paired += " ({:.2f}–{:.2f})".format(*result.paired_spread)
        lines.append(
            f"| {target.name} | {result.mode} | {measured} | {paired} "
            f"| {target.op} {target.bound:g} | {_verdict(result.passed)} |"
        )
    return "\n".join(lines)


def _header(machine: dict[str, Any], command: str, records: list[BenchRecord]) -> list[str]:
    first = next((r for r in records if r.batch is not None), None)
    where = machine.get("gpu") or machine.get("cpu")
    lines = [
        f"- Machine: {where} ({machine.get('device')}; {machine.get('cpu_count')} CPU cores, "
        f"torch threads {machine.get('torch_threads')}), torch {machine.get('torch')}, "
        f"x-transformers {machine.get('x_transformers')}, {machine.get('date')}, "
        f"load average (1, 5, 15 min) at start {machine.get('load_average')}"
        + (f", at end {machine['load_average_end']}" if "load_average_end" in machine else "")
        + ".",
        f"- Command: `{command}`",
    ]
    if first is not None:
        width = first.heads * first.dim
        lines.append(
            f"- Shapes: kernels take q, k, v of shape (B={first.batch}, h={first.heads}, N, "
            f"d={first.dim}); modules and models take x of shape (B={first.batch}, N, "
            f"D={width}). Modules include their projections and are compared with the softmax "
            "module of the same width; models are compared with our softmax model."
        )
    lines += [
        "- Time: median of the timed repeats after warm-up, one step each (training: forward + "
        "backward of a fixed upstream gradient; inference: forward under inference_mode). "
        "CUDA steps are timed with CUDA events.",
        "- Memory: extra memory of one step over the inputs and weights already held; on the "
        "CPU peak RSS growth in a fresh process per configuration, on CUDA peak allocated "
        "memory.",
    ]
    allocators = sorted({r.allocator for r in records if r.allocator is not None})
    if allocators:
        lines.append(
            f"- CPU heap while timing: {', '.join(allocators)} (reuse: freed memory is kept for "
            "the next allocation, as a caching allocator does; system: glibc's defaults, "
            "under which tensors of 32 MiB or more page-fault anew every step)."
        )
    return lines


def markdown_report(
    records: list[BenchRecord],
    results: list[TargetResult],
    machine: dict[str, Any],
    command: str,
) -> str:
    """The whole run as one markdown document."""
    lines = ["# filterformer bench", "", *_header(machine, command, records), ""]
    modes = _ordered([r.mode for r in records], MODES)
    for quantity, title in (("median_ms", "Time per step (median ms"),
                            ("peak_mb", "Extra memory per step (MiB")):
        for mode in modes:
            lines += [
                f"## {title}, {_MODE_TITLES[mode]}; × baseline in parentheses)", "",
                quantity_table(records, quantity, mode), "",
            ]
    lines += ["## Targets", "", targets_table(results), ""]
    if any(r.paired is not None for r in results):
        lines += [
            "A paired ratio re-measures a time ratio with both sides built in one fresh process "
            "and their steps alternated, so load from elsewhere on the machine falls on both "
            "alike: the median of the rounds' ratios, the middle half of them in parentheses. "
            "Where there is one, the result reads it rather than the table's ratio of two "
            "processes run minutes apart.",
            "",
        ]
    lines += ["## What one step runs", "", "| method | level | one step |", "|---|---|---|"]
    for name in _ordered([r.method for r in records], tuple(BENCH_METHODS)):
        method = BENCH_METHODS[name]
        lines.append(f"| {name} | {method.level} | {method.timed} |")
    skipped = [r for r in records if not r.measured]
    if skipped:
        lines += ["", "## Skipped", ""]
        lines += [f"- {r.method}, N={r.N}, {r.mode}: {r.skipped}" for r in skipped]
    return "\n".join(lines) + "\n"
