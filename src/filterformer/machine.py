"""The machine a figure was measured on, named as a reader would recognise it."""

from __future__ import annotations

import contextlib
import os
import platform
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch

__all__ = ["DEVICES", "cpu_name", "load_average", "machine_info", "resolve_device"]

DEVICES = ("auto", "cpu", "cuda")  # auto: CUDA when it is available, else the CPU


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is present, else ``cpu``; explicit choices are checked
    (ValueError naming the valid ones)."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}; got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was requested but CUDA is not available; use cpu or auto")
    return ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s ``model name``), else what ``platform`` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    named = (line.partition(":")[2].strip() for line in lines if line.startswith("model name"))
    return next(named, "") or platform.processor() or platform.machine()


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, or None where the system has none."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def machine_info(device: str) -> dict[str, Any]:
    """What timings on ``device`` depend on: hardware, threads, library versions, load, date."""
    info = {"device": device, "cpu": cpu_name(), "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
            "python": platform.python_version(), "platform": platform.platform(),
            "load_average": load_average(),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "x_transformers": None}
    with contextlib.suppress(PackageNotFoundError):
        info["x_transformers"] = version("x-transformers")
    if device == "cuda":
        info["gpu"], info["cuda"] = torch.cuda.get_device_name(), torch.version.cuda
    return info
