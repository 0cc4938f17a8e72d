"""Write the README's account of the built-in comparison from its committed results.

    python scripts/builtin_comparison_text.py [--check]

reads ``docs/results/compare_builtin/results.json`` and replaces the README's text between
``<!-- builtin-comparison:start -->`` and ``<!-- builtin-comparison:end -->``; ``--check`` only
says whether the README already holds that text (exit 1 when it does not).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from filterformer.training.compare.comparison_results import ComparisonResults, read_results_data
from filterformer.training.compare.context_sentences import findings_paragraph

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results" / "compare_builtin" / "results.json"
START, END = "<!-- builtin-comparison:start -->", "<!-- builtin-comparison:end -->"


def builtin_comparison_text(results_path: Path = RESULTS) -> str:
    """The README's block (markers excluded) for the results at ``results_path``."""
    results = ComparisonResults.from_dict(read_results_data(results_path), results_path)
    link = results_path.parent.relative_to(ROOT).as_posix()
    return (f"What the committed run of the built-in comparison found ([its results]({link}/), "
            f"generated from them by `scripts/builtin_comparison_text.py`): "
            f"{findings_paragraph(results)}")


def with_block(readme: str, block: str) -> str:
    """``readme`` with the text between the markers replaced by ``block``."""
    head, start, rest = readme.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"README.md lacks the markers {START} … {END}")
    return f"{head}{START}\n{block}\n{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check the README")
    args = parser.parse_args()
    readme_path = ROOT / "README.md"
    readme = readme_path.read_text(encoding="utf-8")
    updated = with_block(readme, builtin_comparison_text())
    if args.check:
        return 0 if updated == readme else 1
    readme_path.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
