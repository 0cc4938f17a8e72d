"""``bench.json``: the machine a run measured on, a :class:`BenchRecord` per configuration, and
the targets' results."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch

from ..jsonsafe import finite_json, reject_unknown_fields
from ..machine import cpu_name

__all__ = ["BENCH_VERSION", "BenchRecord", "load_bench", "machine_info", "save_bench"]

BENCH_VERSION = 2


@dataclass
class BenchRecord:
    """One configuration: its first and median step (ms), its first step's extra memory (MiB),
    each round's mean step, or why it was ``skipped`` (``failed`` where it raised); ``dim`` is
    d, ``width`` D (modules and models); ``notes``: what a step runs."""

    method: str
    N: int
    mode: str
    device: str
    median_ms: float | None = None
    first_ms: float | None = None
    peak_mb: float | None = None
    batch: int | None = None
    heads: int | None = None
    dim: int | None = None
    width: int | None = None
    level: str | None = None
    baseline: str | None = None
    times_ms: list[float] = field(default_factory=list)
    skipped: str | None = None
    failed: bool = False
    notes: str = ""

    @property
    def measured(self) -> bool:
        return self.skipped is None and self.median_ms is not None


def load_average() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def machine_info(device: str) -> dict[str, Any]:
    """What the figures depend on: hardware, threads, library versions, load, date."""
    info = {"device": device, "cpu": cpu_name(),
            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "python": platform.python_version(),
            "platform": platform.platform(), "load_average": load_average(),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "x_transformers": None}
    with contextlib.suppress(PackageNotFoundError):
        info["x_transformers"] = version("x-transformers")
    if device == "cuda":
        info["gpu"], info["cuda"] = torch.cuda.get_device_name(), torch.version.cuda
    return info


def save_bench(path: str | Path, machine: dict[str, Any], records: list[BenchRecord],
               targets: list[dict[str, Any]]) -> Path:
    """Write ``bench.json``: the ``machine``, the ``records`` and the ``targets``' rows."""
    data = {"version": BENCH_VERSION, "machine": machine,
            "records": [dataclasses.asdict(r) for r in records], "targets": targets}
    Path(path).write_text(json.dumps(finite_json(data), indent=1) + "\n")
    return Path(path)


def load_bench(path: str | Path) -> tuple[dict[str, Any], list[BenchRecord], list[dict[str, Any]]]:
    """``(machine, records, targets)`` of a ``bench.json`` written by :func:`save_bench`;
    ValueError naming the file for another version or an unknown record field."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or data.get("version") != BENCH_VERSION:
        raise ValueError(f"{path}: not a bench.json of version {BENCH_VERSION}")
    for row in data["records"]:
        reject_unknown_fields(BenchRecord, row)
    return data["machine"], [BenchRecord(**row) for row in data["records"]], data["targets"]
