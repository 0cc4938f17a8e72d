"""A whole run: the table (each method and mode shortest N first, up to a length not measured),
then every target with its two cases side by side; bench.json and bench.md rewritten as it goes
and once it ends, then bench.png."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..atomic_files import atomic_write
from ..checks import check_writable_directory
from ..machine import load_average, machine_info, resolve_device
from ..process_memory import keep_freed_memory
from ..provenance import source_revision
from .measure import Rounds, make_record, measure_cases
from .method_table import get_method, method_names
from .records import BenchRecord, save_bench
from .report import markdown_report
from .step_cases import ALL_MODES, COMPILED, MODES, BenchShape
from .target_list import GPU_TARGETS, TARGETS
from .targets import Case, Target, TargetResult, judge

__all__ = ["DEFAULT_LENGTHS", "NOT_REACHED", "OUTPUT_FILES", "QUICK_LENGTHS", "TARGET_SETS",
           "BenchSettings", "NothingMeasured", "quick_target", "run_and_write", "run_table",
           "run_targets", "table_records", "target_results"]

DEFAULT_LENGTHS, QUICK_LENGTHS = (256, 1024, 4096, 16384), (32, 64)
OUTPUT_FILES = ("bench.json", "bench.md", "bench.png")
TARGET_SETS = ("cpu", "gpu", "none")  # which targets a run measures
Log = Callable[[str], None]
#: The note of a target that a run's files were written before reaching.
NOT_REACHED = "not reached: the run had not come to it when this file was written"


class NothingMeasured(ValueError):
    """A run that measured nothing; its files are written all the same (``report``: bench.md)."""

    def __init__(self, message: str, report: str) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class BenchSettings:
    """The table (each configuration in ``repeats`` rounds or more, about ``min_run_s``, skipped
    past ``limit_s``) and the ``targets`` set (the compiled ones where ``compile``; each about
    ``target_s``, ``target_limit_s`` at most; ``quick``: at tiny sizes, N/64 or 16)."""

    methods: tuple[str, ...] = field(default_factory=method_names)
    lengths: tuple[int, ...] = DEFAULT_LENGTHS
    modes: tuple[str, ...] = MODES
    device: str = "auto"
    shape: BenchShape = field(default_factory=BenchShape)
    repeats: int = 3
    min_run_s: float = 0.5
    limit_s: float = 30.0
    targets: str = "cpu"
    compile: bool = True
    target_s: float = 60.0
    target_limit_s: float = 900.0
    quick: bool = False

    def __post_init__(self) -> None:
        for name in self.methods:
            get_method(name)
        for name, values, valid in (("modes", self.modes, ALL_MODES),
                                    ("targets", (self.targets,), TARGET_SETS)):
            if any(value not in valid for value in values):
                raise ValueError(f"{name} must be one of {', '.join(valid)}; got {values!r}")
        if any(isinstance(N, bool) or not isinstance(N, int) or N < 1 for N in self.lengths):
            raise ValueError(f"lengths must be positive integers; got {self.lengths!r}")
        if not ((self.methods and self.lengths and self.modes) or self.targets != "none"):
            raise ValueError("methods, lengths and modes must each name at least one value, or "
                             "targets must be measured")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1; got {self.repeats}")


def run_table(settings: BenchSettings, log: Log = lambda line: None) -> list[BenchRecord]:
    """Every (method, mode, N) of ``settings``, measured or skipped with its reason."""
    return list(table_records(settings, log))


def table_records(settings: BenchSettings, log: Log = lambda line: None) -> Iterator[BenchRecord]:
    """:func:`run_table`'s records, each as soon as it is measured."""
    device = resolve_device(settings.device)
    rounds = Rounds(settings.repeats, 20, settings.min_run_s, settings.limit_s)
    for name, mode in itertools.product(settings.methods, settings.modes):
        unmeasured = None
        for N in sorted(set(settings.lengths)):
            case = Case(name, N, mode)
            (record,) = measure_cases([case], settings.shape, device, rounds=rounds).records if (
                unmeasured is None) else [make_record(case, settings.shape, device, skipped=(
                    f"not run: N={unmeasured} was not measured"))]
            unmeasured = unmeasured or (None if record.measured else N)
            log(f"{name:<24} N={N:<6} {mode:<9} " + (
                f"{record.median_ms:10.2f} ms  {record.peak_mb or 0:9.1f} MiB" if record.measured
                else f"{'failed' if record.failed else 'skipped'}: {record.skipped}"))
            yield record


def quick_target(target: Target) -> Target:
    """``target`` at tiny sizes, its cases at N/64 (at least 16)."""
    numerator, denominator = (side._replace(N=max(16, side.N // 64))
                              for side in (target.numerator, target.denominator))
    return replace(target, numerator=numerator, denominator=denominator,
                   shape=BenchShape.quick())


def _not_run(target: Target, settings: BenchSettings, device: str) -> str | None:
    """Why ``settings`` does not measure ``target`` here, or None."""
    gpu = target in GPU_TARGETS
    if gpu and device != "cuda" and not settings.quick:
        return f"not measured here ({device.upper()})"
    if settings.targets != ("gpu" if gpu else "cpu"):
        return {"none": "not run (--no-targets)", "gpu": "not run (CPU targets)",
                "cpu": "not run (GPU targets: --gpu-targets)"}[settings.targets]
    if COMPILED in (target.numerator.mode, target.denominator.mode) and not settings.compile:
        return "not run (compiled steps: --compile)"
    return None


def run_targets(settings: BenchSettings, log: Log = lambda line: None) -> list[TargetResult]:
    """Every target, its cases measured side by side where ``settings`` runs it (once for all
    the targets that read the same cases), else with a note saying why."""
    return list(target_results(settings, log))


def target_results(settings: BenchSettings,
                   log: Log = lambda line: None) -> Iterator[TargetResult]:
    """:func:`run_targets`' results (the CPU targets, then the GPU targets), each as soon as it
    is judged."""
    device = resolve_device(settings.device)
    runs = {target: quick_target(target) if settings.quick else target
            for target in (*TARGETS, *GPU_TARGETS) if _not_run(target, settings, device) is None}

    def key(run: Target) -> tuple[object, ...]:
        return (frozenset((run.numerator, run.denominator)), run.shape, run.precision,
                run.time_factor)

    measured = {}
    for target in (*TARGETS, *GPU_TARGETS):
        run = runs.get(target)
        if run is None:
            yield TargetResult(target, None, note=_not_run(target, settings, device))
            continue
        if key(run) not in measured:
            factor = run.time_factor  # more rounds: both the budget and the most rounds grow
            rounds = Rounds(5, round(15 * factor), settings.target_s * factor,
                            settings.target_limit_s)
            measured[key(run)] = measure_cases(
                list(dict.fromkeys((run.numerator, run.denominator))), run.shape or settings.shape,
                device, precision=run.precision, rounds=rounds)
        result = replace(judge(run, measured[key(run)]), target=target)
        if settings.quick and result.value is not None:  # tiny sizes say nothing of the bound
            result.note = "tiny sizes (--quick): no verdict"
        log(f"target: {target.name}: {result.value} {result.note or ''}")
        yield result


def run_and_write(settings: BenchSettings, directory: Path, *, command: str = "",
                  log: Log = print, directory_name: str = "output directory") -> str:
    """Run ``settings``, write :data:`OUTPUT_FILES` to ``directory`` (the plot where the table
    measured anything) and return bench.md; :class:`NothingMeasured` where nothing was.

    bench.json and bench.md are written (whole, :func:`~filterformer.atomic_files.atomic_write`)
    before the first measurement and again after each configuration and each target, so that a
    run stopped part-way (a time limit, an interrupt) leaves what it measured, never an earlier
    run's files: until the run ends they say it has not (bench.json's ``complete`` is false,
    bench.md says how much of the run they hold, and each target still to come is noted). The
    plot is drawn at the end; an earlier run's is removed first. ``directory`` is checked for
    writing before anything is measured (ValueError naming it ``directory_name``, the option
    that gave it).
    """
    device = resolve_device(settings.device)
    check_writable_directory(directory_name, directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "bench.png").unlink(missing_ok=True)  # an earlier run's
    machine = {**machine_info(device), "source": source_revision()}  # the code measured
    if device == "cpu":
        machine["heap"] = keep_freed_memory()
    log(f"filterformer bench on {machine.get('gpu') or machine['cpu']}")
    every_target = (*TARGETS, *GPU_TARGETS)
    why_not = {target: _not_run(target, settings, device) for target in every_target}
    planned = sum(note is None for note in why_not.values())
    table_size = len(settings.methods) * len(settings.modes) * len(set(settings.lengths))
    records: list[BenchRecord] = []
    results: list[TargetResult] = []

    def write(complete: bool) -> str:
        machine["load_average_end"] = load_average()  # the run's end, or this write's time
        shown = results + [TargetResult(target, None, note=why_not[target] or NOT_REACHED)
                           for target in every_target[len(results):]]
        judged = sum(why_not[r.target] is None for r in results)
        table = (f"{len(records)} of the table's {table_size} configurations and "
                 if table_size else "")
        unfinished = None if complete else (
            f"it holds {table}{judged} of the {planned} targets this run measures; the run had "
            "not ended when it was written")
        report = markdown_report(records, shown, machine, command, unfinished=unfinished)
        rows = [r.to_row() for r in shown]
        atomic_write(directory / "bench.json",
                     lambda tmp: save_bench(tmp, machine, records, rows, complete=complete))
        atomic_write(directory / "bench.md", lambda tmp: tmp.write_text(report))
        return report

    write(complete=False)
    for record in table_records(settings, log=log):
        records.append(record)
        write(complete=False)
    for result in target_results(settings, log=log):
        results.append(result)
        write(complete=False)
    report = write(complete=True)
    if any(r.measured for r in records):
        from .figures import plot_records  # matplotlib loads only here

        plot_records(records, directory / "bench.png", machine=machine)
    elif all(r.value is None for r in results):
        failed = [r for r in records if r.failed]
        first = failed and f"; the first: {failed[0].method}, N={failed[0].N}: {failed[0].skipped}"
        raise NothingMeasured(f"no configuration was measured ({len(failed)} of {len(records)} "
                              f"failed{first or ''}); see {directory / 'bench.md'}", report)
    return report
