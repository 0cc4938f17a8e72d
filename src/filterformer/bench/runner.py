"""Run every requested configuration, each CPU one in a fresh worker process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .allocator import ALLOCATORS
from .budget import Budget, available_memory_mb, skip_reason
from .config import DEFAULT_LENGTHS, MODES, BenchConfig, BenchShape, check_choice, resolve_device
from .measure import measure_config, skipped_record
from .methods import get_method, method_names
from .records import BenchRecord
from .targets import target_configurations
from .worker import run_in_worker

__all__ = ["BenchSettings", "run_benchmarks"]

#: Of the memory free when a run starts, the share one configuration may use by default.
MEMORY_SHARE = 0.6


@dataclass(frozen=True)
class BenchSettings:
    """A whole benchmark run.

    Attributes:
        methods: method names, in table order.
        lengths: sequence lengths N.
        modes: ``train`` and/or ``inference``.
        device: ``auto``, ``cpu`` or ``cuda``.
        shape: the sizes.
        repeats, min_repeats, warmup: see :class:`BenchConfig`.
        repeat_budget_s: timed repeats past ``min_repeats`` stop once they used this long.
        config_budget_s: configurations projected to take longer are skipped.
        target_budget_s: the same for the configurations a target reads (see
            :func:`~filterformer.bench.targets.target_configurations`), which may take longer.
        memory_budget_mb: configurations projected to need more extra memory are skipped;
            None: :data:`MEMORY_SHARE` of the memory available when the run starts (at most
            8 GiB on the CPU).
        isolate: one fresh process per configuration; None: on the CPU only (where it is what
            makes the peak-memory figure per configuration).
        allocator: the CPU heap policy while timing, ``reuse`` or ``system`` (see
            :mod:`~filterformer.bench.allocator`); runs that do not isolate leave this process's
            allocator alone.
        target_lengths: also run, per method and mode, the lengths the targets read.
    """

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
        check_choice("allocator", self.allocator, ALLOCATORS)
        for name in self.methods:
            get_method(name)
        for mode in self.modes:
            check_choice("modes", mode, MODES)
        for N in self.lengths:
            if isinstance(N, bool) or not isinstance(N, int) or N < 1:
                raise ValueError(f"lengths must be positive integers; got {N!r}")
        if not (self.methods and self.lengths and self.modes):
            raise ValueError("methods, lengths and modes must each name at least one value")

    def config(self, method: str, N: int, mode: str, device: str, isolate: bool) -> BenchConfig:
        return BenchConfig(
            method=method, N=N, mode=mode, device=device, shape=self.shape,
            repeats=self.repeats, min_repeats=self.min_repeats, warmup=self.warmup,
            time_budget_s=self.repeat_budget_s,
            allocator=self.allocator if isolate else "system",
        )

    def memory_budget(self, device: str) -> float:
        """The memory budget in MiB (see ``memory_budget_mb``)."""
        if self.memory_budget_mb is not None:
            return self.memory_budget_mb
        free = available_memory_mb(device)
        memory = 8192.0 if free is None else MEMORY_SHARE * free
        return min(memory, 8192.0) if device == "cpu" else memory


def _note_process(record: BenchRecord, where: str) -> None:
    if record.memory is not None:
        record.memory = f"{record.memory}, {where}"


def _describe(record: BenchRecord) -> str:
    head = f"{record.method:<20} N={record.N:<6} {record.mode:<9}"
    if not record.measured:
        return f"{head} skipped: {record.skipped}"
    return f"{head} {record.median_ms:10.2f} ms  {record.peak_mb:9.1f} MiB"


def run_benchmarks(
    settings: BenchSettings, log: Callable[[str], None] | None = None
) -> list[BenchRecord]:
    """Run every (method, mode, N) of ``settings``, shortest N first, projecting what fits.

    Args:
        settings: the run.
        log: called with one line per configuration as it finishes.

    Returns:
        One record per configuration, measured or skipped with its reason.
    """
    device = resolve_device(settings.device)
    isolate = device == "cpu" if settings.isolate is None else settings.isolate
    memory_mb = settings.memory_budget(device)
    budgets = {
        required: Budget(
            config_s=settings.target_budget_s if required else settings.config_budget_s,
            memory_mb=memory_mb,
        )
        for required in (False, True)
    }
    required = target_configurations()
    records = []
    for name in settings.methods:
        method = get_method(name)
        for mode in settings.modes:
            previous = None
            lengths = set(settings.lengths)
            if settings.target_lengths:
                lengths |= {N for m, N, md in required if (m, md) == (name, mode)}
            for N in sorted(lengths):
                config = settings.config(name, N, mode, device, isolate)
                budget = budgets[(name, N, mode) in required]
                reason = skip_reason(method, config, previous, budget)
                if reason is not None:
                    record = skipped_record(config, reason)
                elif isolate:
                    record = run_in_worker(config, timeout_s=3 * budget.config_s + 120)
                    _note_process(record, "in a fresh process")
                else:
                    record = measure_config(config)
                    if device == "cpu":  # CUDA peaks are reset per configuration
                        _note_process(record, "in-process, after other configurations")
                if record.measured:
                    previous = record
                records.append(record)
                if log is not None:
                    log(_describe(record))
    return records
