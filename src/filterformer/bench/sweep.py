"""A whole run: every (method, mode, N), shortest N first, each CPU one in a fresh process.

What will not fit is skipped with its reason rather than run out of time or memory: a
configuration is projected from the same method's last measured length, ``cost(N) ≈
cost(N₀)·(N/N₀)^e`` with the method's exponents; explicit ``N×N`` matrices set a memory floor
before anything was measured.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .fresh_process import run_in_worker
from .measurement import BenchConfig, BenchRecord, measure_config, skipped_record, warmup_steps
from .method_table import BenchMethod, get_method, method_names
from .performance_targets import target_configurations
from .step_cases import MODES, BenchShape
from .step_measures import ALLOCATORS

__all__ = ["DEFAULT_LENGTHS", "DEVICES", "QUICK_LENGTHS", "BenchSettings", "Budget",
           "resolve_device", "run_benchmarks", "skip_reason"]

#: ``auto`` picks CUDA when it is available, else the CPU.
DEVICES = ("auto", "cpu", "cuda")
#: A full run's lengths (to which it adds those the targets read, e.g. AGF at 2048).
DEFAULT_LENGTHS = (256, 1024, 4096, 16384)
#: ``--quick`` runs' lengths.
QUICK_LENGTHS = (32, 64)
#: Of the memory free when a run starts, the share one configuration may use by default.
MEMORY_SHARE = 0.6


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is present, else ``cpu``; explicit choices are checked."""
    _check_choice("device", device, DEVICES)
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was requested but CUDA is not available; use cpu or auto")
    return device


@dataclass(frozen=True)
class BenchSettings:
    """A whole run: what runs, where, at which sizes; each configuration's timed steps (see
    :func:`~.step_measures.time_steps`); the projected time (``config_budget_s``; for what a
    target reads, ``target_budget_s``) and extra memory (``memory_budget_mb``; None:
    :data:`MEMORY_SHARE` of what is free, at most 8 GiB on the CPU) over which a configuration
    is skipped; a fresh process per configuration (``isolate``; None: on the CPU), whose CPU
    heap while timing is ``allocator``; and whether to add the lengths the targets read."""

    methods: tuple[str, ...] = field(default_factory=method_names)
    lengths: tuple[int, ...] = DEFAULT_LENGTHS
    modes: tuple[str, ...] = MODES
    device: str = "auto"
    shape: BenchShape = field(default_factory=BenchShape)
    repeats: int = 5
    min_repeats: int = 3
    warmup: int = 1
    repeat_budget_s: float = 10.0
    config_budget_s: float = 30.0
    target_budget_s: float = 180.0
    memory_budget_mb: float | None = None
    isolate: bool | None = None
    allocator: str = "reuse"
    target_lengths: bool = False

    def __post_init__(self) -> None:
        _check_choice("allocator", self.allocator, ALLOCATORS)
        for name in self.methods:
            get_method(name)
        for mode in self.modes:
            _check_choice("modes", mode, MODES)
        if any(isinstance(N, bool) or not isinstance(N, int) or N < 1 for N in self.lengths):
            raise ValueError(f"lengths must be positive integers; got {self.lengths!r}")
        if not (self.methods and self.lengths and self.modes):
            raise ValueError("methods, lengths and modes must each name at least one value")

    def memory_budget(self, device: str) -> float:
        """The memory budget in MiB (see ``memory_budget_mb``)."""
        if self.memory_budget_mb is not None:
            return self.memory_budget_mb
        free = available_memory_mb(device)
        memory = 8192.0 if free is None else MEMORY_SHARE * free
        return min(memory, 8192.0) if device == "cpu" else memory


@dataclass(frozen=True)
class Budget:
    """The most one configuration may take in all (memory step, warm-up and the fewest repeats)
    and need in extra memory per step, projected."""

    config_s: float = 120.0
    memory_mb: float = 8192.0

    def __post_init__(self) -> None:
        for name in ("config_s", "memory_mb"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive; got {getattr(self, name)}")


def available_memory_mb(device: str) -> float | None:
    """Memory free right now (MiB), or None when unknown."""
    if device == "cuda":
        return torch.cuda.mem_get_info()[0] / 2**20
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        return None
    return next((int(ln.split()[1]) / 1024 for ln in lines if ln.startswith("MemAvailable:")),
                None)


def skip_reason(
    method: BenchMethod, config: BenchConfig, previous: BenchRecord | None, budget: Budget
) -> str | None:
    """Why ``config`` should not run, or None when it fits, projected from ``previous``: the
    same method and mode measured at a shorter length, if any."""
    memory = method.memory_floor_mb(config.shape, config.N)
    basis = f"its {method.matrices} explicit N×N float32 matrices"
    if previous is not None and previous.peak_mb is not None:
        projected = previous.peak_mb * (config.N / previous.N) ** method.memory_exponent
        if projected > memory:
            memory, basis = projected, (f"projected from {previous.peak_mb:.0f} MiB at "
                                        f"N={previous.N}, memory ∝ N^{method.memory_exponent:g}")
    if memory > budget.memory_mb:
        return (f"needs ≈{memory:.0f} MiB ({basis}), over the memory budget of "
                f"{budget.memory_mb:.0f} MiB")
    if previous is None or previous.median_ms is None:
        return None
    step_ms = previous.median_ms * (config.N / previous.N) ** method.time_exponent
    steps = 1 + warmup_steps(config, step_ms) + config.min_repeats
    if step_ms * steps <= budget.config_s * 1e3:
        return None
    return (f"projected ≈{step_ms / 1e3:.1f} s per step (from {previous.median_ms:.0f} ms at "
            f"N={previous.N}, time ∝ N^{method.time_exponent:g}); {steps} steps exceed the "
            f"per-configuration budget of {budget.config_s:.0f} s")


def run_benchmarks(
    settings: BenchSettings, log: Callable[[str], None] | None = None
) -> list[BenchRecord]:
    """Every (method, mode, N) of ``settings``, shortest N first, measured or skipped with its
    reason; ``log`` gets a line per configuration as it finishes."""
    device = resolve_device(settings.device)
    isolate = device == "cpu" if settings.isolate is None else settings.isolate
    required, memory_mb = target_configurations(), settings.memory_budget(device)
    records = []
    for name, mode in itertools.product(settings.methods, settings.modes):
        previous, lengths = None, set(settings.lengths)
        if settings.target_lengths:
            lengths |= {N for m, N, md in required if (m, md) == (name, mode)}
        for N in sorted(lengths):
            config = BenchConfig(
                method=name, N=N, mode=mode, device=device, shape=settings.shape,
                repeats=settings.repeats, min_repeats=settings.min_repeats,
                warmup=settings.warmup, time_budget_s=settings.repeat_budget_s,
                allocator=settings.allocator if isolate else "system",
            )
            budget = Budget(memory_mb=memory_mb, config_s=settings.target_budget_s
                            if (name, N, mode) in required else settings.config_budget_s)
            record = _measure_unless_over(config, previous, budget, isolate)
            previous = record if record.measured else previous
            records.append(record)
            if log is not None:
                log(_describe(record))
    return records


def _measure_unless_over(
    config: BenchConfig, previous: BenchRecord | None, budget: Budget, isolate: bool
) -> BenchRecord:
    reason = skip_reason(get_method(config.method), config, previous, budget)
    if reason is not None:
        return skipped_record(config, reason)
    if isolate:
        record = run_in_worker(config, timeout_s=3 * budget.config_s + 120)
        where = "in a fresh process"
    else:
        record, where = measure_config(config), "in-process, after other configurations"
    if record.memory is not None and (isolate or config.device == "cpu"):  # CUDA: per config
        record.memory += f", {where}"
    return record


def _describe(record: BenchRecord) -> str:
    head = f"{record.method:<20} N={record.N:<6} {record.mode:<9}"
    if not record.measured:
        return f"{head} skipped: {record.skipped}"
    return f"{head} {record.median_ms:10.2f} ms  {record.peak_mb:9.1f} MiB"
