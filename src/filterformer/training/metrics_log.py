"""A run's metrics as JSON lines (``metrics.jsonl``) and a CSV table (``metrics.csv``).

Every record has a ``step`` and a ``split`` (``train``, ``validation`` or ``test``); the CSV has
fixed columns (:data:`CSV_COLUMNS`, blank where a record has no such value), the JSON lines keep
every key. A resumed run first drops the records written after its checkpoint, so the files read
as if the run had never stopped.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from ..jsonsafe import finite_json

__all__ = ["CSV_COLUMNS", "MetricsLog", "read_metrics"]

CSV_COLUMNS = (
    "step", "epoch", "split", "loss", "accuracy", "perplexity", "rmse", "r2", "lr", "grad_norm",
    "elapsed_s",
)


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` file (an empty list when it does not exist)."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class MetricsLog:
    """Appends records to ``metrics.jsonl`` and ``metrics.csv`` in a run directory.

    Args:
        directory: the run directory.
        enabled: write files (only rank 0 does); otherwise every call does nothing.
        resume_step: keep the existing records up to this step and drop later ones; None
            starts both files afresh.
    """

    def __init__(self, directory: str | Path, *, enabled: bool = True,
                 resume_step: int | None = None) -> None:
        self.enabled = enabled
        self.jsonl = Path(directory) / "metrics.jsonl"
        self.csv = Path(directory) / "metrics.csv"
        if not enabled:
            return
        self.jsonl.parent.mkdir(parents=True, exist_ok=True)
        kept = []
        if resume_step is not None:
            kept = [r for r in read_metrics(self.jsonl)
                    if r["step"] <= resume_step and r["split"] != "test"]
        self.jsonl.write_text("".join(json.dumps(r) + "\n" for r in kept))
        with open(self.csv, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(CSV_COLUMNS)
            writer.writerows(self._row(r) for r in kept)

    @staticmethod
    def _row(record: dict[str, Any]) -> list[Any]:
        return ["" if record.get(c) is None else record[c] for c in CSV_COLUMNS]

    def log(self, record: dict[str, Any]) -> None:
        """Append one record (non-finite numbers are written as null / blank)."""
        if not self.enabled:
            return
        record = finite_json(record)
        with open(self.jsonl, "a") as f:
            f.write(json.dumps(record) + "\n")
        with open(self.csv, "a", newline="") as f:
            csv.writer(f).writerow(self._row(record))
