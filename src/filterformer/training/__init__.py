"""Training and comparing methods: configs, the training loop, checkpoints, DDP, reports.

:class:`TrainConfig` says what a run is (loaded from YAML/TOML with ``key=value`` overrides by
:func:`load_config`); :func:`train` / :class:`Trainer` run it, alone or under ``torchrun``.
:func:`filterformer.training.compare.compare` (imported on its own: it draws figures) trains
several methods with several seeds on one task under the same budget and writes
``results.json``, ``results.csv`` and ``report.html``.
"""

from ..methods import DEFAULT_METHODS, METHOD_PRESETS, apply_method, method_changes, method_names
from .checkpoint import CHECKPOINT_FORMAT, load_checkpoint, load_model_state, save_checkpoint
from .config_files import apply_overrides, load_config, read_config_file, save_config
from .distributed import DistributedContext, setup_distributed
from .optimization import build_scheduler, lr_factor
from .run_config import (
    DECAYS,
    DEFAULT_TASK,
    DEFAULT_TASK_OPTIONS,
    PRECISIONS,
    SESSION_FIELDS,
    OptimizerConfig,
    ScheduleConfig,
    TrainConfig,
    default_task_options,
    run_identity,
)
from .run_model import LoadedRun, load_run
from .trainer import Trainer, TrainResult, train

__all__ = [
    "CHECKPOINT_FORMAT",
    "DECAYS",
    "DEFAULT_METHODS",
    "DEFAULT_TASK",
    "DEFAULT_TASK_OPTIONS",
    "METHOD_PRESETS",
    "PRECISIONS",
    "SESSION_FIELDS",
    "DistributedContext",
    "LoadedRun",
    "OptimizerConfig",
    "ScheduleConfig",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "apply_method",
    "apply_overrides",
    "build_scheduler",
    "default_task_options",
    "load_checkpoint",
    "load_config",
    "load_model_state",
    "load_run",
    "lr_factor",
    "method_changes",
    "method_names",
    "read_config_file",
    "run_identity",
    "save_checkpoint",
    "save_config",
    "setup_distributed",
    "train",
]
