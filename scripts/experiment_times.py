"""The measured-time tables of experiments/README.md, from the committed results.

For each ``experiments/results/<comparison>/results.json``: its methods × seeds, the wall time of
the command that wrote it (``elapsed_s``; runs an earlier, interrupted command had finished are
reused and not counted) and the sum of its runs' training times (``train_time_s``). Then, per
claim of ``experiments/claims.yaml`` (its ``tuning`` and ``settings`` comparisons), the time the
claim takes: per comparison the larger of its wall time and its runs' training time over the
runs trained at once (``--jobs`` of its command), which counts the reused runs of a resumed
comparison; and every claim together.

Run: ``python scripts/experiment_times.py`` (prints the Markdown tables).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"
RESULTS = EXPERIMENTS / "results"
CLAIM_BUDGET_MIN, TOTAL_BUDGET_H = 90, 8


def _trained_s(result: dict) -> float:
    return sum(run.get("train_time_s") or 0 for run in result["runs"])


def comparison_minutes(result: dict) -> float:
    """The larger of the comparison's wall time and its runs' training time over ``--jobs``."""
    jobs = re.search(r"--jobs[ =](\d+)", result["provenance"]["command"])
    return max(result["elapsed_s"], _trained_s(result) / int(jobs[1] if jobs else 1)) / 60


def time_table(results: Path = RESULTS) -> str:
    """The Markdown table, one row per comparison, in name order."""
    lines = ["| comparison | methods × seeds | wall time of the command that wrote it "
             "| runs' training time, summed |", "|---|---|---|---|"]
    for path in sorted(results.glob("*/results.json")):
        result = json.loads(path.read_text())
        lines.append(f"| `{path.parent.name}` | {len(result['methods'])} × "
                     f"{len(result['seeds'])} | {result['elapsed_s'] / 60:.1f} min "
                     f"| {_trained_s(result) / 60:.1f} min |")
    return "\n".join(lines)


def claim_table(results: Path = RESULTS, claims: Path = EXPERIMENTS / "claims.yaml") -> str:
    """The Markdown table of each claim's time against the budget, then all claims'."""
    lines = [f"| claim | comparisons | time (≤ {CLAIM_BUDGET_MIN} min each) |", "|---|---|---:|"]
    total = 0.0
    for claim in yaml.safe_load(claims.read_text()):
        tuning = claim.get("tuning") or []
        names = [*([tuning] if isinstance(tuning, str) else tuning),
                 *(setting["results"] for setting in claim["settings"])]
        found = [results / name / "results.json" for name in names]
        minutes = sum(comparison_minutes(json.loads(p.read_text())) for p in found if p.exists())
        missing = [name for name, p in zip(names, found, strict=True) if not p.exists()]
        total += minutes
        shown = f"{minutes:.0f} min" + (f" (not yet run: {', '.join(missing)})" if missing else "")
        lines.append(f"| {claim['id']} | {len(names)} | {shown} |")
    lines.append(f"| all | | {total / 60:.1f} h (≤ {TOTAL_BUDGET_H} h) |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(time_table(), "", claim_table(), sep="\n")
