"""A run's metrics as JSON lines (``metrics.jsonl``) and a CSV table (``metrics.csv``).

Every record has a ``step`` and a ``split`` (``train``, ``validation`` or ``test``); the CSV has
fixed columns (:data:`CSV_COLUMNS`, blank where a record has no such value), the JSON lines keep
every key. A resumed run first drops the records written after its checkpoint, so the files read
as if the run had never stopped; the files are then rewritten whole (atomically) and appended to
one record at a time, so a process killed while appending can leave at most its last line cut
short, which :func:`read_metrics` leaves out.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from ..jsonsafe import finite_json
from .run_files import CorruptRunFileError, write_text

__all__ = ["CSV_COLUMNS", "MetricsLog", "read_metrics"]

CSV_COLUMNS = (
    "step", "epoch", "split", "loss", "accuracy", "perplexity", "rmse", "r2", "lr", "grad_norm",
    "elapsed_s",
)


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` file (an empty list when it does not exist).

    A last line without its newline that is no JSON is a record whose append was cut short (the
    process was killed while writing it): it is left out, and a resumed run drops it from the
    file.

    Raises:
        CorruptRunFileError: naming the file and line when any other line is no record (a JSON
            object with a ``step`` and a ``split``).
    """
    path = Path(path)
    if not path.exists():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise CorruptRunFileError(path, f"UnicodeDecodeError: {err}", _RECOVERY) from None
    lines = text.split("\n")
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            if number == len(lines):  # the unterminated last line: an interrupted append
                break
            raise CorruptRunFileError(path, f"line {number}: {err}", _RECOVERY) from None
        if not (isinstance(record, dict) and "step" in record and "split" in record):
            raise CorruptRunFileError(path, f"line {number} is no record with a step and a split",
                                      _RECOVERY)
        records.append(record)
    return records


#: What to do about a damaged ``metrics.jsonl``.
_RECOVERY = ("remove or repair that line to keep the run's other records, or delete the run "
             "directory to train the run again")


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
        write_text(self.jsonl, "".join(json.dumps(r) + "\n" for r in kept))
        table = io.StringIO()
        writer = csv.writer(table)
        writer.writerow(CSV_COLUMNS)
        writer.writerows(self._row(r) for r in kept)
        write_text(self.csv, table.getvalue())

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
