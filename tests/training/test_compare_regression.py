"""Comparing methods on a regression task: test RMSE compared lower-is-better, end to end on
B3DB's logBB table."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from filterformer.training.compare import compare, load_compare_config
from filterformer.training.compare.statistics import compared_metrics, summarize
from filterformer.training.evaluation import MODEL_SELECTION


def _run(method: str, seed: int, rmse: float) -> dict:
    return {"method": method, "seed": seed, "test_rmse": rmse, "validation_rmse": rmse + 0.05,
            "last_layer_cosine_similarity": 0.5, "step_time_s": 0.01, "peak_memory_bytes": 1,
            "num_parameters": 10, "train_time_s": 1.0}


def test_every_selection_metric_is_compared_in_its_own_direction():
    for name, higher in MODEL_SELECTION.values():
        assert compared_metrics(name)[f"test_{name}"] is higher
    assert compared_metrics("rmse")["test_rmse"] is False
    with pytest.raises(ValueError, match=r"metric must be one of \('accuracy', .*'rmse'\)"):
        compared_metrics("mae")


def test_a_lower_test_rmse_on_every_seed_is_better_and_a_higher_one_worse():
    seeds = range(5)
    baseline = (torch.rand(5) * 0.3 + 0.6).tolist()
    gain = (torch.rand(5) * 0.02 + 0.03).tolist()  # 0.03–0.05 on every seed
    runs = [_run("softmax", s, baseline[s]) for s in seeds]
    runs += [_run("lower", s, baseline[s] - gain[s]) for s in seeds]
    runs += [_run("higher", s, baseline[s] + gain[s]) for s in seeds]
    rows = {row["method"]: row for row in
            summarize(runs, ["softmax", "lower", "higher"], "rmse", "softmax")}
    assert rows["softmax"]["test_rmse_mean"] == pytest.approx(sum(baseline) / 5)
    lower = rows["lower"]["difference"]["test_rmse"]
    assert lower["mean"] < 0 and lower["ci_high"] < 0 and lower["verdict"] == "better"
    assert rows["higher"]["difference"]["test_rmse"]["verdict"] == "worse"


@pytest.mark.slow
def test_a_tiny_b3db_regression_comparison_writes_rmse_rows(tmp_path):
    overrides = ["task=b3db", "task_options.table=regression", "task_options.num_train=64",
                 f"task_options.cache_dir={tmp_path / 'cache'}", "model.dim=16",
                 "model.depth=2", "model.num_heads=2", "model.mlp_ratio=2.0", "batch_size=16",
                 "max_steps=3", "progress=false", f"output_dir={tmp_path / 'compare'}"]
    config = load_compare_config(None, overrides, methods=["softmax", "samsa_hard"], seeds=[0],
                                 diagnostics_batches=1)
    results = compare(config, echo=lambda line: None)
    saved = json.loads((tmp_path / "compare" / "results.json").read_text())
    assert saved["metric"] == results.metric == "rmse"
    assert saved["task"]["kind"] == "graph_regression" and saved["task"]["num_train"] == 64
    rows = {row["method"]: row for row in saved["summary"]}
    for row in rows.values():
        assert row["test_rmse_mean"] > 0 and row["validation_rmse_mean"] > 0
    difference = rows["samsa_hard"]["difference"]["test_rmse"]
    assert difference["mean"] == pytest.approx(
        rows["samsa_hard"]["test_rmse_mean"] - rows["softmax"]["test_rmse_mean"])
    assert difference["verdict"] == "too few seeds" and rows["softmax"]["difference"] is None
    for run in saved["runs"]:
        assert set(run["test"]) == {"loss", "rmse", "r2"}
        assert len(run["cosine_similarity_per_layer"]) == 3  # the Transformer behind the tokens
    with open(tmp_path / "compare" / "results.csv", newline="") as f:
        header = next(csv.reader(f))
    assert {"test_rmse_mean", "test_rmse_difference_verdict"} <= set(header)
    assert "test rmse" in (tmp_path / "compare" / "report.html").read_text()
