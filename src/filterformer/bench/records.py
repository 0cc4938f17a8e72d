"""``bench.json``: the machine a run measured on, a :class:`BenchRecord` per configuration, and
the targets' results."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..jsonsafe import finite_json

__all__ = ["BENCH_VERSION", "BenchRecord", "save_bench"]

BENCH_VERSION = 3


@dataclass
class BenchRecord:
    """One configuration of a method-table row (B, h, d = ``batch``, ``heads``, ``dim``): its
    first and median step (ms), its first step's extra memory (MiB), each round's mean step, or
    why it was ``skipped`` (``failed`` where it raised)."""

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
    times_ms: list[float] = field(default_factory=list)
    skipped: str | None = None
    failed: bool = False

    @property
    def measured(self) -> bool:
        return self.skipped is None and self.median_ms is not None


def save_bench(path: str | Path, machine: dict[str, Any], records: list[BenchRecord],
               targets: list[dict[str, Any]], *, complete: bool = True) -> Path:
    """Write ``bench.json`` (``version`` :data:`BENCH_VERSION`): the ``machine``, the
    ``records`` and the ``targets``' rows, a non-finite number written as null (not measured),
    and whether the run had ended (``complete``; false in the files a run writes as it goes)."""
    data = {"version": BENCH_VERSION, "complete": complete, "machine": machine,
            "records": [dataclasses.asdict(r) for r in records], "targets": targets}
    Path(path).write_text(json.dumps(finite_json(data), indent=1) + "\n")
    return Path(path)
