"""Measure one configuration: its extra memory on the first full-size step, then its time."""

from __future__ import annotations

import gc
import time

import torch

from .allocator import reuse_freed_memory
from .cases import BenchCase
from .config import BenchConfig
from .memory import cpu_peak_mb, cuda_peak_mb
from .methods import get_method
from .peer import PeerUnavailable
from .records import BenchRecord
from .timing import cpu_timer, cuda_timer, median_ms, time_steps

__all__ = [
    "PRIME_LENGTH",
    "WARM_STEP_MS",
    "measure_config",
    "prepare_case",
    "skipped_record",
    "use_timing_heap",
    "warmup_steps",
]

#: The length of the small step run first, so one-time start-up costs (thread pools, kernel
#: selection, BLAS buffers) stay out of both the memory and the timed steps.
PRIME_LENGTH = 64
#: A full-size step at least this long (ms) is warm-up enough: the memory step is one.
WARM_STEP_MS = 1000.0


def _reuses_heap(config: BenchConfig) -> bool:
    return config.device == "cpu" and config.allocator == "reuse"


def warmup_steps(config: BenchConfig, step_ms: float) -> int:
    """Untimed steps after the memory step.

    None when a step takes ``WARM_STEP_MS`` or more (the memory step warmed up), except one when
    the heap policy changes after the memory step (the first step under it fills the heap).
    """
    steps = 0 if step_ms >= WARM_STEP_MS else config.warmup
    return max(steps, 1) if _reuses_heap(config) else steps


def skipped_record(config: BenchConfig, reason: str) -> BenchRecord:
    """The record of a configuration that was not measured, and why."""
    record = _record(config)
    record.skipped = reason
    return record


def _record(config: BenchConfig) -> BenchRecord:
    method = get_method(config.method)
    shape = config.shape
    return BenchRecord(
        method=config.method,
        N=config.N,
        mode=config.mode,
        device=config.device,
        batch=shape.batch,
        heads=shape.heads,
        dim=shape.head_dim,
        width=None if method.level == "kernel" else shape.width,
        level=method.level,
        baseline=method.baseline,
        notes=method.timed,
    )


def prepare_case(config: BenchConfig) -> BenchCase:
    """Build ``config``'s case after one small priming step of the same method.

    Raises:
        PeerUnavailable: when the method's peer library is missing.
    """
    method = get_method(config.method)
    device = torch.device(config.device)
    torch.manual_seed(config.seed)
    prime = method.build(config.shape, min(config.N, PRIME_LENGTH), config.mode, device)
    prime.step()
    del prime
    gc.collect()
    torch.manual_seed(config.seed)
    return method.build(config.shape, config.N, config.mode, device)


def use_timing_heap(config: BenchConfig) -> str | None:
    """Switch this process to the heap policy timed steps use; the policy in force (CPU only)."""
    if config.device != "cpu":
        return None
    return "reuse" if _reuses_heap(config) and reuse_freed_memory() else "system"


def measure_config(config: BenchConfig) -> BenchRecord:
    """Measure ``config`` in this process.

    For CPU memory figures this must be a fresh process (see :mod:`.memory`);
    :func:`~filterformer.bench.runner.run_benchmarks` runs each CPU configuration in its own
    worker. A missing peer library gives a skipped record, not an error.

    Returns:
        The :class:`BenchRecord`, with ``median_ms``, ``peak_mb`` and every repeat.
    """
    try:
        case = prepare_case(config)
    except PeerUnavailable as err:
        return skipped_record(config, str(err))
    on_cuda = config.device == "cuda"
    peak_mb, timer = (cuda_peak_mb, cuda_timer) if on_cuda else (cpu_peak_mb, cpu_timer)
    # The memory step is the first full-size step; how long it took decides the warm-up.
    start = time.perf_counter()
    peak, how = peak_mb(case.step)
    first_ms = (time.perf_counter() - start) * 1e3
    allocator = use_timing_heap(config)
    times = time_steps(
        case.step,
        timer=timer,
        warmup=warmup_steps(config, first_ms),
        repeats=config.repeats,
        min_repeats=config.min_repeats,
        budget_ms=config.time_budget_s * 1e3,
        reset=case.reset,
    )
    record = _record(config)
    record.median_ms = median_ms(times)
    record.peak_mb = peak
    record.times_ms = times
    record.threads = torch.get_num_threads()
    record.memory = how
    record.allocator = allocator
    return record
