"""From a :class:`TrainConfig` to what a run trains: the task's data, the resolved model
configuration (once) and the model built from it."""

from __future__ import annotations

from typing import Any

from torch import nn

from ..models import CausalLM, SequenceClassifier, TransformerConfig
from ..models.graph_bridge import GraphBridgeClassifier
from .run_config import TrainConfig

__all__ = [
    "SUPPORTED_KINDS",
    "build_model",
    "count_parameters",
    "describe_task",
    "load_task_data",
    "resolve_model_config",
]

#: Task kinds :func:`build_model` makes models for, and the model fields each one requires.
SUPPORTED_KINDS: dict[str, dict[str, Any]] = {
    "classification": {},
    "language_modeling": {"causal": True},
    # Graph-Bridge tokens carry their own positional codes and have no sequence order.
    "graph_classification": {"position": "none"},
}


def resolve_model_config(config: TrainConfig, task: Any) -> TransformerConfig:
    """The :class:`TransformerConfig` of ``config`` on ``task`` (a ``TaskData``): explicit
    fields > method > the task's values > defaults. A run resolves it once and passes it on.

    Raises:
        ValueError: for a task kind training does not support, or fields that do not fit it.
    """
    if task.kind not in SUPPORTED_KINDS:
        raise ValueError(
            f"task {task.name!r} is of kind {task.kind!r}; training supports "
            f"{', '.join(SUPPORTED_KINDS)}"
        )
    graph = task.kind == "graph_classification"
    return config.transformer_config(
        vocab_size=None if graph else task.vocab_size,
        input_dim=None if graph else task.input_dim,
        max_len=task.max_len,
        required=SUPPORTED_KINDS[task.kind],
    )


def build_model(model_config: TransformerConfig, task: Any, pooling: str = "mean") -> nn.Module:
    """A :class:`SequenceClassifier`, :class:`CausalLM` or :class:`GraphBridgeClassifier` for
    ``task``, freshly initialised from torch's global generator.

    Args:
        model_config: the resolved configuration (:func:`resolve_model_config`).
        task: the ``TaskData`` (its kind, classes and, for graphs, feature widths).
        pooling: how a classifier pools its tokens (:data:`filterformer.nn.POOLINGS`).
    """
    if task.kind == "language_modeling":
        return CausalLM(model_config)
    if task.kind == "graph_classification":
        graph = task.train[0]  # every graph of a task has the same feature widths
        return GraphBridgeClassifier(
            model_config, graph.node_features.shape[1], graph.edge_features.shape[1],
            task.num_classes, pooling=pooling,
        )
    return SequenceClassifier(model_config, task.num_classes, pooling=pooling)


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters (shared tensors counted once)."""
    unique = {id(p): p for p in model.parameters() if p.requires_grad}
    return sum(p.numel() for p in unique.values())


def load_task_data(name: str, options: dict[str, Any]) -> Any:
    """``filterformer.data.load_task(name, **options)``: a ``TaskData``.

    Raises:
        ValueError: for an unknown task or option (from the data package, listing the valid ones).
    """
    # Imported on use: the data package pulls in its sources only when a run needs them.
    from ..data import load_task

    return load_task(name, **options)


def describe_task(task: Any) -> dict[str, Any]:
    """Plain facts about a ``TaskData`` for summaries and reports."""
    return {
        "name": task.name,
        "kind": task.kind,
        "num_train": len(task.train),
        "num_validation": len(task.validation),
        "num_test": len(task.test),
        "num_classes": task.num_classes,
        "max_len": task.max_len,
    }
