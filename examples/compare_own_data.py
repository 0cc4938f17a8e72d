"""Compare methods on your own data: softmax attention, GFSA and NeuTRENO as language models of
your own text file, several seeds, one budget, one report.

Any text file works (here the repository's README when none is given); `compare` trains every
method with every seed, measures their cost side by side and writes `report.html`,
`results.csv` and `results.json` (with each method's difference from softmax, its interval and
verdict) into the output directory.

    python examples/compare_own_data.py [--text my_notes.txt] [--steps 200] [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from filterformer.training.compare import compare, load_compare_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text", default=str(Path(__file__).resolve().parents[1] / "README.md"))
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--output", default="runs/compare_own_text")
    parser.add_argument("--cost-rounds", type=int, default=6,
                        help="rounds of the side-by-side time-per-step measurement (0: none)")
    args = parser.parse_args()
    config = load_compare_config(None, [
        "task=text_lm", f"task_options.path={args.text}", "task_options.level=byte",
        f"max_steps={args.steps}", f"output_dir={args.output}",
    ], methods=["softmax", "gfsa", "neutreno"], seeds=args.seeds, cost_rounds=args.cost_rounds)
    results = compare(config, jobs=None)  # as many runs at a time as fit the cores
    for row in results.summary:
        print({key: row[key] for key in row if key in ("method", "test_perplexity_mean",
                                                        "test_loss_mean")})
    print(f"report: {args.output}/report.html")


if __name__ == "__main__":  # compare's worker processes import this file
    main()
