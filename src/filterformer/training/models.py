"""The model a task needs, built from a :class:`TrainConfig`."""

from __future__ import annotations

from typing import Any

from torch import nn

from ..models import CausalLM, SequenceClassifier, TransformerConfig
from ..models.graph_bridge import GraphBridgeClassifier
from .config import TrainConfig

__all__ = ["SUPPORTED_KINDS", "build_model", "count_parameters", "model_config_for"]

#: Task kinds :func:`build_model` makes models for, and the model fields each one requires.
SUPPORTED_KINDS: dict[str, dict[str, Any]] = {
    "classification": {},
    "language_modeling": {"causal": True},
    # Graph-Bridge tokens carry their own positional codes and have no sequence order.
    "graph_classification": {"position": "none"},
}


def model_config_for(config: TrainConfig, task: Any) -> TransformerConfig:
    """The resolved :class:`TransformerConfig` of ``config`` on ``task`` (a ``TaskData``)."""
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


def build_model(config: TrainConfig, task: Any) -> nn.Module:
    """A :class:`SequenceClassifier`, :class:`CausalLM` or :class:`GraphBridgeClassifier` for
    ``task``, freshly initialised from torch's global generator."""
    model_config = model_config_for(config, task)
    if task.kind == "language_modeling":
        return CausalLM(model_config)
    if task.kind == "graph_classification":
        graph = task.train[0]  # every graph of a task has the same feature widths
        return GraphBridgeClassifier(
            model_config, graph.node_features.shape[1], graph.edge_features.shape[1],
            task.num_classes, pooling=config.pooling,
        )
    return SequenceClassifier(model_config, task.num_classes, pooling=config.pooling)


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters (shared tensors counted once)."""
    unique = {id(p): p for p in model.parameters() if p.requires_grad}
    return sum(p.numel() for p in unique.values())
