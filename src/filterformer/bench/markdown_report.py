"""``bench.md``: time and memory tables, the extra benchmarks' sections, the targets, what one
step runs, what failed and what was skipped; on CUDA every heading names the GPU."""

from __future__ import annotations

from typing import Any

from .extras import EXTRAS
from .method_table import BENCH_METHODS
from .performance_targets import TargetResult
from .records import BenchRecord, find_record
from .step_cases import MODES

__all__ = ["extra_section", "markdown_report", "quantity_table", "targets_table"]

_MODE_TITLES = {"train": "training (forward + backward)", "inference": "inference (forward)"}
_PAIRED_NOTE = (
    "A paired ratio re-measures a time ratio with both sides built in one fresh process and "
    "their steps alternated (the extra benchmarks' rows were measured so), so load from "
    "elsewhere on the machine falls on both alike: the median of the rounds' ratios, the middle "
    "half of them in parentheses. Where there is one, the result reads it rather than the "
    "table's ratio of the two sides' medians."
)


_TIME = ("- Time: the median of the mean step of blocks timed by torch.utils.benchmark's "
         "blocked_autorange after warm-up (training: forward + backward of a fixed upstream "
         "gradient; inference: forward under inference_mode).")
_MEMORY = ("- Memory: extra memory of one step over the inputs and weights already held; on the "
           "CPU peak RSS growth in a fresh process per configuration, on CUDA peak allocated "
           "memory.")


def _number(value: float) -> str:
    if 0 < abs(value) < 0.01:
        return f"{value:.1e}"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _cell(records: list[BenchRecord], record: BenchRecord | None, quantity: str) -> str:
    if record is None or not record.measured:
        return "" if record is None else "skip"
    value = getattr(record, quantity)
    base = record.baseline and find_record(records, record.baseline, record.N, record.mode)
    if base and base.measured and getattr(base, quantity) > 0:
        return f"{_number(value)} ({value / getattr(base, quantity):.2f}×)"
    return _number(value)


def _ordered(values: list[str], order: tuple[str, ...]) -> list[str]:
    """The distinct ``values`` in ``order``; those not in it last, as they first appear."""
    return sorted(dict.fromkeys(values), key=lambda v: order.index(v) if v in order else len(order))


def quantity_table(records: list[BenchRecord], quantity: str, mode: str) -> str:
    """A markdown table of ``quantity`` (``median_ms`` or ``peak_mb``) in ``mode``: a row per
    method, a column per N, each cell ``value (× baseline)``."""
    rows = [r for r in records if r.mode == mode]
    lengths = sorted({r.N for r in rows})
    lines = ["| method | level | baseline | " + " | ".join(f"N={N}" for N in lengths) + " |",
             "|---|---|---|" + "---:|" * len(lengths)]
    for method in _ordered([r.method for r in rows], tuple(BENCH_METHODS)):
        first = next(r for r in rows if r.method == method)
        cells = [_cell(records, find_record(records, method, N, mode), quantity) for N in lengths]
        lines.append(f"| {method} | {first.level} | {first.baseline or ''} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) if rows else ""


def targets_table(results: list[TargetResult]) -> str:
    """The targets with their table and paired ratios, the bound and the verdict."""
    lines = ["| target | mode | table | paired | required | result |",
             "|---|---|---:|---:|---|---|"]
    for result in results:
        target, paired = result.target, result.paired if result.paired is not None else ""
        if isinstance(paired, float):
            spread = result.paired_spread
            paired = f"{paired:.2f}" + (" ({:.2f}–{:.2f})".format(*spread) if spread else "")
        table = "—" if result.ratio is None else _number(result.ratio)
        verdict = result.note or {None: "not measured", True: "pass", False: "**miss**"}[
            result.passed]
        required = f"{target.op} {target.bound:g}"
        if target.op == "info":
            required, verdict = "—", "information" if result.ratio is not None else verdict
        lines.append(f"| {target.name} | {result.mode} | {table} | {paired} "
                     f"| {required} | {verdict} |")
    return "\n".join(lines)


def _header(machine: dict[str, Any], command: str, records: list[BenchRecord],
            failed: list[BenchRecord], total: int) -> list[str]:
    m, first = machine, next((r for r in records if r.batch is not None), None)
    end = f", at end {m['load_average_end']}" if m.get("load_average_end") else ""
    lines = [
        f"- Machine: {m.get('gpu') or m.get('cpu')} ({m.get('device')}; {m.get('cpu_count')} CPU "
        f"cores, torch threads {m.get('torch_threads')}), torch {m.get('torch')}, x-transformers "
        f"{m.get('x_transformers')}, {m.get('date')}, load average (1, 5, 15 min) at start "
        f"{m.get('load_average')}{end}.",
        f"- Command: `{command}`",
    ]
    if first is not None:
        lines.append(f"- Shapes: kernels take q, k, v of shape (B={first.batch}, h={first.heads}, "
                     f"N, d={first.dim}); modules and models take x of shape (B={first.batch}, N, "
                     f"D={first.heads * first.dim}). Modules include their projections.")
    lines += [_TIME, _MEMORY]
    if failed:
        lines.append(f"- **Failed: {len(failed)} of {total} configurations** (their errors under "
                     "Failed below).")
    heaps = ", ".join(sorted({r.allocator for r in records if r.allocator is not None}))
    if heaps:
        lines.append(f"- CPU heap while timing: {heaps} (reuse: freed memory is kept for the "
                     "next allocation, as a caching allocator does).")
    return lines


def _on(machine: dict[str, Any]) -> str:
    """A heading's suffix naming the GPU of a CUDA run (nothing on the CPU)."""
    return f" — {machine['gpu']}" if machine.get("gpu") else ""


def extra_section(name: str, records: list[BenchRecord], machine: dict[str, Any] | None = None
                  ) -> list[str]:
    """The section of extra benchmark ``name``: its rows' median times, a table per mode
    (× a row's baseline), and the compiled rows' compile times; its heading names the GPU of
    ``machine``, if any."""
    extra = EXTRAS[name]
    rows = [r for r in records if r.method.startswith(extra.prefix)]
    lines = [f"## {extra.title}{_on(machine or {})}", ""]
    for mode in _ordered([r.mode for r in rows if r.measured], ()):
        lines += [f"Mode `{mode}`:", "", quantity_table(rows, "median_ms", mode), ""]
    compiled = [f"- {r.method}, N={r.N}: compiled in {r.compile_s:.1f} s; outputs within "
                f"{r.max_abs_diff:.1e} of eager's" for r in rows if r.compile_s is not None]
    return lines + ([*compiled, ""] if compiled else [])


def markdown_report(
    records: list[BenchRecord], results: list[TargetResult], machine: dict[str, Any], command: str
) -> str:
    """The whole run as one markdown document."""
    main, on = [r for r in records if r.method in BENCH_METHODS], _on(machine)
    failed = [r for r in records if r.failed]
    lines = [f"# filterformer bench{on}", "",
             *_header(machine, command, main, failed, len(records)), ""]
    for quantity, title in (("median_ms", "Time per step (median ms"),
                            ("peak_mb", "Extra memory per step (MiB")):
        for mode in _ordered([r.mode for r in main], MODES):
            lines += [f"## {title}, {_MODE_TITLES[mode]}; × baseline in parentheses){on}", "",
                      quantity_table(main, quantity, mode), ""]
    for name, extra in EXTRAS.items():
        if any(r.method.startswith(extra.prefix) for r in records):
            lines += extra_section(name, records, machine)
    lines += [f"## Targets{on}", "", targets_table(results), ""]
    if any(r.paired is not None for r in results):
        lines += [_PAIRED_NOTE, ""]
    lines += ["## What one step runs", "", "| method | level | one step |", "|---|---|---|"]
    lines += [f"| {n} | {BENCH_METHODS[n].level} | {BENCH_METHODS[n].timed} |"
              for n in _ordered([r.method for r in main], tuple(BENCH_METHODS))]
    extra_rows = {r.method: r for r in records if r.method not in BENCH_METHODS and r.notes}
    lines += [f"| {n} | {r.level} | {r.notes} |" for n, r in extra_rows.items()]
    for title, rows in (("Failed", failed),
                        ("Skipped", [r for r in records if not (r.measured or r.failed)])):
        if rows:
            lines += ["", f"## {title}", "", *(f"- {r.method}, N={r.N}, {r.mode}: {r.skipped}"
                                              for r in rows)]
    return "\n".join(lines) + "\n"
