"""The training loop's overhead: the trainer's step against a bare loop, paired.

The trainer's side is ``filterformer train``'s loop itself: a :class:`~filterformer.training.
Trainer` on the task, each step one pass of its loop (:meth:`~filterformer.training.Trainer.
train_batch` on the next batch of :meth:`~filterformer.training.Trainer.epoch_batches`): the
batch read and collated by the ``DataLoader`` and moved to the device, the training step
(forward, backward, gradient clipping, AdamW update, gradients cleared), the learning-rate
schedule, the loss and gradient norm read back, progress, and a metrics record every
``log_every`` steps. The bare side is a model built the same way from the same seed, the same
AdamW (the same parameter groups), and the same batches in the same order, collated and moved
before each step, untimed; its step is forward, backward, ``clip_grad_norm_``, ``step``,
``zero_grad``. The two sides alternate in rounds (:func:`~filterformer.timing.paired_step_times`).

The run is ``filterformer train``'s defaults (the built-in task, ListOps ``tiny``; batch 32; the
default model) with what the measurement needs (:func:`loop_config`): float32 on both sides; a
constant learning rate from the first step, so both sides take the same updates (equal weights
after equal steps show the bare loop is the same training); no validation or checkpoint among
the timed steps; no progress output; a temporary run directory.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..timing import paired_step_times, time_step
from ..training import TrainConfig, Trainer
from ..training.batches import make_loader, training_batches
from ..training.checkpoint import seed_everything
from ..training.evaluation import model_inputs
from ..training.model_building import build_model, load_task_data, resolve_model_config
from ..training.optimization import build_optimizer
from ..training.progress import TrainProgress

__all__ = ["BareLoop", "LoopOverheadRecord", "TrainerLoop", "loop_config",
           "measure_loop_overhead", "trainer_batch_order"]

#: ``max_steps`` and ``eval_every`` of the measured run: no step it takes is the last, and none
#: validates.
NEVER = 10**9


def loop_config(base: TrainConfig | None = None, *, output_dir: str | Path,
                device: str = "cpu") -> TrainConfig:
    """``base`` (default: ``TrainConfig()``, what ``filterformer train`` runs) as the measurement
    runs it: ``output_dir`` and ``device``, fp32, no progress, a constant learning rate without
    warm-up, and no validation, checkpoint or end within reach."""
    data = (base or TrainConfig()).to_dict()
    data.update(
        output_dir=str(output_dir), device=device, precision="fp32", progress=False,
        max_steps=NEVER, eval_every=NEVER, checkpoint_every=None, stop_after=None,
        schedule={**data["schedule"], "warmup_steps": 0, "decay": "constant"},
    )
    return TrainConfig.from_dict(data)


def trainer_batch_order(config: TrainConfig, task: Any, device: torch.device
                        ) -> Iterator[dict[str, Any]]:
    """The model inputs a single-process :class:`Trainer` of ``config`` reads, step after step,
    epoch after epoch, each collated when asked for."""
    epoch = 0
    while True:
        chosen = training_batches(task.train, config.batch_size, epoch=epoch, seed=config.seed)
        for batch in make_loader(task.train, chosen, task.collate, seed=config.seed + epoch):
            yield model_inputs(batch, device)
        epoch += 1


class TrainerLoop:
    """The trainer's loop, one pass at a time.

    Args:
        config: the run (:func:`loop_config`).
        task: its ``TaskData``.
    """

    def __init__(self, config: TrainConfig, task: Any) -> None:
        self.trainer = Trainer(config, task=task)
        self.model = self.trainer.model
        self.progress = TrainProgress("loop overhead", self.trainer.total_steps,
                                      steps_per_epoch=self.trainer.steps_per_epoch,
                                      enabled=False)
        self._batches: Iterator[dict[str, Any]] = iter(())

    def step(self) -> None:
        """The next batch read, then one pass of the loop on it (a new epoch's loader made
        when the last one ran out, as the trainer does)."""
        batch = next(self._batches, None)
        if batch is None:
            self._batches = iter(self.trainer.epoch_batches())
            batch = next(self._batches)
        self.trainer.train_batch(batch, self.progress)

    def close(self) -> None:
        self.trainer.context.close()


class BareLoop:
    """Forward, backward, clipping and AdamW on the batches a :class:`TrainerLoop` reads.

    Args:
        config: the run; its seed initialises the model as the trainer's seed does.
        task: its ``TaskData``.
        device: where the model lives.
    """

    def __init__(self, config: TrainConfig, task: Any, device: torch.device) -> None:
        seed_everything(config.seed)
        self.model = build_model(resolve_model_config(config, task), task, config.pooling)
        self.model.to(device)
        self.optimizer = build_optimizer(self.model, config.optimizer)
        self.max_norm = math.inf if config.grad_clip is None else config.grad_clip
        self._order = trainer_batch_order(config, task, device)
        self.inputs: dict[str, Any] | None = None

    def next_batch(self) -> None:
        """Collate the next batch and move it to the device (outside the timed step)."""
        self.inputs = next(self._order)

    def step(self) -> None:
        """One bare training step on the batch :meth:`next_batch` prepared."""
        loss = self.model(**self.inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


@dataclass
class LoopOverheadRecord:
    """The trainer's step against the bare loop's.

    Attributes:
        task, method, batch_size, log_every: the run measured.
        trainer_ms, bare_ms: the median over rounds of each side's mean step (ms).
        ratio: the median over rounds of the trainer's mean step over the bare loop's.
        ratio_spread: the quartiles of the rounds' ratios.
        round_trainer_ms, round_bare_ms: each side's mean step per round, in round order.
        steps_per_round: the trainer's and the bare loop's steps in each round.
        device, threads: where it ran.
    """

    task: str
    method: str | None
    batch_size: int
    log_every: int
    trainer_ms: float
    bare_ms: float
    ratio: float
    ratio_spread: tuple[float, float]
    round_trainer_ms: list[float]
    round_bare_ms: list[float]
    steps_per_round: list[int]
    device: str
    threads: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def measure_loop_overhead(
    base: TrainConfig | None = None, *, task: Any = None, device: str = "cpu",
    rounds: int = 20, warmup_steps: int = 3,
) -> LoopOverheadRecord:
    """The trainer's step and the bare loop's, alternated in ``rounds`` rounds after
    ``warmup_steps`` warm-up rounds (see the module).

    Args:
        base: the run (default ``TrainConfig()``), changed by :func:`loop_config`.
        task: its ``TaskData`` (loaded from the config's task when None).
        device: ``cpu`` or ``cuda``.
        rounds, warmup_steps: as :func:`~filterformer.timing.paired_step_times` takes them (two
            rounds or more).
    """
    with tempfile.TemporaryDirectory(prefix="loop-overhead-") as run_dir:
        config = loop_config(base, output_dir=run_dir, device=device)
        if task is None:
            task = load_task_data(config.task, config.task_options)
        trainer = TrainerLoop(config, task)
        try:
            bare = BareLoop(config, task, trainer.trainer.device)
            times = paired_step_times(
                [trainer.step, bare.step], rounds=rounds, warmup_steps=warmup_steps,
                timer=time_step,
                prepare=lambda side, _: bare.next_batch() if side == 1 else None,
            )
        finally:
            trainer.close()
    trainer_ms, bare_ms = ([s * 1e3 for s in side] for side in times.round_step_s)
    return LoopOverheadRecord(
        task=task.name, method=config.method, batch_size=config.batch_size,
        log_every=config.log_every, trainer_ms=times.median_s[0] * 1e3,
        bare_ms=times.median_s[1] * 1e3, ratio=times.ratio(0, 1)[0],
        ratio_spread=times.ratio(0, 1)[1:], round_trainer_ms=trainer_ms,
        round_bare_ms=bare_ms, steps_per_round=times.steps_per_round, device=device,
        threads=torch.get_num_threads(),
    )
