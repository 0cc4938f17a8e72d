"""The committed run of the built-in comparison: it is of today's built-in budget, it shows what
the library is for, and the README's account of it is generated from it."""

from __future__ import annotations

from pathlib import Path

from filterformer.training.checkpoint import config_differences
from filterformer.training.compare import CompareConfig
from filterformer.training.compare.comparison_results import (
    ComparisonResults,
    read_results_data,
)

from .scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "compare_builtin" / "results.json"


def _results() -> ComparisonResults:
    return ComparisonResults.from_dict(read_results_data(RESULTS), RESULTS)


def test_the_committed_run_is_of_the_built_in_budget() -> None:
    results, built_in = _results(), CompareConfig()
    ignored = ("output_dir",)
    budget = {k: v for k, v in results.budget.items() if k not in ignored}
    expected = {k: v for k, v in built_in.base.to_dict().items() if k not in ignored}
    # The rule a resume and compare's reuse of a run apply: a key added since the run was made
    # reads as None there (the feature off, e.g. patience).
    assert config_differences(budget, expected, labels=("committed run", "built-in")) == []
    assert list(results.methods) == list(built_in.methods)
    assert list(results.seeds) == list(built_in.seeds)


def test_the_models_learn_far_above_chance_and_the_baseline_over_smooths() -> None:
    results = _results()
    scores = results.task["reference_scores"]
    floor = max(scores["chance_accuracy"], scores["majority_accuracy"])
    for row in results.summary:
        assert row["test_accuracy_mean"] > 3 * floor, row["method"]
    cosines = results.diagnostics[results.baseline]["token_cosine_similarity"]
    assert cosines[-1] > cosines[0] + 0.1


def test_the_readme_holds_the_text_generated_from_the_committed_run() -> None:
    script = load_script("builtin_comparison_text")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = script.builtin_comparison_text(RESULTS)
    assert script.with_block(readme, block) == readme
    assert script.with_block(readme, block + " changed") != readme
