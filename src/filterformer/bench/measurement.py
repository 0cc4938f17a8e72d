"""One configuration measured: its extra memory on the first full-size step, then its time, as a
:class:`BenchRecord`; ``bench.json`` is a list of them."""

from __future__ import annotations

import dataclasses
import gc
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..jsonsafe import finite_json, reject_unknown_fields
from .method_table import PeerUnavailable, get_method
from .step_cases import BenchCase, BenchShape
from .step_measures import cpu_peak_mb, cuda_peak_mb, median_ms, reuse_freed_memory, time_steps

__all__ = ["PRIME_LENGTH", "WARM_STEP_MS", "BenchConfig", "BenchRecord", "find_record",
           "load_records", "measure_config", "prepare_case", "save_records", "skipped_record",
           "use_timing_heap", "warmup_steps"]

#: A small step of this length runs first, so one-time start-up costs (thread pools, kernel
#: selection, BLAS buffers) stay out of both the memory and the timed steps.
PRIME_LENGTH = 64
#: A full-size step at least this long (ms) is warm-up enough: the memory step is one.
WARM_STEP_MS = 1000.0


@dataclass(frozen=True)
class BenchConfig:
    """One configuration, as a worker receives it: ``method`` at ``N`` in ``mode`` on ``device``
    (``cpu``, ``cuda``); the timed steps (:func:`~.step_measures.time_steps`); the weights'
    ``seed``; the CPU heap while timing (``allocator``: ``reuse`` or ``system``)."""

    method: str
    N: int
    mode: str
    device: str = "cpu"
    shape: BenchShape = field(default_factory=BenchShape)
    repeats: int = 5
    min_repeats: int = 3
    warmup: int = 1
    time_budget_s: float = 30.0
    seed: int = 0
    allocator: str = "reuse"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchConfig:
        return cls(**{**data, "shape": BenchShape(**data.get("shape", {}))})


@dataclass
class BenchRecord:
    """One configuration's result: the median time of a step (ms) and its extra memory (MiB,
    measured as ``memory`` says), or why it was ``skipped``; the sizes (``dim`` is d, ``width``
    D for modules and models), every timed repeat, the threads and CPU heap while timing, the
    method's level and baseline, and what one step runs (``notes``)."""

    method: str
    N: int
    mode: str
    device: str
    median_ms: float | None = None
    peak_mb: float | None = None
    batch: int | None = None
    heads: int | None = None
    dim: int | None = None
    width: int | None = None
    level: str | None = None
    baseline: str | None = None
    times_ms: list[float] = field(default_factory=list)
    threads: int | None = None
    memory: str | None = None
    allocator: str | None = None
    skipped: str | None = None
    notes: str = ""

    @property
    def measured(self) -> bool:
        return self.skipped is None and self.median_ms is not None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchRecord:
        reject_unknown_fields(cls, data)
        return cls(**data)


def save_records(records: list[BenchRecord], path: str | Path) -> Path:
    """Write ``records`` as a JSON list (``bench.json``)."""
    path = Path(path)
    path.write_text(json.dumps(finite_json([r.to_dict() for r in records]), indent=1) + "\n")
    return path


def load_records(path: str | Path) -> list[BenchRecord]:
    """Read a ``bench.json`` written by :func:`save_records`."""
    return [BenchRecord.from_dict(item) for item in json.loads(Path(path).read_text())]


def find_record(records: list[BenchRecord], method: str, N: int, mode: str) -> BenchRecord | None:
    """The record of ``(method, N, mode)``, or None."""
    return next((r for r in records if (r.method, r.N, r.mode) == (method, N, mode)), None)


def _record(config: BenchConfig, **values: Any) -> BenchRecord:
    method, shape = get_method(config.method), config.shape
    return BenchRecord(
        method=config.method, N=config.N, mode=config.mode, device=config.device,
        batch=shape.batch, heads=shape.heads, dim=shape.head_dim,
        width=None if method.level == "kernel" else shape.width, level=method.level,
        baseline=method.baseline, notes=method.timed, **values,
    )


def skipped_record(config: BenchConfig, reason: str) -> BenchRecord:
    """The record of ``config``, not measured for ``reason``."""
    return _record(config, skipped=reason)


def _reuses_heap(config: BenchConfig) -> bool:
    return config.device == "cpu" and config.allocator == "reuse"


def warmup_steps(config: BenchConfig, step_ms: float) -> int:
    """Untimed steps after the memory step: none once a step takes :data:`WARM_STEP_MS` (the
    memory step warmed up), but one whenever the heap policy changes (it fills the heap)."""
    steps = 0 if step_ms >= WARM_STEP_MS else config.warmup
    return max(steps, 1) if _reuses_heap(config) else steps


def use_timing_heap(config: BenchConfig) -> str | None:
    """Switch this process to the heap policy of timed steps; the policy in force (CPU only)."""
    if config.device != "cpu":
        return None
    return "reuse" if _reuses_heap(config) and reuse_freed_memory() else "system"


def prepare_case(config: BenchConfig) -> BenchCase:
    """``config``'s case, built after one small priming step of the same method.

    Raises:
        PeerUnavailable: when the method's peer library is missing.
    """
    method, device = get_method(config.method), torch.device(config.device)
    torch.manual_seed(config.seed)
    method.build(config.shape, min(config.N, PRIME_LENGTH), config.mode, device).step()
    gc.collect()
    torch.manual_seed(config.seed)
    return method.build(config.shape, config.N, config.mode, device)


def measure_config(config: BenchConfig) -> BenchRecord:
    """Measure ``config`` in this process (a fresh one, for the CPU memory figure); a missing
    peer library gives a skipped record."""
    try:
        case = prepare_case(config)
    except PeerUnavailable as err:
        return skipped_record(config, str(err))
    peak_mb = cuda_peak_mb if config.device == "cuda" else cpu_peak_mb
    start = time.perf_counter()
    peak, how = peak_mb(case.step)  # the first full-size step; its length decides the warm-up
    first_ms = (time.perf_counter() - start) * 1e3
    allocator = use_timing_heap(config)
    times = time_steps(
        case.step, warmup=warmup_steps(config, first_ms),
        repeats=config.repeats, min_repeats=config.min_repeats,
        budget_ms=config.time_budget_s * 1e3, reset=case.reset,
    )
    return _record(config, median_ms=median_ms(times), peak_mb=peak, times_ms=times,
                   threads=torch.get_num_threads(), memory=how, allocator=allocator)
