"""What one configuration measured, :class:`BenchRecord`; ``bench.json`` is a list of them."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..jsonsafe import finite_json, reject_unknown_fields
from ..timing import PairedStepTimes

__all__ = ["BenchRecord", "find_record", "load_records", "round_records", "save_records"]


@dataclass
class BenchRecord:
    """One configuration's result: the median time of a step (ms) and its extra memory (MiB,
    measured as ``memory`` says), or why it was ``skipped`` (``failed`` where it raised, died or
    overran rather than being left out by design); the sizes (``dim`` is d, ``width`` D for
    modules and models), every timed block's mean step, the threads and CPU heap while timing,
    the method's level and baseline, the ``gpu`` it ran on (CUDA) and what one step runs
    (``notes``). Rows alternated
    in rounds in one process (:func:`round_records`) share a ``round_group`` and hold their mean
    steps round by round in ``times_ms``; a compiled step adds its ``compile_s`` and the
    ``max_abs_diff`` of its outputs from eager's."""

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
    round_group: str | None = None
    compile_s: float | None = None
    max_abs_diff: float | None = None
    failed: bool = False
    gpu: str | None = None

    @property
    def measured(self) -> bool:
        return self.skipped is None and self.median_ms is not None


def round_records(times: PairedStepTimes, rows: Sequence[dict[str, Any]], *,
                  per_step: int = 1) -> list[BenchRecord]:
    """One record per side of ``times``: ``rows[side]`` (``method``, ``N``, ``mode``,
    ``device``, sizes, …) with its median step and its rounds' mean steps, in ms over
    ``per_step`` (e.g. the tokens a step decodes), in one ``round_group``."""
    group = "{method} N={N} {mode}".format(**rows[0])
    return [BenchRecord(**row, median_ms=median_s * 1e3 / per_step, round_group=group,
                        times_ms=[s * 1e3 / per_step for s in rounds],
                        threads=torch.get_num_threads())
            for row, median_s, rounds in zip(rows, times.median_s, times.round_step_s,
                                             strict=True)]


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
