"""Evaluating a model on a split: summed over processes, exact for any batch split."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..graphs import GraphBatch
from .distributed import DistributedContext
from .precision import autocast

__all__ = ["IGNORE_INDEX", "MODEL_SELECTION", "evaluate", "is_better", "model_inputs"]

IGNORE_INDEX = -100
#: The validation metric that selects the best checkpoint, per task kind, and whether higher
#: is better (a tie goes to the lower validation loss: :func:`is_better`).
MODEL_SELECTION = {
    "classification": ("accuracy", True),
    "graph_classification": ("accuracy", True),
    "language_modeling": ("perplexity", False),
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


@torch.no_grad()
def evaluate(
    model: nn.Module,
    batches: Iterable[dict[str, Any]],
    kind: str,
    context: DistributedContext,
    precision: str = "fp32",
) -> dict[str, float]:
    """Loss and accuracy (and perplexity for language modelling) over every batch.

    Loss is the task's cross-entropy alone (no auxiliary loss), averaged over samples
    (classification) or predicted tokens (language modelling); accuracy likewise. Each process
    passes its own share of the split; sums are combined across processes.

    Args:
        model: the unwrapped model; put in eval mode and restored afterwards.
        batches: dicts with the model's inputs and ``labels``.
        kind: the task kind (a key of :data:`MODEL_SELECTION`).
        context: the processes to sum over.
        precision: the resolved precision.
    """
    was_training = model.training
    model.eval()
    loss_sum = correct = count = 0.0
    try:
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
    finally:
        model.train(was_training)
    loss_sum, correct, count = context.all_reduce_sum([loss_sum, correct, count])
    if count == 0:
        raise ValueError("evaluation split has no labelled items")
    metrics = {"loss": loss_sum / count, "accuracy": correct / count}
    if kind == "language_modeling":
        metrics["perplexity"] = math.exp(min(metrics["loss"], 700.0))
    return metrics
