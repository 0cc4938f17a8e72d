"""The measured-time table of experiments/README.md, from the committed results.

For each ``experiments/results/<comparison>/results.json``: its methods × seeds, the wall time of
the command that wrote it (``elapsed_s``; runs an earlier, interrupted command had finished are
reused and not counted) and the sum of its runs' training times (``train_time_s``).

Run: ``python scripts/experiment_times.py`` (prints the Markdown table).
"""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "experiments" / "results"


def time_table(results: Path = RESULTS) -> str:
    """The Markdown table, one row per comparison, in name order."""
    lines = ["| comparison | methods × seeds | wall time of the command that wrote it "
             "| runs' training time, summed |", "|---|---|---|---|"]
    for path in sorted(results.glob("*/results.json")):
        result = json.loads(path.read_text())
        trained = sum(run.get("train_time_s") or 0 for run in result["runs"])
        lines.append(f"| `{path.parent.name}` | {len(result['methods'])} × "
                     f"{len(result['seeds'])} | {result['elapsed_s'] / 60:.1f} min "
                     f"| {trained / 60:.1f} min |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(time_table())
