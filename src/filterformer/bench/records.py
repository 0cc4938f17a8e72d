"""What one configuration measured, :class:`BenchRecord`; ``bench.json`` is a list of them."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..jsonsafe import finite_json, reject_unknown_fields

__all__ = ["BenchRecord", "find_record", "load_records", "save_records"]


@dataclass
class BenchRecord:
    """One configuration's result: the median time of a step (ms) and its extra memory (MiB,
    measured as ``memory`` says), or why it was ``skipped``; the sizes (``dim`` is d, ``width``
    D for modules and models), every timed block's mean step, the threads and CPU heap while
    timing, the method's level and baseline, and what one step runs (``notes``)."""

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


def save_records(records: list[BenchRecord], path: str | Path) -> Path:
    """Write ``records`` as a JSON list (``bench.json``)."""
    path = Path(path)
    rows = [dataclasses.asdict(r) for r in records]
    path.write_text(json.dumps(finite_json(rows), indent=1) + "\n")
    return path


def load_records(path: str | Path) -> list[BenchRecord]:
    """Read a ``bench.json`` written by :func:`save_records`."""
    rows: list[dict[str, Any]] = json.loads(Path(path).read_text())
    for row in rows:
        reject_unknown_fields(BenchRecord, row)
    return [BenchRecord(**row) for row in rows]


def find_record(records: list[BenchRecord], method: str, N: int, mode: str) -> BenchRecord | None:
    """The record of ``(method, N, mode)``, or None."""
    return next((r for r in records if (r.method, r.N, r.mode) == (method, N, mode)), None)
