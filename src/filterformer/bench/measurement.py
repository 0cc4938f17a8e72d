"""One configuration measured: the extra memory of its first full-size step, then its time.

- Memory: on the CPU the rise of the peak resident set over the resident set before the step
  (:mod:`filterformer.process_memory`), which counts every page the step touches, so each
  configuration runs in a fresh process (:mod:`.fresh_process`); on CUDA the peak allocated.
- Heap: glibc maps every block of 32 MiB or more afresh and unmaps it on free, so such a tensor
  page-faults anew every step (at N=16384, half of AGF's training step), hiding how a method
  scales. The timed steps keep freed memory for reuse, as a caching allocator does
  (``MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2147483647`` for your own runs).
- Time: ``torch.utils.benchmark.Timer.blocked_autorange`` (its block-size estimate warms up)
  times blocks of steps for at least ``repeats`` first steps or ``min_run_s``; the record holds
  each block's mean step and their median. Its clock
  (:func:`~filterformer.timing.synchronized_clock`) waits for CUDA before each reading where the
  worker uses CUDA, and leaves a GPU alone in a CPU worker.
"""

from __future__ import annotations

import ctypes
import gc
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils import benchmark

from ..process_memory import peak_rise_mib, start_peak_window
from ..timing import synchronized_clock
from .method_table import PeerUnavailable, get_method
from .records import BenchRecord
from .step_cases import BenchCase, BenchShape

__all__ = ["BenchConfig", "cpu_peak_mb", "cuda_peak_mb", "make_record", "measure_chain",
           "measure_chains_here", "measure_config", "prepare_case", "reuse_freed_memory"]

#: A step of this length runs first, so one-time start-up costs (thread pools, kernel selection,
#: BLAS buffers) stay out of the measured steps.
PRIME_LENGTH = 64


@dataclass(frozen=True)
class BenchConfig:
    """``method`` at ``N`` in ``mode`` on ``device`` (``cpu``, ``cuda``), its weights' ``seed``;
    steps timed for at least ``repeats`` first steps or ``min_run_s``; skipped when the memory
    step, the warm-up and ``repeats`` steps would take longer than ``limit_s``."""

    method: str
    N: int
    mode: str
    device: str = "cpu"
    shape: BenchShape = field(default_factory=BenchShape)
    repeats: int = 3
    min_run_s: float = 0.5
    limit_s: float = 600.0
    seed: int = 0


def make_record(config: BenchConfig, **values: Any) -> BenchRecord:
    """The record of ``config`` with ``values``: what was measured, or why it was ``skipped``."""
    method, shape = get_method(config.method), config.shape
    return BenchRecord(
        method=config.method, N=config.N, mode=config.mode, device=config.device,
        batch=shape.batch, heads=shape.heads, dim=shape.head_dim, level=method.level,
        width=None if method.level == "kernel" else shape.width, baseline=method.baseline,
        notes=method.timed, **values,
    )


def cpu_peak_mb(step: Callable[[], None]) -> tuple[float, str]:
    """Run ``step`` once; ``(MiB its peak resident set rose, how that was measured)``."""
    before = start_peak_window()
    if before is None:  # no /proc to reset the peak: the lifetime peak's rise, a lower bound
        scale = 2**20 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, else kB
        peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale  # noqa: E731
        before, _ = peak(), step()
        return peak() - before, "rise of ru_maxrss over the step (a lower bound)"
    step()
    rise = peak_rise_mib(before) or 0.0
    return rise, "peak RSS (VmHWM, reset before the step) minus RSS before the step"


def cuda_peak_mb(step: Callable[[], None]) -> tuple[float, str]:
    """Run ``step`` once; ``(MiB of CUDA memory allocated at its peak over before, how)``."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    extra = (torch.cuda.max_memory_allocated() - before) / 2**20
    return extra, "torch.cuda.max_memory_allocated minus memory_allocated before the step"


def reuse_freed_memory() -> bool:
    """Make glibc keep freed memory for reuse in this process (no ``mmap`` for large blocks,
    no trimming); False where it cannot (not glibc)."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    m_mmap_max, m_trim_threshold = -4, -1
    return mallopt(m_mmap_max, 0) == 1 and mallopt(m_trim_threshold, 2**31 - 1) == 1


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
    peer library, a length past the method's ``longest`` or steps past ``limit_s`` give a
    skipped record."""
    longest = get_method(config.method).longest.get(config.mode)
    if longest is not None and longest < config.N:
        return make_record(config, skipped=f"not run past N={longest} (explicit N×N matrices)")
    try:
        case = prepare_case(config)
    except PeerUnavailable as err:
        return make_record(config, skipped=str(err))
    start = time.perf_counter()
    peak, how = (cuda_peak_mb if config.device == "cuda" else cpu_peak_mb)(case.step)
    first_s, steps = time.perf_counter() - start, config.repeats + 2
    if first_s * steps > config.limit_s:
        return make_record(config, skipped=f"one step took {first_s:.1f} s; {steps} steps exceed "
                           f"the per-configuration limit of {config.limit_s:g} s")
    heap = None if config.device == "cuda" else "reuse" if reuse_freed_memory() else "system"
    threads = torch.get_num_threads()
    timer = benchmark.Timer("step()", globals={"step": case.step}, num_threads=threads,
                            timer=synchronized_clock)
    run_s = max(config.min_run_s, 0.9 * config.repeats * first_s)  # 0.9: whatever the noise
    measured = timer.blocked_autorange(min_run_time=run_s)
    return make_record(config, median_ms=measured.median * 1e3, peak_mb=peak, threads=threads,
                       times_ms=[t * 1e3 for t in measured.times], memory=how, allocator=heap)


def measure_chain(
    configs: list[BenchConfig], measure: Callable[[BenchConfig], BenchRecord],
    log: Callable[[BenchRecord], None] | None = None,
) -> list[BenchRecord]:
    """One method's ``configs`` in one mode, shortest N first, each by ``measure``; once one is
    not measured, the longer ones are skipped saying so. ``log`` gets each record."""
    records: list[BenchRecord] = []
    unmeasured = None
    for config in configs:
        record = (measure(config) if unmeasured is None else
                  make_record(config, skipped=f"not run: N={unmeasured} was not measured"))
        unmeasured = unmeasured or (None if record.measured else config.N)
        records.append(record)
        if log is not None:
            log(record)
    return records


def _measure_or_fail(config: BenchConfig) -> BenchRecord:
    """``measure_config(config)``, or a failed record naming the error it raised; memory it
    left behind is freed for the next configuration."""
    try:
        return measure_config(config)
    except Exception as err:
        return make_record(config, skipped=f"{type(err).__name__}: {err}", failed=True)
    finally:
        gc.collect()
        if config.device == "cuda":
            torch.cuda.empty_cache()


def measure_chains_here(chains: list[list[BenchConfig]]) -> list[BenchRecord]:
    """Every chain (:func:`measure_chain`) in this process, one worker for a whole CUDA run
    (peak memory there is reset per configuration, so it needs no fresh process): a
    configuration that raises gives a failed record and the others go on."""
    return [record for chain in chains for record in measure_chain(chain, _measure_or_fail)]
