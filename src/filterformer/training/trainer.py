"""The training loop: AdamW, warm-up schedule, clipping, mixed precision, DDP, exact resume, and
optionally a compiled training step (:mod:`filterformer.training.compilation`).

One :class:`Trainer` runs one :class:`TrainConfig` in one run directory::

    output_dir/
        config.yaml          the resolved configuration
        metrics.jsonl        one record per log / validation / test
        metrics.csv          the same records as a table
        checkpoints/last.pt  everything needed to resume
        checkpoints/best.pt  the weights with the best validation metric
        summary.json         the final result (only once the run has finished or diverged),
                             with how far each method's parameters moved (``method_activity``)

A write killed half-way leaves ``checkpoints/.last.pt.<random>.tmp`` (or ``.best.pt.…``); rank 0
removes such files when the run next starts or resumes.

A run stopped at any step (``stop_after``, a crash, a kill after the last checkpoint) and
resumed with ``resume=True`` ends with the same weights as an uninterrupted run: the data order
is a function of (seed, epoch), the position within the epoch is saved, and so are the model,
optimiser, scheduler, gradient scaler and every random generator of every process. Its train
time, step times and peak memory cover every stretch of it (:mod:`.training_cost`); resuming a
finished run trains nothing and reports them unchanged.

With ``patience`` the run ends early, once that many validations in a row have not beaten the
best (:func:`~.evaluation.is_better`): it is then finished as at the last step (the best
checkpoint tested, ``summary.json`` written with ``stopped_early`` and the ``steps`` taken). The
schedule keeps the whole budget's horizon, so each step taken has the learning rate it has in a
run without patience; the validations without improvement are counted in ``last.pt``, so an
interrupted run resumed stops at the same step.

A step whose loss or gradient norm is not finite stops the run (:mod:`.divergence`): its
``summary.json`` records the step and the reason, and :meth:`Trainer.fit` raises
:class:`~filterformer.training.divergence.TrainingDiverged`.
"""

from __future__ import annotations

import gc
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from ..checks import check_writable_directory
from ..jsonsafe import finite_json
from ..patching.neutreno_warmup import advance_neutreno_warmup
from .batches import (
    budget_steps,
    evaluation_batches,
    make_loader,
    steps_per_epoch,
    training_batches,
)
from .checkpoint import (
    check_same_config,
    load_checkpoint,
    load_model_state,
    remove_interrupted_writes,
    rng_state,
    save_checkpoint,
    seed_everything,
    set_rng_state,
)
from .compilation import compile_model, mark_sequence_dynamic
from .config_files import save_config
from .directory_lock import directory_lock
from .distributed import DistributedContext, setup_distributed, torchrun_rank
from .divergence import TrainingDiverged, divergence_reason
from .evaluation import MODEL_SELECTION, evaluate, is_better, model_inputs
from .method_activity import method_activity, method_start
from .metrics_log import MetricsLog
from .model_building import (
    ModelConfig,
    build_model,
    count_parameters,
    load_task_data,
    resolve_model_config,
)
from .optimization import build_optimizer, build_scheduler, training_step
from .precision import grad_scaler, resolve_precision
from .progress import TrainProgress
from .resources import PeakMemory, StepTimer
from .run_config import TrainConfig, run_identity
from .run_files import write_json
from .run_model import model_entries
from .training_cost import TrainingCost

__all__ = ["TrainResult", "Trainer", "train"]

# What reading a checkpoint back takes: every checkpoint's model, a resumed one's training state.
_MODEL_ENTRIES = ("config", "model_config", "model")
#: The ways out of a checkpoint saved with another configuration.
_OTHER_RUN_HINT = ("; resume with the configuration it was saved with (filterformer train "
                   "--resume without the options that change these keys), or start a new run in "
                   "another output_dir (--output-dir DIR)")
_TRAINING_ENTRIES = ("optimizer", "scheduler", "scaler", "step", "epoch", "epoch_step", "best",
                     "pending", "rng")
#: The checkpoint entry counting the validations since the best (what ``patience`` compares).
_WITHOUT_IMPROVEMENT = "validations_without_improvement"
#: The checkpoint entry holding where the method parameters started (:func:`.method_start`).
_METHOD_START = "method_start"


@dataclass
class TrainResult:
    """What a run produced.

    Attributes:
        run_dir: the run directory.
        completed: False when the run was interrupted (``stop_after``) and can be resumed.
        steps: optimiser steps done (fewer than the budget's when it stopped early).
        selection_metric: the validation metric that picked the best checkpoint.
        best_step: the step of the best checkpoint.
        best_validation: the best checkpoint's validation metrics.
        test: the best checkpoint's test metrics (None until completed).
        num_parameters: trainable parameters.
        step_time_s: median wall time of an optimiser step over every stretch of the run
            (:class:`~filterformer.training.training_cost.TrainingCost`).
        peak_memory_bytes: the highest peak of the stretches (see
            :class:`~filterformer.training.resources.PeakMemory`).
        memory_measure: what ``peak_memory_bytes`` measures.
        train_time_s: wall time of the training loop (validation included), summed over the
            stretches; None when a stretch's is unknown.
        diverged: ``{"step", "reason"}`` of a run stopped by a non-finite loss or gradient
            (its ``summary.json`` only: :meth:`Trainer.fit` raises instead of returning it).
        method_activity: how far the tested weights' method parameters and learned filters are
            from where the run started (:func:`~.method_activity.method_activity`); None until
            completed, and for a run resumed from a checkpoint that did not record the start.
        stopped_early: True when ``patience`` validations in a row without improvement ended
            the run before its budget (it is then completed, its best checkpoint tested).
    """

    run_dir: str
    completed: bool
    steps: int
    selection_metric: str
    best_step: int | None
    best_validation: dict[str, float] | None
    test: dict[str, float] | None
    num_parameters: int
    step_time_s: float | None
    peak_memory_bytes: int | None
    memory_measure: str
    train_time_s: float | None
    diverged: dict[str, Any] | None = None
    method_activity: dict[str, Any] | None = None
    stopped_early: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Trainer:
    """Trains a model on a task as a :class:`TrainConfig` says.

    Args:
        config: the run.
        task: a ready ``TaskData`` (loaded from ``config.task`` when None).
        resume: continue the run in ``config.output_dir`` from its last checkpoint.
        context: the process group (joined from torchrun's environment when None).
        model_config: the model's resolved configuration on ``task`` (resolved from ``config``
            when None; :func:`~filterformer.training.model_building.resolve_model_config`).
        progress_bar: with ``config.progress``, a bar on a terminal; False writes plain lines
            wherever stderr goes (:class:`~filterformer.training.progress.TrainProgress`).

    Raises:
        ValueError: before the task loads, when ``output_dir`` is no directory files can be
            written under (:func:`~filterformer.checks.check_writable_directory`) or already
            holds a run and ``resume`` is false; and for a checkpoint that cannot be resumed.
    """

    def __init__(
        self,
        config: TrainConfig,
        *,
        task: Any = None,
        resume: bool = False,
        context: DistributedContext | None = None,
        model_config: ModelConfig | None = None,
        progress_bar: bool = True,
    ) -> None:
        self.config = config
        self.progress_bar = progress_bar
        self.context = context or setup_distributed(config.device)
        self.device = self.context.device
        self.run_dir = Path(config.output_dir)
        self.last_path = self.run_dir / "checkpoints" / "last.pt"
        self.best_path = self.run_dir / "checkpoints" / "best.pt"
        if self.context.is_main:
            # Before the task loads and anything trains: an unusable run directory fails now.
            check_writable_directory("output_dir", self.run_dir)
            if not resume and self.last_path.exists():
                raise ValueError(
                    f"output_dir {self.run_dir} already holds a run ({self.last_path}); pass "
                    "resume (--resume) to continue it, or choose another output_dir"
                )
            # The temporary files of checkpoint writes killed half-way: rank 0 alone writes this
            # run's checkpoints, so none of them belongs to a write under way.
            remove_interrupted_writes(self.last_path, self.best_path)
        self.task = task if task is not None else load_task_data(config.task, config.task_options)
        self.precision = resolve_precision(config.precision, self.device)
        self.selection_metric, _ = MODEL_SELECTION[self.task.kind]
        self.model_config = model_config or resolve_model_config(config, self.task)
        seed_everything(config.seed)
        self.model = build_model(self.model_config, self.task, config.pooling).to(self.device)
        self.num_parameters = count_parameters(self.model)
        #: What every checkpoint records so that the model is rebuilt without the task.
        self.model_entries = model_entries(self.model, self.task)
        #: The method parameters at the start of the run (a resumed run reads its checkpoint's).
        self.method_start: dict[str, Any] | None = method_start(self.model)
        self.optimizer = build_optimizer(self.model, config.optimizer)
        self.steps_per_epoch = steps_per_epoch(len(self.task.train), config.batch_size)
        self.total_steps = budget_steps(config.max_steps, config.epochs, len(self.task.train),
                                        config.batch_size)
        self.scheduler = build_scheduler(self.optimizer, config.schedule, self.total_steps)
        self.scaler = grad_scaler(self.precision, self.device)
        self.wrapped = self.model
        if self.context.distributed:
            device_ids = [self.device.index] if self.device.type == "cuda" else None
            self.wrapped = DistributedDataParallel(self.model, device_ids=device_ids)
        if config.compile:
            # The DDP wrapper is compiled, not the module in it (PyTorch's guidance); the
            # module stays eager for evaluation and its state dict keeps its own names.
            self.wrapped = compile_model(self.wrapped)
        # Each process drops out differently; process 0 keeps the stream a single process has.
        if self.context.rank:
            torch.manual_seed(config.seed + self.context.rank)
        self.step = self.epoch = self.epoch_step = 0
        self.best_step: int | None = None
        self.best_validation: dict[str, float] | None = None
        self.pending = {"loss_sum": 0.0, "count": 0}
        #: Validations in a row that have not beaten the best (``patience`` stops at it).
        self.without_improvement = 0
        #: The cost of the stretches before this one, and of all of them at the last checkpoint.
        self.earlier_cost = self.cost = TrainingCost()
        if resume:
            self._resume()
        #: The step this session started from (``stop_after`` counts from it).
        self.session_start = self.step
        self.log = MetricsLog(
            self.run_dir, enabled=self.context.is_main, resume_step=self.step if resume else None
        )
        self.timer = StepTimer(self.device)
        self.memory = PeakMemory(self.device)

    # -- checkpoints -----------------------------------------------------------------------

    def _state(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "model_config": self.model_config.to_dict(),
            "model": {k: v.detach().cpu() for k, v in self.model.state_dict().items()},
            **self.model_entries,
        }

    def _cost_now(self) -> TrainingCost:
        """The run's cost up to now: the earlier stretches' and this one's."""
        return self.earlier_cost.extended(
            time.perf_counter() - self.stretch_started, self.timer.durations,
            self.memory.peak_bytes(), self.memory.measure,
        )

    def _save_last(self) -> None:
        rngs = self.context.all_gather_object(rng_state())
        self.cost = self._cost_now()
        if not self.context.is_main:
            return
        save_checkpoint(self.last_path, {
            **self._state(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "step": self.step,
            "epoch": self.epoch,
            "epoch_step": self.epoch_step,
            # The best checkpoint's whole validation record: selection reads its metric and,
            # on a tie, its loss.
            "best": {"step": self.best_step, "validation": self.best_validation},
            "pending": dict(self.pending),
            _WITHOUT_IMPROVEMENT: self.without_improvement,
            "rng": rngs,
            "world_size": self.context.world_size,
            "cost": self.cost.to_state(),
            _METHOD_START: self.method_start,
        })

    def _read(self, path: Path, required: tuple[str, ...] = _MODEL_ENTRIES) -> dict[str, Any]:
        """Rank 0 reads a checkpoint and checks it; every process gets it."""
        state = None
        if self.context.is_main:
            state = load_checkpoint(path, required=required)
            check_same_config(run_identity(state["config"]), run_identity(self.config.to_dict()),
                              path, hint=_OTHER_RUN_HINT)
            check_same_config(state["model_config"], self.model_config.to_dict(), path, "model.",
                              hint=_OTHER_RUN_HINT)
        state = self.context.broadcast_object(state)
        load_model_state(self.model, state["model"], path)
        return state

    def _resume(self) -> None:
        if self.context.is_main and not self.last_path.exists():
            raise ValueError(f"cannot resume: {self.last_path} does not exist")
        state = self._read(self.last_path, _MODEL_ENTRIES + _TRAINING_ENTRIES)
        try:
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
            self.scaler.load_state_dict(state["scaler"])
        except (KeyError, ValueError, RuntimeError) as err:
            raise ValueError(f"checkpoint {self.last_path} has an unusable training state: "
                             f"{err}") from None
        self.step, self.epoch, self.epoch_step = state["step"], state["epoch"], state["epoch_step"]
        best = state["best"]
        self.best_step, self.best_validation = best["step"], best["validation"]
        self.pending = dict(state["pending"])
        # A checkpoint written before the count was kept is of a run without patience (a
        # resume with another patience is refused as another configuration): nothing to count.
        self.without_improvement = state.get(_WITHOUT_IMPROVEMENT, 0)
        self.earlier_cost = self.cost = TrainingCost.from_state(state.get("cost"))
        # A checkpoint written before the start was recorded leaves the activity unknown.
        self.method_start = state.get(_METHOD_START)
        rngs = state["rng"]
        set_rng_state(rngs[self.context.rank] if self.context.rank < len(rngs) else rngs[0])

    # -- one step --------------------------------------------------------------------------

    def _train_step(self, batch: dict[str, Any]) -> tuple[float, float]:
        inputs = model_inputs(batch, self.device)
        if self.config.compile:
            mark_sequence_dynamic(inputs)
        self.timer.start()
        loss, grad_norm = training_step(
            self.wrapped, inputs, self.optimizer, self.scaler, precision=self.precision,
            device=self.device, grad_clip=self.config.grad_clip, parameters=self.model,
        )
        self.scheduler.step()
        advance_neutreno_warmup(self.model)  # a pretrained run's NeuTRENO λ, when it warms up
        self.timer.stop()
        return loss.item(), grad_norm.item()

    def _check_finite(self, loss: float, grad_norm: float) -> None:
        """Raise :class:`TrainingDiverged` when the step just taken was not finite on any
        process (every process stops at the same step)."""
        reason = divergence_reason(loss, grad_norm, scaled=self.scaler.is_enabled())
        if self.context.distributed:
            # A loss that is NaN on one process only must stop every process.
            anywhere = self.context.all_reduce_sum([float(reason is not None)])[0]
            reason = reason or ("loss is not finite on another process" if anywhere else None)
        if reason is not None:
            self.log.log({"step": self.step + 1, "epoch": self.epoch, "split": "train",
                          "loss": loss, "grad_norm": grad_norm, "diverged": reason})
            raise TrainingDiverged(self.step + 1, reason, self.run_dir)

    # -- evaluation ------------------------------------------------------------------------

    def _evaluate(self, split: str) -> dict[str, float]:
        dataset = getattr(self.task, split)
        size = self.config.eval_batch_size or self.config.batch_size
        batches = evaluation_batches(
            dataset, size, rank=self.context.rank, world_size=self.context.world_size
        )
        loader = make_loader(dataset, batches, self.task.collate,
                             num_workers=self.config.num_workers, seed=self.config.seed)
        # Evaluation must not move the training's random streams, whatever a model draws.
        devices = [self.device.index] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            return evaluate(self.model, loader, self.task.kind, self.context, self.precision)

    def _validate(self) -> dict[str, float]:
        metrics = self._evaluate("validation")
        self.log.log({"step": self.step, "epoch": self.epoch, "split": "validation", **metrics})
        if is_better(self.task.kind, metrics, self.best_validation):
            self.best_step, self.best_validation = self.step, metrics
            self.without_improvement = 0
            if self.context.is_main:
                save_checkpoint(self.best_path, {**self._state(), "step": self.step,
                                                 "validation": metrics})
        else:
            self.without_improvement += 1
        return metrics

    @property
    def stopped_early(self) -> bool:
        """Whether ``patience`` validations in a row have not beaten the best: the run is over
        (every process agrees, as the validation metrics are summed over all of them)."""
        patience = self.config.patience
        return patience is not None and self.without_improvement >= patience

    # -- the loop --------------------------------------------------------------------------

    def _log_train(self, lr: float, grad_norm: float) -> None:
        loss_sum, count = self.context.all_reduce_sum(
            [self.pending["loss_sum"], float(self.pending["count"])]
        )
        self.log.log({"step": self.step, "epoch": self.epoch, "split": "train",
                      "loss": loss_sum / max(count, 1.0), "lr": lr, "grad_norm": grad_norm})
        self.pending = {"loss_sum": 0.0, "count": 0}

    def fit(self) -> TrainResult:
        """Train to the end (or to ``stop_after``, or until ``patience`` stops it), then test
        the best checkpoint.

        Returns:
            :class:`TrainResult` (``completed=False`` when interrupted by ``stop_after``).

        Raises:
            TrainingDiverged: at the first step whose loss (or, outside fp16, gradient norm) is
                not finite, once ``summary.json`` records it; no checkpoint is written after
                that step.
        """
        config = self.config
        if self.context.is_main:
            save_config(config, self.run_dir / "config.yaml")
        self.memory.reset()
        self.stretch_started = time.perf_counter()
        with self._progress() as progress:
            try:
                stopped = self._train_loop(progress)
            except TrainingDiverged as diverged:
                self._write_summary(self._result(self._cost_now(), None,
                                                 diverged=diverged.to_dict()))
                raise
            test = None
            if not stopped:
                self._load_best()
                progress.evaluating("test", len(self.task.test), best_step=self.best_step)
                test = self._evaluate("test")
                progress.tested(self.selection_metric, test[self.selection_metric])
                self.log.log({"step": self.step, "epoch": self.epoch, "split": "test", **test})
        # The figures of the last checkpoint, written at the last step trained: a later resume
        # starts from them (and, with nothing left to train, reports them as they are).
        # The activity is the tested weights' (the best checkpoint's).
        activity = None if stopped else method_activity(self.model, self.method_start)
        result = self._result(self.cost, test, activity=activity)
        if not stopped:
            self._write_summary(result)
        self.context.barrier()
        return result

    def _result(self, cost: TrainingCost, test: dict[str, float] | None,
                diverged: dict[str, Any] | None = None,
                activity: dict[str, Any] | None = None) -> TrainResult:
        return TrainResult(
            run_dir=str(self.run_dir), completed=test is not None, steps=self.step,
            selection_metric=self.selection_metric, best_step=self.best_step,
            best_validation=self.best_validation, test=test, num_parameters=self.num_parameters,
            step_time_s=cost.step_time_s, peak_memory_bytes=cost.peak_memory_bytes,
            memory_measure=cost.memory_measure, train_time_s=cost.train_time_s,
            diverged=diverged, method_activity=activity, stopped_early=self.stopped_early,
        )

    def _write_summary(self, result: TrainResult) -> None:
        if not self.context.is_main:
            return
        config = self.config
        summary = {**result.to_dict(), "task": self.task.name, "method": config.method,
                   "config": config.to_dict(), "model_config": self.model_config.to_dict()}
        write_json(self.run_dir / "summary.json", finite_json(summary))

    def _progress(self) -> TrainProgress:
        config = self.config
        return TrainProgress(f"{config.method or 'train'} seed {config.seed}", self.total_steps,
                             initial=self.step, steps_per_epoch=self.steps_per_epoch,
                             enabled=config.progress and self.context.is_main,
                             bar=self.progress_bar)

    def _train_loop(self, progress: TrainProgress) -> bool:
        """Run the remaining steps; True when interrupted by ``stop_after``. A run that
        ``patience`` stopped (now, or before it was resumed) trains no further."""
        while self.step < self.total_steps and not self.stopped_early:
            for batch in self.epoch_batches():
                if self.train_batch(batch, progress):
                    return True
                if self.step == self.total_steps or self.stopped_early:
                    return False
        return False

    def epoch_batches(self) -> DataLoader:
        """This process's collated batches for the rest of the current epoch, in the order
        :func:`~filterformer.training.batches.training_batches` fixes for (seed, epoch)."""
        config, context = self.config, self.context
        batches = training_batches(
            self.task.train, config.batch_size, epoch=self.epoch, seed=config.seed,
            rank=context.rank, world_size=context.world_size, skip=self.epoch_step,
        )
        return make_loader(self.task.train, batches, self.task.collate,
                           num_workers=config.num_workers, seed=config.seed + self.epoch,
                           pin_memory=self.device.type == "cuda")

    def train_batch(self, batch: dict[str, Any], progress: TrainProgress) -> bool:
        """One pass of the loop on ``batch`` (from :meth:`epoch_batches`): the optimiser step,
        then the loss kept for the next training record, ``progress``, the record every
        ``log_every`` steps, and validation and checkpoints when they are due.

        Returns:
            True when ``stop_after`` interrupts the run at this step (never at its last step,
            nor at the validation where ``patience`` ends it: the run is then finished).
        """
        config = self.config
        lr = self.scheduler.get_last_lr()[0]
        loss, grad_norm = self._train_step(batch)
        self._check_finite(loss, grad_norm)
        self.step += 1
        self.epoch_step += 1
        self.pending["loss_sum"] += loss
        self.pending["count"] += 1
        progress.advance(loss)
        end_of_epoch = self.epoch_step == self.steps_per_epoch
        if end_of_epoch:
            self.epoch, self.epoch_step = self.epoch + 1, 0
        last = self.step == self.total_steps
        logged = self.step % config.log_every == 0 or last
        if logged:
            self._log_train(lr, grad_norm)
        validate = last or (
            end_of_epoch if config.eval_every is None else self.step % config.eval_every == 0
        )
        if validate:
            progress.evaluating("validation", len(self.task.validation))
            progress.validated(self.selection_metric, self._validate()[self.selection_metric])
            if self.stopped_early and not logged:
                # The loss since the last record, as the budget's last step records it.
                self._log_train(lr, grad_norm)
        stop = (config.stop_after is not None and not last and not self.stopped_early
                and self.step - self.session_start >= config.stop_after)
        periodic = config.checkpoint_every and self.step % config.checkpoint_every == 0
        if validate or stop or periodic:
            self._save_last()
        return stop

    def _load_best(self) -> None:
        """Put the best checkpoint's weights into the model (rank 0 reads, all receive)."""
        self.context.barrier()
        self._read(self.best_path)


def train(config: TrainConfig, *, task: Any = None, resume: bool = False) -> TrainResult:
    """Run :class:`Trainer` under torchrun or alone, leaving the process group afterwards.

    Rank 0 holds ``output_dir`` while the run trains: another ``train`` there is refused
    (:func:`~filterformer.training.directory_lock.directory_lock`)."""
    with directory_lock(config.output_dir) if torchrun_rank() == 0 else nullcontext():
        return _train(config, task, resume)


def _train(config: TrainConfig, task: Any, resume: bool) -> TrainResult:
    context = setup_distributed(config.device)
    trainer = None
    try:
        trainer = Trainer(config, task=task, resume=resume, context=context)
        return trainer.fit()
    finally:
        # The DDP model holds the process group: free it first, so that leaving the group
        # really ends gloo's threads rather than interpreter shutdown doing it.
        del trainer
        gc.collect()
        context.close()
