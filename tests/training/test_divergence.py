"""A diverging run stops at its first non-finite step; a comparison keeps it out of every number."""

from __future__ import annotations

import csv
import json
import math
import random

import pytest
import torch

from filterformer.training import Trainer, load_checkpoint
from filterformer.training.compare import compare, load_compare_config
from filterformer.training.divergence import TrainingDiverged, divergence_reason
from filterformer.training.metrics_log import read_metrics

from .helpers import majority_task, tiny_config


def _huge_lr() -> float:
    return 10.0 ** random.uniform(9, 12)


def test_a_diverging_run_stops_at_its_first_non_finite_loss(tmp_path):
    task = majority_task(num_train=48, num_eval=16)
    config = tiny_config(tmp_path, max_steps=6, eval_every=1, optimizer={"lr": _huge_lr()},
                         schedule={"warmup_steps": 0})
    with pytest.raises(TrainingDiverged, match=r"training diverged at step \d+: loss is nan") \
            as caught:
        Trainer(config, task=task).fit()
    step = caught.value.step
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["diverged"] == {"step": step, "reason": "loss is nan"}
    assert summary["completed"] is False and summary["test"] is None
    assert summary["steps"] == step - 1
    # Every step before it was finite, and no checkpoint holds the diverged weights.
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert records[-1]["diverged"] == "loss is nan" and records[-1]["step"] == step
    assert all(not r.get("diverged") for r in records[:-1])
    for name in ("last.pt", "best.pt"):
        weights = load_checkpoint(tmp_path / "checkpoints" / name)["model"]
        assert all(torch.isfinite(w).all() for w in weights.values())
    assert not any(r["split"] == "test" for r in records)


def test_a_non_finite_gradient_is_divergence_except_under_a_gradient_scaler():
    finite = random.uniform(0.1, 10)
    for bad in (math.nan, math.inf, -math.inf):
        assert divergence_reason(bad, finite, scaled=False) == f"loss is {bad}"
        assert divergence_reason(bad, finite, scaled=True) == f"loss is {bad}"
        assert divergence_reason(finite, bad, scaled=False) == f"gradient norm is {bad}"
        assert divergence_reason(finite, bad, scaled=True) is None
    assert divergence_reason(finite, finite, scaled=False) is None


@pytest.fixture(scope="module")
def diverging_comparison(tmp_path_factory):
    """softmax, and softmax with a learning rate that diverges, 2 seeds each."""
    out = tmp_path_factory.mktemp("diverging")
    config = load_compare_config(
        None, ["task=majority", "model.dim=16", "model.depth=2", "model.num_heads=2",
               "batch_size=16", "max_steps=3", "schedule.warmup_steps=0", "progress=false",
               f"output_dir={out}"],
        methods=["softmax", {"name": "hot", "method": "softmax",
                             "set": {"optimizer.lr": _huge_lr()}}],
        seeds=[0, 1], diagnostics_batches=1, cost_rounds=0)
    task = majority_task(num_train=48, num_eval=16)
    lines = []
    results = compare(config, task=task, echo=lines.append)
    return config, task, results, lines


def test_a_comparison_records_diverged_runs_and_goes_on(diverging_comparison):
    config, _, results, lines = diverging_comparison
    assert sum("diverged at step" in line for line in lines) == 2
    hot = [r for r in results.runs if r["method"] == "hot"]
    assert all(r["diverged"]["reason"] == "loss is nan" and r["diverged"]["step"] >= 1
               for r in hot)
    assert all(r[key] is None for r in hot
               for key in ("test_accuracy", "validation_accuracy", "step_time_s",
                           "train_time_s", "peak_memory_bytes", "last_layer_cosine_similarity"))
    softmax = [r for r in results.runs if r["method"] == "softmax"]
    assert all(r["diverged"] is None and r["test_accuracy"] is not None for r in softmax)
    rows = {row["method"]: row for row in results.summary}
    assert (rows["hot"]["runs"], rows["hot"]["diverged"], rows["softmax"]["diverged"]) == (2, 2, 0)
    # No statistic is computed from a diverged run.
    assert rows["hot"]["test_accuracy_mean"] is None and rows["hot"]["step_time_s_median"] is None
    assert all(d["seeds"] == 0 and d["mean"] is None
               for d in rows["hot"]["difference"].values())
    assert "hot" not in results.diagnostics
    assert not (config.output_dir / "runs" / "hot" / "seed-0" / "diagnostics.json").exists()
    table = {row["method"]: row for row in csv.DictReader(
        (config.output_dir / "results.csv").open())}
    assert (table["hot"]["diverged"], table["softmax"]["diverged"]) == ("2", "0")
    assert table["hot"]["test_accuracy_mean"] == ""
    saved = json.loads((config.output_dir / "results.json").read_text())
    assert [r["diverged"] for r in saved["runs"]] == [r["diverged"] for r in results.runs]
    report = (config.output_dir / "report.html").read_text()
    assert "2 of 4 runs diverged" in report and "hot seed 1 at step" in report
    assert "2 (2 diverged)" in report


def test_a_rerun_reuses_the_diverged_runs(diverging_comparison):
    config, task, results, _ = diverging_comparison
    lines = []
    again = compare(config, task=task, echo=lines.append)
    assert sum("(reused): diverged at step" in line for line in lines) == 2
    assert [r["diverged"] for r in again.runs] == [r["diverged"] for r in results.runs]
