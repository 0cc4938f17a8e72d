"""What a training run is: one dataclass tree, checked on construction.

:class:`TrainConfig` holds the task, the model, the method, the optimiser, the schedule and the
budget. ``model`` keeps only the :class:`~filterformer.models.TransformerConfig` fields set
explicitly; :meth:`TrainConfig.transformer_config` fills the rest from the method preset, the
task (vocabulary or input width, sequence length) and the defaults, in that order of precedence:
explicit fields > method > task > defaults. With ``pretrained`` the architecture is the pretrained
model's, and ``model`` holds only the method's fields (:mod:`filterformer.training.pretrained`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..checks import check_integer
from ..jsonsafe import plain_data
from ..machine import DEVICES
from ..method_spec import CONFIG_FIELDS, MethodSpec
from ..methods import apply_method, method_changes
from ..models import TransformerConfig
from ..nn import POOLINGS
from .coefficient_lr import normalize_coefficient_lr
from .config_values import check_fields, check_value, dataclass_from_dict, field_hints
from .pretrained import check_pretrained_source, pretrained_method, pretrained_task_options

__all__ = [
    "DECAYS",
    "DEFAULT_TASK",
    "DEFAULT_TASK_OPTIONS",
    "PRECISIONS",
    "SEED_RANGE",
    "SESSION_FIELDS",
    "OptimizerConfig",
    "ScheduleConfig",
    "TrainConfig",
    "check_seed",
    "default_task_options",
    "run_identity",
]

#: Learning-rate decays after warm-up.
DECAYS = ("cosine", "linear", "constant")
#: ``auto`` is bf16 autocast on a GPU that supports it, else fp32; bf16/fp16 need a GPU.
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
#: The task a run trains on when none is named, and its loader options: a small ListOps that
#: trains in minutes on a CPU.
DEFAULT_TASK = "listops"
DEFAULT_TASK_OPTIONS: dict[str, Any] = {"preset": "tiny"}
#: Fields that change neither the weights nor the data order (``device`` and ``compile`` change
#: them by floating-point round-off only): a resumed run, or a finished run that a comparison
#: reuses, may differ from its checkpoint in them.
SESSION_FIELDS = (
    "output_dir", "progress", "stop_after", "num_workers", "device", "compile",
    "eval_batch_size", "checkpoint_every", "log_every",
)
#: What ``patience`` counts, in its error message.
_PATIENCE_HINT = " (validations in a row without improvement that stop training)"
#: Model fields the task decides.
TASK_FIELDS = ("vocab_size", "input_dim")
#: The seeds torch's generators take (a signed 64-bit integer; with the epoch or the process's
#: rank added, still within the unsigned range torch also accepts).
SEED_RANGE = (-(2**63), 2**63 - 1)


def check_seed(name: str, seed: Any) -> int:
    """Return ``seed`` if it is an integer in :data:`SEED_RANGE`, else ValueError naming
    ``name`` and the range."""
    low, high = SEED_RANGE
    if type(seed) is not int or not low <= seed <= high:
        raise ValueError(f"{name} must be an integer from -2**63 to 2**63 - 1 ({low} to {high}); "
                         f"got {seed!r}")
    return seed


def run_identity(config: dict[str, Any]) -> dict[str, Any]:
    """A :meth:`TrainConfig.to_dict` without :data:`SESSION_FIELDS`: two runs with equal
    identities train the same weights."""
    return {key: value for key, value in config.items() if key not in SESSION_FIELDS}


def default_task_options(task: str) -> dict[str, Any]:
    """The loader options a run of ``task`` uses when it names none: :data:`DEFAULT_TASK_OPTIONS`
    for the default task, the loader's own defaults (``{}``) for any other."""
    return dict(DEFAULT_TASK_OPTIONS) if task == DEFAULT_TASK else {}


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def _positive(name: str, value: float | None, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if value is None or not value > 0:
        accepted = "positive or null" if allow_none else "positive"
        raise ValueError(f"{name} must be {accepted}; got {value!r}")


@dataclass
class OptimizerConfig:
    """AdamW; weight decay skips norms, biases and filter coefficients
    (:func:`filterformer.optim.parameter_groups`).

    Attributes:
        lr: peak learning rate (0 keeps every weight at its initial value, a control).
        coefficient_lr: the peak learning rate of the parameters a method adds
            (:func:`filterformer.method_parameters.method_parameters`: GFSA's coefficients,
            a learnable λ, AGF's ``p``, SAMSA's support scores, the layer fusion): a number
            >= 0, a multiple of ``lr`` written ``"10x"``, or None for ``lr`` itself (the papers'
            setting). The schedule scales it as it scales ``lr``.
        weight_decay: decoupled weight decay of the decayed group.
        betas: Adam's β1, β2.
        eps: Adam's ε.
    """

    lr: float = 1e-3
    coefficient_lr: float | str | None = None
    weight_decay: float = 0.05
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self) -> None:
        check_fields(self, "optimizer.")
        if not self.lr >= 0:  # 0 is a legitimate control: the weights stay at initialisation
            raise ValueError(f"optimizer.lr must be >= 0 (0 freezes the weights); got {self.lr}")
        self.coefficient_lr = normalize_coefficient_lr(self.coefficient_lr)
        _positive("optimizer.eps", self.eps)
        if self.weight_decay < 0:
            raise ValueError(f"optimizer.weight_decay must be >= 0; got {self.weight_decay}")
        if not all(0.0 <= b < 1.0 for b in self.betas):
            raise ValueError(f"optimizer.betas must lie in [0, 1); got {self.betas}")


@dataclass
class ScheduleConfig:
    """Linear warm-up from 0, then a decay to ``min_lr_ratio`` of the peak at the last step.

    Attributes:
        warmup_steps: warm-up length in optimiser steps; None uses ``warmup_ratio``.
        warmup_ratio: warm-up as a fraction of all steps.
        decay: one of :data:`DECAYS`.
        min_lr_ratio: the final learning rate over the peak.
    """

    warmup_steps: int | None = None
    warmup_ratio: float = 0.05
    decay: str = "cosine"
    min_lr_ratio: float = 0.0

    def __post_init__(self) -> None:
        check_fields(self, "schedule.")
        if self.warmup_steps is not None and self.warmup_steps < 0:
            raise ValueError(f"schedule.warmup_steps must be >= 0 or null; got {self.warmup_steps}")
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ValueError(f"schedule.warmup_ratio must be in [0, 1); got {self.warmup_ratio}")
        _choice("schedule.decay", self.decay, DECAYS)
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"schedule.min_lr_ratio must be in [0, 1]; got {self.min_lr_ratio}")


@dataclass
class TrainConfig:
    """One training run.

    Attributes:
        task: a task name of :data:`filterformer.data.TASKS`.
        task_options: keyword options of the task's loader; None gives
            :func:`default_task_options`.
        model: explicitly set :class:`~filterformer.models.TransformerConfig` fields (``dim``,
            ``depth``, ``attention_options``, …); the task sets ``vocab_size``/``input_dim``.
        method: a method preset of :mod:`filterformer.methods` (``gfsa``,
            ``samsa_hard``, ``gfsa+neutreno``, …), applied under the explicit ``model`` fields.
        pretrained: fine-tune a pretrained model instead of training one from scratch:
            ``all-MiniLM-L6-v2``, a local Hugging Face model directory, or ``timm:<ViT name>``
            (random weights); the method is patched in, and ``model`` may set only the
            method's fields (:mod:`filterformer.training.pretrained`).
        pooling: how a classifier pools tokens (:data:`filterformer.nn.POOLINGS`).
        optimizer: :class:`OptimizerConfig`.
        schedule: :class:`ScheduleConfig`.
        epochs: passes over the training split (ignored when ``max_steps`` is set).
        max_steps: train for exactly this many optimiser steps.
        batch_size: the global batch: under ``torchrun`` it is split evenly across processes.
        eval_batch_size: per-process evaluation batch (``batch_size`` when None).
        grad_clip: clip the global gradient norm to this (None: no clipping).
        precision: one of :data:`PRECISIONS`; mixed precision only runs on a GPU.
        compile: compile the training step with :func:`torch.compile`
            (:mod:`filterformer.training.compilation`); the same weights up to round-off, so a
            run may be resumed with or without it.
        device: ``auto`` (the GPU when there is one), ``cpu`` or ``cuda``.
        seed: seeds model initialisation, data order and dropout.
        output_dir: the run directory (metrics, checkpoints, resolved config).
        eval_every: validate every this many steps; None validates after every epoch.
        patience: stop training once this many validations in a row have not beaten the best
            one so far (:func:`~filterformer.training.evaluation.is_better`, the rule that picks
            the best checkpoint); the best checkpoint is then tested as at the end. The
            learning-rate schedule still spans the whole budget (``epochs``/``max_steps``), so
            every step taken has the learning rate it has without early stopping. None: no
            early stopping.
        checkpoint_every: also save the resumable checkpoint every this many steps (it is always
            saved after each validation and when the run stops).
        stop_after: stop after this many steps of this session, as if interrupted, with a
            checkpoint (``--resume`` continues; a time-boxed job can resume chunk by chunk).
        log_every: write a training-loss record every this many steps.
        num_workers: data-loading worker processes.
        progress: show the training's progress: a bar on a terminal, else a line every few
            seconds and after each validation (:mod:`filterformer.training.progress`);
            false (``--quiet``) shows none.
    """

    task: str = DEFAULT_TASK
    task_options: dict[str, Any] | None = None
    model: dict[str, Any] = field(default_factory=dict)
    method: str | None = None
    pretrained: str | None = None
    pooling: str = "mean"
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    epochs: int = 10
    max_steps: int | None = None
    batch_size: int = 32
    eval_batch_size: int | None = None
    grad_clip: float | None = 1.0
    precision: str = "auto"
    compile: bool = False
    device: str = "auto"
    seed: int = 0
    output_dir: str = "runs/train"
    eval_every: int | None = None
    patience: int | None = None
    checkpoint_every: int | None = None
    stop_after: int | None = None
    log_every: int = 10
    num_workers: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        check_seed("seed", self.seed)  # before the type check, so that 1e20 hears the range
        # Before the type check, so that True or 1.5 hears what patience takes.
        check_integer("patience", self.patience, optional=True, hint=_PATIENCE_HINT)
        check_fields(self)
        if not self.task:
            raise ValueError("task must be a task name; got ''")
        if self.task_options is None:
            self.task_options = default_task_options(self.task)
        self.model = _check_model_fields(self.model)
        if self.method is not None:
            method_changes(self.method)  # raises with the valid names
        _choice("pooling", self.pooling, POOLINGS)
        _choice("precision", self.precision, PRECISIONS)
        _choice("device", self.device, DEVICES)
        for name in ("epochs", "batch_size", "log_every"):
            _positive(name, getattr(self, name))
        for name in ("max_steps", "eval_batch_size", "eval_every", "checkpoint_every",
                     "stop_after", "grad_clip"):
            _positive(name, getattr(self, name), allow_none=True)
        if self.num_workers < 0:
            raise ValueError(f"num_workers must be >= 0; got {self.num_workers}")
        if self.pretrained is None:
            # Builds the model's configuration once, so that a bad field fails at load time.
            self.transformer_config()
        else:
            # What a patch cannot do (AGF, SAMSA, architecture fields) fails at load time.
            check_pretrained_source(self.pretrained)
            pretrained_method(self.model, self.method)
            self.task_options = pretrained_task_options(self.task, self.task_options,
                                                        self.pretrained)

    def method_spec(self) -> MethodSpec:
        """The method this run builds (natively) or patches in (a pretrained run), as one
        :class:`~filterformer.method_spec.MethodSpec`: the preset under the explicit method
        fields of ``model``. An unpatched pretrained run's is plain softmax."""
        if self.pretrained is not None:
            return pretrained_method(self.model, self.method) or MethodSpec()
        fields = {key: value for key, value in self.model.items() if key in CONFIG_FIELDS}
        return MethodSpec.from_config(fields, self.method)

    def transformer_config(
        self,
        *,
        vocab_size: int | None = None,
        input_dim: int | None = None,
        max_len: int | None = None,
        required: dict[str, Any] | None = None,
    ) -> TransformerConfig:
        """The model's configuration: explicit fields > method > the task's values > defaults.

        Args:
            vocab_size: the task's vocabulary (token inputs).
            input_dim: the task's features per token (continuous inputs).
            max_len: the task's longest sequence; an explicit ``model.max_len`` must cover it.
            required: fields the task's model cannot do without (``causal=True`` for language
                modelling, ``position="none"`` for graphs); an explicit different value raises.
        """
        fields = apply_method(self.model, self.method)
        task_values = {"vocab_size": vocab_size, "input_dim": input_dim}
        fields.update({k: v for k, v in task_values.items() if v is not None})
        if max_len is not None:
            given = fields.setdefault("max_len", max_len)
            if given < max_len:
                raise ValueError(
                    f"model.max_len ({given}) is shorter than the task's longest sequence "
                    f"({max_len}); raise it or leave it unset"
                )
        for key, value in (required or {}).items():
            if fields.get(key, value) != value:
                raise ValueError(
                    f"model.{key} must be {value!r} for this task; got {fields[key]!r}"
                )
            fields[key] = value
        return TransformerConfig(**fields)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON/YAML), readable back with :meth:`from_dict`."""
        return plain_data(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Build from plain data; unknown keys and bad values raise ValueError naming them."""
        return dataclass_from_dict(cls, data)


def _check_model_fields(model: dict[str, Any]) -> dict[str, Any]:
    hints = field_hints(TransformerConfig)
    valid = [name for name in hints if name not in TASK_FIELDS]
    fixed = sorted(set(model) & set(TASK_FIELDS))
    if fixed:
        raise ValueError(f"model.{fixed[0]} is set by the task; settable model keys: "
                         f"{', '.join(valid)}")
    unknown = sorted(set(model) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown model key(s) {', '.join(unknown)}; valid keys: {', '.join(valid)}"
        )
    return {key: check_value(value, hints[key], f"model.{key}") for key, value in model.items()}

