"""From a :class:`TrainConfig` to what a run trains: the task's data, the resolved model
configuration (once) and the model built from it.

A model configuration is a :class:`~filterformer.models.TransformerConfig` (a model trained from
scratch) or a :class:`~filterformer.training.pretrained.PretrainedModelConfig` (a pretrained
model with its method patched in); :func:`build_model` builds either, and
:func:`model_config_from_dict` reads either back from a checkpoint."""

from __future__ import annotations

import os
from typing import Any

from torch import nn

from ..data.task import GRAPH_KINDS
from ..models import CausalLM, SequenceClassifier, TransformerConfig
from ..models.graph_bridge import GraphBridgeClassifier, GraphBridgeRegressor
from .config_values import check_value
from .model_size import check_model_size
from .pretrained import PretrainedModelConfig, build_pretrained, resolve_pretrained
from .run_config import TrainConfig

__all__ = [
    "SUPPORTED_KINDS",
    "ModelConfig",
    "build_model",
    "count_parameters",
    "describe_task",
    "load_task_data",
    "model_config_from_dict",
    "resolve_model_config",
]

#: What :func:`resolve_model_config` returns and :func:`build_model` builds.
ModelConfig = TransformerConfig | PretrainedModelConfig

#: Task kinds :func:`build_model` makes models for, and the model fields each one requires.
SUPPORTED_KINDS: dict[str, dict[str, Any]] = {
    "classification": {},
    "language_modeling": {"causal": True},
    # Graph-Bridge tokens carry their own positional codes and have no sequence order.
    "graph_classification": {"position": "none"},
    "graph_regression": {"position": "none"},
}


def resolve_model_config(config: TrainConfig, task: Any) -> ModelConfig:
    """The model configuration of ``config`` on ``task`` (a ``TaskData``), resolved once and
    passed on.

    From scratch, a :class:`TransformerConfig`: explicit fields > method > the task's values >
    defaults. With ``config.pretrained``, a :class:`PretrainedModelConfig`
    (:func:`~filterformer.training.pretrained.resolve_pretrained`).

    Raises:
        ValueError: for a task kind training does not support, or fields that do not fit it.
    """
    if task.kind not in SUPPORTED_KINDS:
        raise ValueError(
            f"task {task.name!r} is of kind {task.kind!r}; training supports "
            f"{', '.join(SUPPORTED_KINDS)}"
        )
    if config.pretrained is not None:
        return resolve_pretrained(config.pretrained, config.model, config.method, task)
    graph = task.kind in GRAPH_KINDS
    return config.transformer_config(
        vocab_size=None if graph else task.vocab_size,
        input_dim=None if graph else task.input_dim,
        max_len=task.max_len,
        required=SUPPORTED_KINDS[task.kind],
    )


def build_model(model_config: ModelConfig, task: Any, pooling: str = "mean") -> nn.Module:
    """A :class:`SequenceClassifier`, :class:`CausalLM`, :class:`GraphBridgeClassifier` or
    :class:`GraphBridgeRegressor` (one output, on the task's standardised target) for ``task``,
    freshly initialised from torch's global generator; or, for a
    :class:`PretrainedModelConfig`, a fresh copy of the pretrained model, patched, with its head
    (:func:`~filterformer.training.pretrained.build_pretrained`).

    Every model takes the batch's keywords (``model(**model_inputs(batch, device))``) and
    returns ``.loss`` and ``.logits`` (a regressor: ``.predictions``).

    Args:
        model_config: the resolved configuration (:func:`resolve_model_config`).
        task: the ``TaskData`` (its kind, classes or target scale and, for graphs, feature
            widths).
        pooling: how a classifier pools its tokens (:data:`filterformer.nn.POOLINGS`).

    Raises:
        ValueError: for a model too large to train on this machine
            (:func:`~filterformer.training.model_size.check_model_size`), before allocating it.
    """
    if isinstance(model_config, PretrainedModelConfig):
        return build_pretrained(model_config, pooling)
    check_model_size(model_config)
    if task.kind == "language_modeling":
        return CausalLM(model_config)
    if task.kind in GRAPH_KINDS:
        graph = task.train[0]  # every graph of a task has the same feature widths
        widths = (graph.node_features.shape[1], graph.edge_features.shape[1])
        if task.kind == "graph_regression":
            return GraphBridgeRegressor(model_config, *widths, target_mean=task.target_mean,
                                        target_std=task.target_std, pooling=pooling)
        return GraphBridgeClassifier(model_config, *widths, task.num_classes, pooling=pooling)
    return SequenceClassifier(model_config, task.num_classes, pooling=pooling)


def model_config_from_dict(data: dict[str, Any]) -> ModelConfig:
    """A checkpoint's ``model_config`` read back: a :class:`PretrainedModelConfig` when it names
    its ``pretrained`` source, else a :class:`TransformerConfig`.

    Raises:
        ValueError: for unknown fields (listing the valid ones).
    """
    if "pretrained" in data:
        return PretrainedModelConfig.from_dict(data)
    return TransformerConfig.from_dict(data)


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters (shared tensors counted once)."""
    unique = {id(p): p for p in model.parameters() if p.requires_grad}
    return sum(p.numel() for p in unique.values())


def load_task_data(name: str, options: dict[str, Any]) -> Any:
    """``filterformer.data.load_task(name, **options)``: a ``TaskData``.

    Raises:
        ValueError: for an unknown task or option (from the data package, listing the valid
            ones), or an option of the wrong type (``task_options.<option> must be ...``).
    """
    # Imported on use: the data package pulls in its sources only when a run needs them.
    from ..data import load_task
    from ..data.task_registry import task_option_hints

    hints = task_option_hints(name)
    checked = {
        # A path given from Python is as good as its text.
        key: value if isinstance(value, os.PathLike) else
        check_value(value, hints.get(key, Any), f"task_options.{key}")
        for key, value in options.items()
    }
    return load_task(name, **checked)


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
        # a regression task's target scale (the training split's mean and std)
        **({"target_mean": task.target_mean, "target_std": task.target_std}
           if getattr(task, "target_std", None) is not None else {}),
    }
