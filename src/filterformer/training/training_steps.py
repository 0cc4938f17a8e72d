"""A model's training step, built once and then taken again and again on given batches.

The step is the training loop's (:func:`~.optimization.training_step`: forward under autocast,
backward, gradient clipping, the AdamW update, gradients cleared) without the learning-rate
schedule. Everything that times a training step builds it here: compare's cost measurement
(:mod:`.compare.cost`, a run's model on the task's real batches with the run's optimiser
settings), compare's dry run, and the benchmark's classifier case
(:func:`filterformer.bench.model_cases.classifier_case`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .batches import make_loader, training_batches
from .compilation import compile_model, mark_sequence_dynamic
from .evaluation import model_inputs
from .model_building import ModelConfig, build_model
from .optimization import build_optimizer, training_step
from .precision import grad_scaler, resolve_precision
from .run_config import OptimizerConfig, TrainConfig

__all__ = ["TrainingStep", "run_training_step", "training_inputs"]


class TrainingStep:
    """``model`` with its AdamW optimiser and ``batches``, ready to take training steps.

    With ``compile`` the steps run the compiled model, as a compiled run's training does
    (:mod:`.compilation`; the first step compiles; the batches' sequence dimension is marked
    dynamic so that every length shares one graph).

    Args:
        model: the model, on ``device``; its output has ``.loss``. It is put in ``train()``.
        batches: its inputs (keyword arguments, ``labels`` included, on ``device``); the steps
            take the first until :meth:`use_batch` picks another.
        optimizer: the AdamW settings (:func:`~.optimization.build_optimizer`).
        grad_clip: the global gradient norm clipped to (None: no clipping).
        precision: ``auto``, ``fp32``, ``bf16`` or ``fp16`` (resolved for ``device``).
        device: where the model lives.
        compile: whether the steps run ``torch.compile``'s model.
    """

    def __init__(self, model: nn.Module, batches: list[dict[str, Any]], *,
                 optimizer: OptimizerConfig, grad_clip: float | None, precision: str,
                 device: torch.device, compile: bool = False) -> None:
        if not batches:
            raise ValueError("batches must hold at least one batch; got none")
        self.model = model.train()
        self.step_model = compile_model(model) if compile else model
        self.optimizer = build_optimizer(model, optimizer)
        self.device = device
        self.precision = resolve_precision(precision, device)
        self.scaler = grad_scaler(self.precision, device)
        self.grad_clip = grad_clip
        self.batches = batches
        if compile:
            for inputs in batches:
                mark_sequence_dynamic(inputs)
        self.inputs = batches[0]

    def use_batch(self, index: int) -> None:
        """Take the next steps on batch ``index`` (modulo the batches there are)."""
        self.inputs = self.batches[index % len(self.batches)]

    def step(self) -> torch.Tensor:
        """One training step on the current batch; returns its loss (a 0-dimensional tensor;
        reading it waits for the device)."""
        loss, _ = training_step(self.step_model, self.inputs, self.optimizer, self.scaler,
                                precision=self.precision, device=self.device,
                                grad_clip=self.grad_clip, parameters=self.model)
        return loss


def run_training_step(config: TrainConfig, model_config: ModelConfig, task: Any,
                      device: torch.device, batches: list[dict[str, Any]]) -> TrainingStep:
    """The training step of run ``config``: its model built from ``config.seed`` on ``device``,
    with the run's optimiser settings, clipping, precision and ``compile``.

    Args:
        config: the run.
        model_config: its model's configuration, resolved once for the method
            (:func:`~.compare.run_plans.resolve_models`).
        task: the ``TaskData``.
        device: where the model lives.
        batches: the model's inputs (on ``device``), e.g. :func:`training_inputs`.
    """
    torch.manual_seed(config.seed)
    model = build_model(model_config, task, config.pooling).to(device)
    return TrainingStep(model, batches, optimizer=config.optimizer, grad_clip=config.grad_clip,
                        precision=config.precision, device=device, compile=config.compile)


def training_inputs(task: Any, batch_size: int, seed: int, count: int,
                    device: torch.device) -> list[dict[str, Any]]:
    """The first ``count`` training batches of the seed's first epoch, as model inputs."""
    chosen = training_batches(task.train, batch_size, epoch=0, seed=seed)[:count]
    loader = make_loader(task.train, chosen, task.collate, seed=seed)
    return [model_inputs(batch, device) for batch in loader]
