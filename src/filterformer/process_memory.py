"""This process's memory as Linux reports it, the one way CPU memory is measured here (training's
peak, the benchmark's step): the rise of the peak resident set ``VmHWM`` (reset through
``/proc/self/clear_refs``) over ``VmRSS`` once freed heap was handed back. No ``/proc``: None."""

from __future__ import annotations

import contextlib
import ctypes
import gc
from pathlib import Path

__all__ = ["keep_freed_memory", "peak_rise_mib", "rss_status", "start_peak_window"]


def rss_status() -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` of this process in MiB (empty where /proc is unavailable)."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return {}
    fields = (line.partition(":") for line in lines)
    return {key: int(rest.split()[0]) / 1024 for key, _, rest in fields  # kB -> MiB
            if key in ("VmRSS", "VmHWM")}


def start_peak_window() -> float | None:
    """Collect garbage, hand freed heap pages back and reset the peak resident set to the
    current one: the resident set (MiB) :func:`peak_rise_mib` measures from, or None."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    status = rss_status()
    return status.get("VmRSS") if "VmHWM" in status else None


def peak_rise_mib(baseline_mib: float) -> float | None:
    """How far the peak resident set rose over ``baseline_mib`` (from :func:`start_peak_window`),
    in MiB; None where it cannot be read."""
    peak = rss_status().get("VmHWM")
    return None if peak is None else max(peak - baseline_mib, 0.0)


def keep_freed_memory() -> str:
    """Make glibc keep freed memory for reuse, as a caching allocator does: by default each block
    of 32 MiB or more is mapped afresh and page-faults anew every step (half of AGF's training
    step at N=16384). Returns the heap policy: ``reuse``, or ``system`` where it is not glibc."""
    with contextlib.suppress(OSError, AttributeError):
        mallopt = ctypes.CDLL("libc.so.6").mallopt  # M_MMAP_MAX = -4, M_TRIM_THRESHOLD = -1
        return "reuse" if mallopt(-4, 0) == 1 == mallopt(-1, 2**31 - 1) else "system"
    return "system"
