"""This process's memory as Linux reports it: the one way CPU memory is measured here.

Training's per-run peak memory and the benchmark's per-step figure both take the rise of the
kernel's peak resident set (``VmHWM``, reset by writing ``5`` to ``/proc/self/clear_refs``) over
the resident set (``VmRSS``) once freed heap pages were handed back (glibc ``malloc_trim``).
Without ``/proc`` the readings are empty and nothing is measured.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
from pathlib import Path

__all__ = ["peak_rise_mib", "rss_status", "start_peak_window"]

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def rss_status() -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` of this process in MiB (empty where /proc is unavailable)."""
    try:
        lines = _STATUS.read_text().splitlines()
    except OSError:
        return {}
    fields = (line.partition(":") for line in lines)
    return {key: int(rest.split()[0]) / 1024 for key, _, rest in fields  # kB -> MiB
            if key in ("VmRSS", "VmHWM")}


def start_peak_window() -> float | None:
    """Collect garbage, hand freed heap pages back (glibc) and reset the peak resident set to
    the current one; the resident set (MiB) :func:`peak_rise_mib` measures from, or None where
    the peak cannot be reset or read."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError, TypeError):  # not glibc: nothing to trim
        ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return None
    status = rss_status()
    return status.get("VmRSS") if "VmHWM" in status else None


def peak_rise_mib(baseline_mib: float) -> float | None:
    """How far the peak resident set rose over ``baseline_mib`` (from :func:`start_peak_window`),
    in MiB; None where it cannot be read."""
    peak = rss_status().get("VmHWM")
    return None if peak is None else max(peak - baseline_mib, 0.0)
