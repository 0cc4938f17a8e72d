"""How one step is measured: its time, its extra memory, and the CPU heap it runs on.

- Time: ``torch.utils.benchmark``'s clock around each step (it synchronises CUDA first);
  gradients are cleared before each step, untimed.
- Memory: on the CPU, the rise of the peak resident set over the resident set before the step
  (:mod:`filterformer.process_memory`), which counts every page the step touches, so each
  configuration runs in a fresh process; on CUDA, the peak allocated over what was allocated.
- Heap: glibc maps every block of 32 MiB or more afresh and unmaps it on free, so such a tensor
  page-faults anew every step (at N=16384, half of AGF's training step), hiding how a method
  scales. ``reuse`` keeps freed memory for reuse while timing, as a caching allocator does
  (``MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2147483647`` for your own runs); ``system``
  keeps glibc's defaults. The memory step always runs under the defaults.
"""

from __future__ import annotations

import ctypes
import resource
import statistics
import sys
from collections.abc import Callable

import torch
from torch.utils import benchmark

from ..process_memory import peak_rise_mib, rss_status, start_peak_window

__all__ = ["ALLOCATORS", "StepTimer", "cpu_peak_mb", "cuda_peak_mb", "median_ms",
           "reuse_freed_memory", "time_step", "time_steps"]

#: The CPU heap policies while timing.
ALLOCATORS = ("reuse", "system")
#: ``timer(step)`` runs ``step`` once and returns its duration in ms.
StepTimer = Callable[[Callable[[], None]], float]


def time_step(step: Callable[[], None], clock: Callable[[], float] = benchmark.timer) -> float:
    """Run ``step`` once; its time in ms by ``clock`` (seconds)."""
    start = clock()
    step()
    return (clock() - start) * 1e3


def time_steps(
    step: Callable[[], None], *, timer: StepTimer = time_step, warmup: int = 1, repeats: int = 5,
    min_repeats: int = 3, budget_ms: float = float("inf"), reset: Callable[[], None] = lambda: None,
) -> list[float]:
    """``warmup`` untimed steps, then ``repeats`` timed ones, ``reset`` before each, untimed;
    the timed repeats stop early once they used ``budget_ms``, but never before ``min_repeats``.

    Returns:
        The timed steps in ms, in order.
    """
    if not 1 <= min_repeats <= repeats or warmup < 0:
        raise ValueError(f"need 1 <= min_repeats <= repeats and warmup >= 0; got min_repeats "
                         f"{min_repeats}, repeats {repeats}, warmup {warmup}")
    for _ in range(warmup):
        reset()
        step()
    times: list[float] = []
    while len(times) < repeats and (len(times) < min_repeats or sum(times) < budget_ms):
        reset()
        times.append(timer(step))
    return times


def median_ms(times_ms: list[float]) -> float:
    """The median of the timed repeats."""
    if not times_ms:
        raise ValueError("times_ms must hold at least one timed repeat")
    return float(statistics.median(times_ms))


def cpu_peak_mb(step: Callable[[], None]) -> tuple[float, str]:
    """Run ``step`` once; ``(MiB its peak resident set rose, how that was measured)``."""
    before = start_peak_window()
    if before is not None:
        step()
        rise = peak_rise_mib(before)
        if rise is None:
            raise RuntimeError("/proc/self/status stopped reporting VmHWM during the step")
        return rise, "peak RSS (VmHWM, reset before the step) minus RSS before the step"
    scale = 2**20 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, else kB
    max_rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale  # noqa: E731
    before = rss_status().get("VmRSS", max_rss())
    step()
    return max(max_rss() - before, 0.0), (
        "ru_maxrss after the step minus RSS before it (peak not resettable: an upper bound)"
    )


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
