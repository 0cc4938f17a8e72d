"""Regression: RMSE and R² against closed forms, model selection on RMSE, evaluation in the
target's units, and a short B3DB logBB training that beats predicting the training mean."""

from __future__ import annotations

import math

import pytest
import torch
from sklearn.metrics import r2_score

from filterformer.data import load_task
from filterformer.data.task import TaskData
from filterformer.graphs import Graph, collate_graphs
from filterformer.training import Trainer
from filterformer.training.distributed import DistributedContext
from filterformer.training.evaluation import (
    MODEL_SELECTION,
    evaluate,
    is_better,
    regression_metrics,
)
from filterformer.training.model_building import build_model, resolve_model_config

from .helpers import tiny_config


def _targets(n: int) -> torch.Tensor:
    """Fresh targets on a random scale and offset, float64."""
    scale, offset = float(torch.rand(()) * 3 + 0.1), float(torch.randn(()) * 5)
    return torch.randn(n, dtype=torch.float64) * scale + offset


@pytest.mark.parametrize("n", [2, 7, 300])
def test_shifted_predictions_give_rmse_c_and_r2_one_minus_c2_over_variance(n):
    targets = _targets(n)
    shift = float(torch.randn(()))
    metrics = regression_metrics(targets + shift, targets)
    variance = float(((targets - targets.mean()) ** 2).mean())  # about the split's own mean
    assert metrics["rmse"] == pytest.approx(abs(shift), rel=1e-9)
    assert metrics["r2"] == pytest.approx(1 - shift**2 / variance, rel=1e-9)


def test_predicting_the_mean_gives_r2_zero_and_rmse_the_std():
    targets = _targets(50)
    metrics = regression_metrics(torch.full_like(targets, float(targets.mean())), targets)
    assert metrics["r2"] == pytest.approx(0.0, abs=1e-12)
    assert metrics["rmse"] == pytest.approx(float(targets.std(unbiased=False)), rel=1e-9)
    assert regression_metrics(targets, targets) == {"rmse": 0.0, "r2": 1.0}


def test_any_predictions_match_scikit_learn():
    targets = _targets(40)
    predictions = targets + torch.randn(40, dtype=torch.float64) * 2.0
    metrics = regression_metrics(predictions.float(), targets.float())
    assert metrics["r2"] == pytest.approx(r2_score(targets.float(), predictions.float()),
                                          rel=1e-5)
    rmse = math.sqrt(float(((predictions.float().double() - targets.float().double()) ** 2)
                           .mean()))
    assert metrics["rmse"] == pytest.approx(rmse, rel=1e-9)


def test_constant_targets_leave_r2_undefined_and_bad_shapes_raise():
    value = float(torch.randn(()))
    assert math.isnan(regression_metrics(torch.randn(5), torch.full((5,), value))["r2"])
    with pytest.raises(ValueError, match="same non-zero length"):
        regression_metrics(torch.randn(4), torch.randn(5))
    with pytest.raises(ValueError, match="same non-zero length"):
        regression_metrics(torch.empty(0), torch.empty(0))


def test_rmse_selects_the_lower_and_a_tie_goes_to_the_lower_loss():
    assert MODEL_SELECTION["graph_regression"] == ("rmse", False)
    rmse, loss = float(torch.rand(()) + 0.5), float(torch.rand(()) + 0.5)
    best = {"rmse": rmse, "r2": 0.1, "loss": loss}
    kind = "graph_regression"
    assert is_better(kind, {"rmse": rmse - 0.01, "r2": 0.0, "loss": loss + 1.0}, best)
    assert not is_better(kind, {"rmse": rmse + 0.01, "r2": 0.9, "loss": loss - 1.0}, best)
    assert is_better(kind, {"rmse": rmse, "r2": 0.0, "loss": loss - 1e-3}, best)
    assert not is_better(kind, dict(best), best)
    assert not is_better(kind, {"rmse": math.nan, "r2": 0.0, "loss": 0.0}, best)


def _graph_regression_task(num_graphs: int = 40) -> TaskData:
    """Small random graphs whose target is the sum of their first node feature, on a random
    scale: learnable, and far from standardised."""
    scale, offset = float(torch.rand(()) * 4 + 1), float(torch.randn(()) * 3)
    graphs = []
    for _ in range(num_graphs):
        n = int(torch.randint(2, 6, ()))
        path = [[i, i + 1] for i in range(n - 1)]
        edges = torch.tensor(path + [[j, i] for i, j in path])  # both directions
        nodes = torch.randn(n, 4)
        target = offset + scale * float(nodes[:, 0].sum())
        graphs.append(Graph(nodes, edges.t(), torch.randn(len(edges), 2), target))
    train = [g.label for g in graphs[:24]]
    mean = sum(train) / len(train)
    std = math.sqrt(sum((y - mean) ** 2 for y in train) / len(train))
    return TaskData(name="sums", kind="graph_regression", train=graphs[:24],
                    validation=graphs[24:32], test=graphs[32:], collate=collate_graphs,
                    num_classes=None, vocab_size=None, input_dim=None, max_len=13,
                    target_mean=mean, target_std=std)


def test_evaluation_reports_the_targets_units_and_the_standardised_loss(tmp_path):
    task = _graph_regression_task()
    model = build_model(resolve_model_config(tiny_config(tmp_path, task="sums"), task), task)
    batches = [collate_graphs(task.validation[:5]), collate_graphs(task.validation[5:])]
    metrics = evaluate(model, batches, task.kind, DistributedContext())
    model.eval()
    with torch.no_grad():
        predictions = torch.cat([model(batch).predictions for batch in batches])
    targets = torch.tensor([g.label for g in task.validation])
    assert metrics == pytest.approx({"loss": metrics["rmse"] ** 2 / task.target_std**2,
                                     **regression_metrics(predictions, targets)}, rel=1e-5)


@pytest.mark.slow
def test_short_b3db_training_beats_predicting_the_training_mean(tmp_path):
    task = load_task("b3db", table="regression", cache_dir=tmp_path / "cache")
    config = tiny_config(tmp_path / "run", task="b3db", task_options={"table": "regression"},
                         batch_size=32, epochs=6, optimizer={"lr": 5e-3})
    result = Trainer(config, task=task).fit()
    validation = torch.tensor([g.label for g in task.validation])
    constant = regression_metrics(torch.full_like(validation, task.target_mean), validation)
    assert result.steps <= 200
    assert result.best_validation["rmse"] < constant["rmse"]
    assert result.best_validation["r2"] > 0.0
    assert math.isfinite(result.test["rmse"]) and math.isfinite(result.test["r2"])
