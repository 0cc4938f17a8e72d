"""The machine a figure was measured on, named as a reader would recognise it."""

from __future__ import annotations

import platform
from pathlib import Path

__all__ = ["cpu_name"]


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s ``model name``), else what ``platform`` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    named = (line.partition(":")[2].strip() for line in lines if line.startswith("model name"))
    return next(named, "") or platform.processor() or platform.machine()
