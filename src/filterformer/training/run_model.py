"""A trained run back to a model: :func:`load_run` reads a ``filterformer train`` run directory's
best (or last) checkpoint and returns the model in eval mode, with its configuration.

Every checkpoint records what rebuilds its model without the task's data (:func:`model_entries`):
the model's class and constructor arguments (:mod:`filterformer.models.saved_model`) and, for a
language model of text, its tokenizer. A checkpoint written before they were recorded is
rebuilt as the run built it, from its task.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..checks import check_choice
from ..data.text_tokenizer import TextTokenizer
from ..models.saved_model import SavesPretrained, model_description, model_from_description
from .checkpoint import load_checkpoint, load_model_state
from .model_building import ModelConfig, build_model, load_task_data, model_config_from_dict
from .pretrained import PretrainedModelConfig, build_pretrained
from .run_config import TrainConfig

__all__ = ["CHECKPOINTS", "LoadedRun", "load_run", "model_entries"]

#: The checkpoints of a run directory :func:`load_run` reads: ``checkpoints/<name>.pt``.
CHECKPOINTS = ("best", "last")
_REQUIRED = ("config", "model_config", "model")


@dataclass
class LoadedRun:
    """A run's model, as :func:`load_run` returns it.

    Attributes:
        model: the model, its weights loaded, in eval mode.
        config: the run's :class:`TrainConfig`.
        model_config: its resolved model configuration (a
            :class:`~filterformer.models.TransformerConfig`, or a
            :class:`~filterformer.training.pretrained.PretrainedModelConfig`).
        checkpoint: the file read.
        step: the optimiser step the checkpoint was written at.
        validation: the checkpoint's validation metrics (the best checkpoint's), else None.
        text_tokenizer: a language model's tokenizer of text (``text_lm`` runs), else None.
    """

    model: nn.Module = field(repr=False)
    config: TrainConfig
    model_config: ModelConfig
    checkpoint: Path
    step: int | None = None
    validation: dict[str, float] | None = None
    text_tokenizer: TextTokenizer | None = field(default=None, repr=False)


def model_entries(model: nn.Module, task: Any) -> dict[str, Any]:
    """What a checkpoint records beside the weights so that :func:`load_run` rebuilds ``model``
    without ``task``: the model's description, and the task's text tokenizer if it has one."""
    entries: dict[str, Any] = {}
    if isinstance(model, SavesPretrained):
        entries["model_description"] = model_description(model)
    tokenizer = getattr(task, "metadata", {}).get("text_tokenizer")
    if tokenizer is not None:
        entries["text_tokenizer"] = dict(tokenizer)
    return entries


def load_run(
    run_dir: str | os.PathLike,
    checkpoint: str = "best",
    *,
    device: str | torch.device = "cpu",
) -> LoadedRun:
    """The model of a ``filterformer train`` run (or of one run of a comparison).

    Args:
        run_dir: the run directory (``output_dir``: it holds ``checkpoints/``).
        checkpoint: ``"best"`` (the best validation metric's weights) or ``"last"`` (the
            latest step's, also of an interrupted run).
        device: where the model is put.

    Returns:
        :class:`LoadedRun`: the model in eval mode, its configuration, the step.

    Raises:
        ValueError: naming the directory or file when ``run_dir`` is no run directory, the
            checkpoint is missing, damaged or not a training checkpoint, its configuration is
            unreadable, or its weights do not fit the model or are not finite.
    """
    check_choice("checkpoint", checkpoint, CHECKPOINTS)
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ValueError(f"run directory {run_dir} does not exist or is not a directory")
    path = run_dir / "checkpoints" / f"{checkpoint}.pt"
    if not path.is_file():
        why = ("it holds no checkpoints/ folder: is it the output_dir of a filterformer train "
               "run?") if not path.parent.is_dir() else (
            f"{path} does not exist" + ("; the run has not validated yet: load checkpoint='last'"
                                        if checkpoint == "best" else ""))
        raise ValueError(f"run directory {run_dir} has no {checkpoint} checkpoint: {why}")
    state = load_checkpoint(path, required=_REQUIRED)
    try:
        config = TrainConfig.from_dict(state["config"])
        model_config = model_config_from_dict(state["model_config"])
    except (TypeError, ValueError) as err:
        raise ValueError(f"checkpoint {path} holds a configuration this version cannot read: "
                         f"{err}") from None
    model, tokenizer = _rebuild(state, config, model_config, path)
    load_model_state(model, state["model"], path)
    return LoadedRun(
        model=model.to(device).eval(), config=config, model_config=model_config,
        checkpoint=path, step=state.get("step"), validation=state.get("validation"),
        text_tokenizer=tokenizer,
    )


def _rebuild(
    state: dict[str, Any], config: TrainConfig, model_config: ModelConfig, path: Path
) -> tuple[nn.Module, TextTokenizer | None]:
    """A freshly built model of the checkpoint's kind, and its text tokenizer."""
    tokenizer = state.get("text_tokenizer")
    if isinstance(model_config, PretrainedModelConfig):
        model: nn.Module = build_pretrained(model_config, config.pooling)
    elif "model_description" in state:
        model = model_from_description(state["model_description"], f"checkpoint {path}")
    else:  # recorded by no earlier version: built as the run built it, from its task
        task = load_task_data(config.task, config.task_options)
        model = build_model(model_config, task, config.pooling)
        tokenizer = task.metadata.get("text_tokenizer")
    try:
        return model, None if tokenizer is None else TextTokenizer.from_dict(tokenizer)
    except ValueError as err:
        raise ValueError(f"checkpoint {path}: its text_tokenizer is unreadable: {err}") from None
