"""Extra memory of one step: what the step needs beyond the inputs and weights already held.

CPU (Linux): the growth of the process's peak resident set size over its resident size just
before the step. Freed heap pages are first handed back to the system (``malloc_trim``) so the
baseline is what is live, then the kernel's high-water mark ``VmHWM`` is reset (``5`` written to
``/proc/self/clear_refs``) and read again after the step. This counts every page the step
touches, allocator slack included, so it is measured in a fresh process per configuration, on
its first full-size step. Where the mark cannot be reset, ``ru_maxrss`` is read instead and the
result says so (it then cannot see below the process's earlier peak).

CUDA: ``torch.cuda.max_memory_allocated()`` after ``reset_peak_memory_stats()``, minus what was
allocated before the step (the caching allocator's tensors, not its reserved pool).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import resource
import sys
from collections.abc import Callable
from pathlib import Path

import torch

__all__ = ["cpu_peak_mb", "cuda_peak_mb", "rss_status"]

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def rss_status() -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` of this process in MiB (empty where /proc is unavailable)."""
    try:
        lines = _STATUS.read_text().splitlines()
    except OSError:
        return {}
    values = {}
    for line in lines:
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024  # kB -> MiB
    return values


def _trim_heap() -> None:
    """Return freed heap pages to the system (glibc), so RSS counts only live memory."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _reset_high_water_mark() -> bool:
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def _max_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, else kB


def cpu_peak_mb(step: Callable[[], None]) -> tuple[float, str]:
    """Run ``step`` once; the growth of peak RSS over the RSS before it, in MiB.

    Returns:
        ``(extra_mb, how)``: the measurement and a sentence saying what it is.
    """
    _trim_heap()
    if _reset_high_water_mark() and "VmHWM" in rss_status():
        before = rss_status()["VmRSS"]
        step()
        return max(rss_status()["VmHWM"] - before, 0.0), (
            "peak RSS (VmHWM, reset before the step) minus RSS before the step"
        )
    before = rss_status().get("VmRSS", _max_rss_mb())
    step()
    return max(_max_rss_mb() - before, 0.0), (
        "ru_maxrss after the step minus RSS before it (peak not resettable: an upper bound)"
    )


def cuda_peak_mb(step: Callable[[], None], device: torch.device | None = None) -> tuple[float, str]:
    """Run ``step`` once; CUDA peak allocated memory over what was allocated before, in MiB."""
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    step()
    torch.cuda.synchronize(device)
    extra = (torch.cuda.max_memory_allocated(device) - before) / 2**20
    return extra, "torch.cuda.max_memory_allocated minus memory_allocated before the step"
