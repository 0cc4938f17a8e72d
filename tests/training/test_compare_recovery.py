"""A comparison whose files were left half-written: the next one names each, computes it again,
and ends with the results of the first."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from filterformer.training.compare import compare
from filterformer.training.metrics_log import read_metrics

from .helpers import majority_task
from .test_execution import run_records, tiny_comparison


def _cut_short(path: Path, rng: np.random.Generator) -> None:
    text = path.read_text()
    path.write_text(text[: int(rng.integers(1, len(text) - 1))])


def test_half_written_summary_diagnostics_and_cost_are_named_and_recomputed(tmp_path):
    rng = np.random.default_rng()
    task = majority_task(num_train=48, num_eval=16, seed=int(rng.integers(1000)))
    config = tiny_comparison(tmp_path, seeds=[0], cost_rounds=1, cost_warmup_steps=1)
    first = compare(config, task=task, echo=lambda line: None, jobs=1)
    summary = Path(config.plan("softmax", 0).config.output_dir) / "summary.json"
    diagnostics = Path(config.plan("gfsa", 0).config.output_dir) / "diagnostics.json"
    cost = tmp_path / "cost.json"
    for path in (summary, diagnostics, cost):
        _cut_short(path, rng)
    lines: list[str] = []
    again = compare(config, task=task, echo=lines.append, jobs=1)
    for path in (summary, diagnostics, cost):
        assert any(f"{path} is corrupt (JSONDecodeError: " in line for line in lines), (path, lines)
    assert any(line.endswith("resumes the run from its last checkpoint (or trains it again) to "
                             "write it anew") for line in lines), lines
    assert any(line.endswith("it is computed again from the run's best checkpoint")
               for line in lines), lines
    assert any(line.endswith("the step times are measured again") for line in lines), lines
    assert run_records(again) == run_records(first)
    assert again.summary[0]["method"] == first.summary[0]["method"]
    assert set(again.cost["seeds"]["0"]["step_time_s"]) == {"softmax", "gfsa"}
    # The run finished again holds one test record, as if it had never been touched.
    records = read_metrics(summary.parent / "metrics.jsonl")
    assert [r["split"] for r in records].count("test") == 1
