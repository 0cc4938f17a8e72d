"""A whole run: every (method, mode, N) measured in a fresh process (on CUDA, all in one spawned
worker), then the extra benchmarks (:mod:`.extras`) each in one, the targets checked and
:data:`OUTPUT_FILES` written. What will not fit is skipped with its reason, not crashed: once a
length is not measured, the method's longer ones in that mode are not run; what fails is
recorded as failed and counted in the report, and a run that measured nothing ends in
:class:`NothingMeasured`."""

from __future__ import annotations

import itertools
import json
import os
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch

from ..jsonsafe import finite_json
from .extras import EXTRAS, GPU_EXTRAS
from .fresh_process import WorkerFailed, run_isolated
from .markdown_report import markdown_report
from .measurement import (
    BenchConfig,
    make_record,
    measure_chain,
    measure_chains_here,
    measure_config,
)
from .method_table import BENCH_METHODS, get_method, method_names
from .paired_check import paired_results
from .performance_targets import ALL_TARGETS, GPU_TARGETS, evaluate_targets, target_configurations
from .records import BenchRecord, save_records
from .step_cases import MODES, BenchShape

__all__ = ["DEFAULT_LENGTHS", "DEVICES", "OUTPUT_FILES", "QUICK_LENGTHS", "BenchSettings",
           "NothingMeasured", "machine_info", "measure_in_one_worker", "resolve_device",
           "run_and_write", "run_benchmarks"]

DEVICES = ("auto", "cpu", "cuda")  # auto: CUDA when it is available, else the CPU
#: A full run's lengths (to which it adds those the targets read, e.g. AGF at 2048).
DEFAULT_LENGTHS = (256, 1024, 4096, 16384)
QUICK_LENGTHS = (32, 64)
OUTPUT_FILES = ("bench.json", "bench.md", "bench.png", "machine.json", "targets.json")


class NothingMeasured(ValueError):
    """A run in which no configuration was measured; its files are written all the same, and
    ``report`` is its ``bench.md``."""

    def __init__(self, message: str, report: str) -> None:
        super().__init__(message)
        self.report = report


def _nothing_measured(records: list[BenchRecord], directory: Path) -> str:
    failed = [r for r in records if r.failed]
    first = f"; the first: {failed[0].method}, N={failed[0].N}: {failed[0].skipped}" if (
        failed) else ""
    return (f"no configuration was measured ({len(failed)} of {len(records)} failed{first}); "
            f"see {directory / 'bench.md'}")


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is present, else ``cpu``; explicit choices are checked."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}; got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was requested but CUDA is not available; use cpu or auto")
    return ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device


@dataclass(frozen=True)
class BenchSettings:
    """A whole run: what runs, where, at which sizes; each configuration's timed steps and time
    limit (see :class:`~.measurement.BenchConfig`; ``target_limit_s`` for those a target reads);
    whether to add the lengths the targets read; the extra benchmarks to run after the methods
    (names of :data:`~.extras.EXTRAS`), at tiny sizes where ``quick_extras``. ``methods`` may be
    empty where ``extras`` is not (e.g. the GPU targets' rows alone)."""

    methods: tuple[str, ...] = field(default_factory=method_names)
    lengths: tuple[int, ...] = DEFAULT_LENGTHS
    modes: tuple[str, ...] = MODES
    device: str = "auto"
    shape: BenchShape = field(default_factory=BenchShape)
    repeats: int = 3
    min_run_s: float = 0.5
    limit_s: float = 30.0
    target_limit_s: float = 900.0
    target_lengths: bool = False
    extras: tuple[str, ...] = ()
    quick_extras: bool = False

    def __post_init__(self) -> None:
        for name in self.methods:
            get_method(name)
        if any(mode not in MODES for mode in self.modes):
            raise ValueError(f"modes must be one of {', '.join(MODES)}; got {self.modes!r}")
        if any(isinstance(N, bool) or not isinstance(N, int) or N < 1 for N in self.lengths):
            raise ValueError(f"lengths must be positive integers; got {self.lengths!r}")
        if not ((self.methods or self.extras) and self.lengths and self.modes):
            raise ValueError("lengths and modes must each name at least one value, and methods "
                             "or extras at least one")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1; got {self.repeats}")
        if any(name not in EXTRAS for name in self.extras):
            raise ValueError(f"extras must be among {', '.join(EXTRAS)}; got {self.extras!r}")


def measure_in_fresh_process(config: BenchConfig) -> BenchRecord:
    """``measure_config(config)`` in a fresh process; a worker that fails, dies or overruns
    gives a failed record saying so."""
    try:
        record = run_isolated(partial(measure_config, config), _worker_limit_s(config))
    except WorkerFailed as err:
        return make_record(config, skipped=str(err), failed=True)
    if record.memory is not None:
        record.memory += ", in a fresh process"
    return record


def _log_line(record: BenchRecord) -> str:
    why = f"{'failed' if record.failed else 'skipped'}: {record.skipped}"
    shown = why if not record.measured else f"{record.median_ms:10.2f} ms"
    if record.peak_mb is not None:
        shown += f"  {record.peak_mb:9.1f} MiB"
    return f"{record.method:<24} N={record.N:<6} {record.mode:<9} {shown}"


def _worker_limit_s(config: BenchConfig) -> float:
    return 3 * config.limit_s + 120


def measure_in_one_worker(chains: list[list[BenchConfig]], *, cuda: bool) -> list[BenchRecord]:
    """Every chain of configurations (:func:`~.measurement.measure_chain`) in one fresh worker,
    started as a CUDA run starts it where ``cuda`` (spawned); a worker that dies or overruns
    fails every configuration."""
    configs = [config for chain in chains for config in chain]
    try:
        return run_isolated(partial(measure_chains_here, chains),
                            sum(map(_worker_limit_s, configs)), cuda=cuda)
    except WorkerFailed as err:
        return [make_record(config, skipped=str(err), failed=True) for config in configs]


def _chains(settings: BenchSettings, device: str) -> list[list[BenchConfig]]:
    """Per (method, mode), its configurations, shortest N first."""
    targeted, chains = target_configurations(), []
    for name, mode in itertools.product(settings.methods, settings.modes):
        lengths = set(settings.lengths)
        if settings.target_lengths:
            lengths |= {N for m, N, md in targeted if (m, md) == (name, mode)}
        chains.append([
            BenchConfig(method=name, N=N, mode=mode, device=device, shape=settings.shape,
                        limit_s=settings.target_limit_s if (name, N, mode) in targeted
                        else settings.limit_s, repeats=settings.repeats,
                        min_run_s=settings.min_run_s)
            for N in sorted(lengths)])
    return chains


def run_benchmarks(
    settings: BenchSettings, log: Callable[[str], None] | None = None
) -> list[BenchRecord]:
    """Every (method, mode, N) of ``settings``, shortest N first, measured or skipped with its
    reason (on the CPU each in a fresh process, on CUDA all in one spawned worker), then the
    records of the extra benchmarks it names, each run in a fresh process (one that fails gives
    a failed record named after it saying why); ``log`` gets a line per record."""
    device = resolve_device(settings.device)
    show = (lambda record: log(_log_line(record))) if log is not None else None
    chains = _chains(settings, device)
    if device == "cuda":
        records = measure_in_one_worker(chains, cuda=True) if chains else []
        for record in records if show is not None else ():
            show(record)
    else:
        records = [r for chain in chains for r in measure_chain(chain, measure_in_fresh_process,
                                                                 show)]
    for name in settings.extras:
        extra = EXTRAS[name]
        try:
            rows = run_isolated(partial(extra.run, settings.quick_extras, device),
                                timeout_s=extra.limit_s, cuda=device == "cuda")
        except WorkerFailed as err:
            rows = [BenchRecord(method=name, N=0, mode="extra", device=device,
                                skipped=str(err), failed=True)]
        records += rows
        for record in rows if show is not None else ():
            show(record)
    if device == "cuda":
        gpu = torch.cuda.get_device_name()
        for record in records:
            record.gpu = gpu
    return records


def _load_average() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def machine_info(device: str) -> dict[str, Any]:
    """What the figures depend on: hardware, threads, library versions, load, date."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    cpu = next((ln.partition(":")[2].strip() for ln in lines if ln.startswith("model name")),
               platform.processor() or platform.machine())
    info: dict[str, Any] = {
        "device": device, "cpu": cpu, "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
        "python": platform.python_version(), "platform": platform.platform(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    if _load_average() is not None:
        info["load_average"] = _load_average()
    if device == "cuda":
        info["gpu"], info["cuda"] = torch.cuda.get_device_name(), torch.version.cuda
    try:
        info["x_transformers"] = version("x-transformers")
    except PackageNotFoundError:
        info["x_transformers"] = None
    return info


def run_and_write(
    settings: BenchSettings, directory: Path, *, paired: str = "auto", command: str = "",
    log: Callable[[str], None] = print,
) -> str:
    """Run ``settings``, check the targets (re-measuring the ``paired`` ones side by side, see
    :func:`~.paired_check.paired_results`), write :data:`OUTPUT_FILES` to ``directory`` (the
    plot when anything was measured) and return the markdown report.

    Raises:
        NothingMeasured: after writing, when no configuration was measured.
    """
    device = resolve_device(settings.device)
    directory.mkdir(parents=True, exist_ok=True)
    machine = machine_info(device)
    log(f"filterformer bench on {machine.get('gpu') or device} ({machine['cpu']}, "
        f"{machine['torch_threads']} threads)")
    records = run_benchmarks(settings, log=log)
    if _load_average() is not None:  # other work moves CPU timings: how busy was it throughout
        machine["load_average_end"] = _load_average()
    # A run of the GPU targets' rows alone judges their targets alone.
    gpu_only = not settings.methods and set(settings.extras) <= set(GPU_EXTRAS)
    judged = evaluate_targets(records, GPU_TARGETS if gpu_only else ALL_TARGETS, device=device)
    results = paired_results(records, judged, shape=settings.shape,
                             device=device, which=paired, log=log)
    report = markdown_report(records, results, machine, command)
    save_records(records, directory / "bench.json")
    (directory / "bench.md").write_text(report)
    (directory / "machine.json").write_text(json.dumps(machine, indent=1) + "\n")
    targets = [{"target": r.target.name, "mode": r.mode, "ratio": r.ratio, "op": r.target.op,
                "bound": r.target.bound, "paired": r.paired, "paired_spread": r.paired_spread,
                "passed": r.passed, "note": r.note} for r in results]
    (directory / "targets.json").write_text(json.dumps(finite_json(targets), indent=1) + "\n")
    main = [r for r in records if r.method in BENCH_METHODS]
    if any(r.measured for r in main):
        from .figures import plot_records  # matplotlib loads only here, never in the workers

        plot_records(main, directory / "bench.png", machine=machine)
    if not any(r.measured for r in records):
        raise NothingMeasured(_nothing_measured(records, directory), report)
    return report
