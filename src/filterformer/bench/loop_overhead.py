"""The training loop's overhead: the trainer's step against a bare loop, paired.

A trainer step is one pass of ``filterformer train``'s loop
(:meth:`~filterformer.training.Trainer.train_batch` on the next batch of
:meth:`~filterformer.training.Trainer.epoch_batches`: reading the batch, the step, the schedule,
the loss read back, progress, logging); a bare step is forward, backward, clipping and AdamW on a
model built alike, on the trainer's last batch. The run is ``filterformer train``'s default
(:func:`loop_config`). The sides alternate in rounds (:func:`~filterformer.timing.
paired_step_times`): rows ``loop-trainer`` and ``loop-bare``, mode ``train``, N the task's
longest sequence.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ..timing import paired_step_times
from ..training import TrainConfig, Trainer
from ..training.checkpoint import seed_everything
from ..training.evaluation import model_inputs
from ..training.model_building import build_model, load_task_data
from ..training.optimization import build_optimizer
from ..training.progress import TrainProgress
from .records import BenchRecord, round_records

__all__ = ["LoopSides", "loop_config", "measure_loop_overhead", "run"]

#: ``max_steps`` and ``eval_every`` of the measured run: no step it takes is the last, and none
#: validates.
NEVER = 10**9


def loop_config(base: TrainConfig | None = None, *, output_dir: str | Path,
                device: str = "cpu") -> TrainConfig:
    """``base`` (default: ``TrainConfig()``, what ``filterformer train`` runs) as the measurement
    runs it: ``output_dir`` and ``device``, fp32, no progress, a constant learning rate from the
    first step (so both sides take the same updates), no validation, checkpoint or end within
    reach."""
    data = (base or TrainConfig()).to_dict()
    data.update(
        output_dir=str(output_dir), device=device, precision="fp32", progress=False,
        max_steps=NEVER, eval_every=NEVER, checkpoint_every=None, stop_after=None,
        schedule={**data["schedule"], "warmup_steps": 0, "decay": "constant"},
    )
    return TrainConfig.from_dict(data)


class LoopSides:
    """The trainer on ``config`` (:func:`loop_config`) and ``task``, a pass of its loop a step,
    and a bare loop beside it: the trainer's model built again from the same seed and the same
    optimiser, stepping on the trainer's last batch."""

    def __init__(self, config: TrainConfig, task: Any) -> None:
        self.trainer = Trainer(config, task=task)
        self.progress = TrainProgress("loop overhead", self.trainer.total_steps,
                                      steps_per_epoch=self.trainer.steps_per_epoch,
                                      enabled=False)
        self._batches: Iterator[dict[str, Any]] = iter(())
        self.batch = self.inputs = None
        seed_everything(config.seed)
        self.model = build_model(self.trainer.model_config, task, config.pooling)
        self.model.to(self.trainer.device)
        self.optimizer = build_optimizer(self.model, config.optimizer)
        self.max_norm = math.inf if config.grad_clip is None else config.grad_clip

    def trainer_step(self) -> None:
        """The next batch read (a new epoch's loader when the last ran out, as the trainer
        does), then one pass of the loop on it."""
        self.batch = next(self._batches, None)
        if self.batch is None:
            self._batches = iter(self.trainer.epoch_batches())
            self.batch = next(self._batches)
        self.trainer.train_batch(self.batch, self.progress)

    def move_batch(self) -> None:
        """The trainer's last batch moved to the device for the bare step (untimed)."""
        self.inputs = model_inputs(self.batch, self.trainer.device)

    def bare_step(self) -> None:
        """Forward, backward, clipping and AdamW on the batch :meth:`move_batch` moved."""
        self.model(**self.inputs).loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def measure_loop_overhead(base: TrainConfig | None = None, *, task: Any = None,
                          device: str = "cpu", rounds: int = 20) -> list[BenchRecord]:
    """The trainer's step and the bare loop's on ``base`` (:func:`loop_config`; ``task``
    loaded from it when None), alternated in ``rounds`` rounds (two or more) after two warm-up
    rounds: records ``loop-trainer`` and ``loop-bare``."""
    with tempfile.TemporaryDirectory(prefix="loop-overhead-") as run_dir:
        config = loop_config(base, output_dir=run_dir, device=device)
        if task is None:
            task = load_task_data(config.task, config.task_options)
        sides = LoopSides(config, task)
        try:
            times = paired_step_times(
                [sides.trainer_step, sides.bare_step], rounds=rounds, warmup_steps=2,
                prepare=lambda side, _: sides.move_batch() if side == 1 else None)
        finally:
            sides.trainer.context.close()
    model = sides.trainer.model_config
    common = dict(N=task.max_len, mode="train", device=device, batch=config.batch_size,
                  heads=model.num_heads, dim=model.dim // model.num_heads, width=model.dim,
                  level="model")
    return round_records(times, [
        dict(method="loop-trainer", baseline="loop-bare", **common,
             notes=f"a pass of filterformer train's loop on {task.name}"),
        dict(method="loop-bare", **common, notes="forward, backward, clipping, AdamW"),
    ])


def run(quick: bool, device: str) -> list[BenchRecord]:
    """:func:`measure_loop_overhead` of ``filterformer train``'s default run (with ``quick``, a
    one-layer model of width 16 on the same task, in 3 rounds)."""
    if quick:
        tiny = TrainConfig(model={"dim": 16, "depth": 1, "num_heads": 2, "mlp_ratio": 2.0})
        return measure_loop_overhead(tiny, device=device, rounds=3)
    return measure_loop_overhead(device=device)
