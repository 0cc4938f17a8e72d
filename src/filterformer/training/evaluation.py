"""Evaluating a model on a split: summed (or gathered) over processes, exact for any batch
split. Classification reports loss and accuracy (and perplexity for language modelling);
regression reports loss, RMSE and R² (:func:`regression_metrics`)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..graphs import GraphBatch
from .distributed import DistributedContext
from .precision import autocast

__all__ = [
    "IGNORE_INDEX",
    "MODEL_SELECTION",
    "evaluate",
    "is_better",
    "model_inputs",
    "regression_metrics",
]

IGNORE_INDEX = -100
#: The validation metric that selects the best checkpoint, per task kind, and whether higher
#: is better (a tie goes to the lower validation loss: :func:`is_better`).
MODEL_SELECTION = {
    "classification": ("accuracy", True),
    "graph_classification": ("accuracy", True),
    "language_modeling": ("perplexity", False),
    "graph_regression": ("rmse", False),
}


def model_inputs(batch: dict[str, Any] | GraphBatch, device: torch.device) -> dict[str, Any]:
    """A batch on ``device`` as the model's keyword arguments (``labels`` included).

    Sequence batches are dicts of tensors; a :class:`~filterformer.graphs.GraphBatch` becomes
    ``{"batch": graphs, "labels": graphs.labels}``.
    """
    if isinstance(batch, GraphBatch):
        graphs = batch.to(device)
        return {"batch": graphs, "labels": graphs.labels}
    non_blocking = device.type == "cuda"
    return {k: v.to(device, non_blocking=non_blocking) if isinstance(v, torch.Tensor) else v
            for k, v in batch.items()}


def is_better(kind: str, metrics: dict[str, float], best: dict[str, float] | None) -> bool:
    """Whether validation ``metrics`` beat the ``best`` so far under :data:`MODEL_SELECTION`.

    The task's metric decides; when it ties, the lower ``loss`` does (on a small validation
    split accuracy moves in coarse steps while the loss keeps falling). A full tie keeps
    ``best``; a metric that is not finite never wins and always loses.

    Args:
        kind: the task kind (a key of :data:`MODEL_SELECTION`).
        metrics: :func:`evaluate`'s result, with the selection metric and ``loss``.
        best: the best checkpoint's validation metrics (None before the first).
    """
    if best is None:
        return True
    name, higher = MODEL_SELECTION[kind]
    value, best_value = metrics[name], best[name]
    if not math.isfinite(value):
        return False
    if not math.isfinite(best_value):
        return True
    if value != best_value:
        return value > best_value if higher else value < best_value
    return metrics["loss"] < best["loss"]


def regression_metrics(predictions: Tensor, targets: Tensor) -> dict[str, float]:
    """Root mean squared error and coefficient of determination, in the targets' units.

    ``rmse = sqrt(mean((p − y)²))``; ``r2 = 1 − SSE / SST`` with ``SSE = Σ (p − y)²`` and
    ``SST = Σ (y − ȳ)²`` about the targets' own mean (0 for predicting that mean, 1 for a
    perfect fit, negative for worse than the mean); NaN when the targets are all equal.
    Computed in float64.

    Args:
        predictions: ``(n,)`` predicted values.
        targets: ``(n,)`` true values, n ≥ 1.
    """
    p, y = predictions.double().flatten(), targets.double().flatten()
    if p.shape != y.shape or not len(y):
        raise ValueError(f"predictions and targets must have the same non-zero length; got "
                         f"{tuple(predictions.shape)} and {tuple(targets.shape)}")
    sse = (p - y).square().sum().item()
    sst = (y - y.mean()).square().sum().item()
    return {"rmse": math.sqrt(sse / len(y)), "r2": 1.0 - sse / sst if sst > 0 else math.nan}


@torch.no_grad()
def evaluate(
    model: nn.Module,
    batches: Iterable[dict[str, Any]],
    kind: str,
    context: DistributedContext,
    precision: str = "fp32",
) -> dict[str, float]:
    """The task's metrics over every batch, without the auxiliary loss.

    Classification and language modelling: ``loss`` (cross-entropy) and ``accuracy``, averaged
    over samples or predicted tokens, and ``perplexity`` for language modelling. Regression
    (``graph_regression``): ``loss`` (the mean squared error of the standardised prediction,
    the training objective) and ``rmse`` and ``r2`` in the target's units
    (:func:`regression_metrics`). Each process passes its own share of the split; sums are
    combined (regression predictions gathered) across processes.

    Args:
        model: the unwrapped model; put in eval mode and restored afterwards.
        batches: dicts (or graph batches) with the model's inputs and ``labels``.
        kind: the task kind (a key of :data:`MODEL_SELECTION`).
        context: the processes to combine.
        precision: the resolved precision.
    """
    was_training = model.training
    model.eval()
    try:
        if kind == "graph_regression":
            return _evaluate_regression(model, batches, context, precision)
        return _evaluate_classes(model, batches, kind, context, precision)
    finally:
        model.train(was_training)


def _evaluate_classes(model: nn.Module, batches: Iterable[Any], kind: str,
                      context: DistributedContext, precision: str) -> dict[str, float]:
    loss_sum = correct = count = 0.0
    for batch in batches:
        inputs = model_inputs(batch, context.device)
        labels = inputs.pop("labels")
        with autocast(precision, context.device):
            logits = model(**inputs).logits
        logits = logits.float().flatten(0, -2)
        labels = labels.flatten()
        keep = labels != IGNORE_INDEX
        loss_sum += F.cross_entropy(logits[keep], labels[keep], reduction="sum").item()
        correct += (logits[keep].argmax(dim=-1) == labels[keep]).sum().item()
        count += keep.sum().item()
    loss_sum, correct, count = context.all_reduce_sum([loss_sum, correct, count])
    if count == 0:
        raise ValueError("evaluation split has no labelled items")
    metrics = {"loss": loss_sum / count, "accuracy": correct / count}
    if kind == "language_modeling":
        metrics["perplexity"] = math.exp(min(metrics["loss"], 700.0))
    return metrics


def _evaluate_regression(model: nn.Module, batches: Iterable[Any], context: DistributedContext,
                         precision: str) -> dict[str, float]:
    loss_sum, predictions, targets = 0.0, [], []
    for batch in batches:
        inputs = model_inputs(batch, context.device)
        with autocast(precision, context.device):
            out = model(**inputs)
        loss_sum += out.mse.item() * inputs["labels"].numel()
        predictions.append(out.predictions.float().flatten().cpu())
        targets.append(inputs["labels"].float().flatten().cpu())
    # R² needs the whole split's mean: every process's predictions are gathered.
    shares = context.all_gather_object(
        (loss_sum, torch.cat(predictions) if predictions else torch.empty(0),
         torch.cat(targets) if targets else torch.empty(0))
    )
    target = torch.cat([share[2] for share in shares])
    if not len(target):
        raise ValueError("evaluation split has no labelled items")
    prediction = torch.cat([share[1] for share in shares])
    loss = sum(share[0] for share in shares) / len(target)
    return {"loss": loss, **regression_metrics(prediction, target)}
