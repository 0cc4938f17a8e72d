"""One measured (or skipped) configuration, and ``bench.json``: a list of them."""

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
    """The result of one configuration.

    Attributes:
        method: the benchmark method's name.
        N: the sequence length.
        mode: ``train`` (forward + backward) or ``inference`` (forward only).
        device: ``cpu`` or ``cuda``.
        median_ms: median wall time of one step in milliseconds; None when skipped.
        peak_mb: extra memory of one step in MiB (see ``memory``); None when skipped.
        batch, heads, dim: B, h and the head width d.
        width: the model width D for module and model methods; None for kernels.
        level: ``kernel``, ``module`` or ``model``.
        baseline: the method this one is compared against in the table, or None.
        times_ms: every timed repeat.
        threads: ``torch.get_num_threads()`` in the measuring process.
        memory: how ``peak_mb`` was measured.
        allocator: the CPU heap policy while timing (``reuse`` or ``system``), None on CUDA.
        skipped: why the configuration was not measured, or None.
        notes: anything else worth knowing.
    """

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
        """Whether the configuration ran (it has a time)."""
        return self.skipped is None and self.median_ms is not None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchRecord:
        reject_unknown_fields(cls, data)
        return cls(**data)


def save_records(records: list[BenchRecord], path: str | Path) -> Path:
    """Write ``records`` as a JSON list (``bench.json``)."""
    path = Path(path)
    path.write_text(json.dumps(finite_json([r.to_dict() for r in records]), indent=1) + "\n")
    return path


def load_records(path: str | Path) -> list[BenchRecord]:
    """Read a ``bench.json`` written by :func:`save_records`."""
    return [BenchRecord.from_dict(item) for item in json.loads(Path(path).read_text())]


def find_record(
    records: list[BenchRecord], method: str, N: int, mode: str
) -> BenchRecord | None:
    """The record of ``(method, N, mode)``, or None."""
    for record in records:
        if (record.method, record.N, record.mode) == (method, N, mode):
            return record
    return None
