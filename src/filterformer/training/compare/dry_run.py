"""A comparison checked without training it: every method's model built and stepped once.

``filterformer compare --dry-run`` loads the task, resolves every method's model on it, builds
each with the first seed and takes one training step on the first training batch, so that a
config that cannot run fails in seconds, not after hours of other runs. Nothing is written.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...checks import check_writable_directory
from ..distributed import setup_distributed
from ..model_building import load_task_data, resolve_model_config
from ..progress import print_line
from ..training_steps import run_training_step, training_inputs
from .comparison_config import CompareConfig

__all__ = ["dry_run"]


def dry_run(config: CompareConfig, *, task: Any = None,
            echo: Callable[[str], None] = print_line) -> dict[str, float]:
    """Build every method's model of ``config`` and take one training step with each.

    Args:
        config: the comparison.
        task: a ready ``TaskData`` (loaded from ``config.base.task`` when None).
        echo: where one line per method goes.

    Returns:
        Each method's loss on that step.

    Raises:
        ValueError: an ``output_dir`` the comparison could not write in, a method that does not
            fit the task, or whose step's loss is not finite.
    """
    check_writable_directory("output_dir", config.output_dir)
    task = task if task is not None else load_task_data(config.base.task, config.base.task_options)
    device = setup_distributed(config.base.device).device
    seed = config.seeds[0]
    losses = {}
    for plan in (plan for plan in config.plans if plan.seed == seed):
        run, name = plan.config, plan.name
        step = run_training_step(run, resolve_model_config(run, task), task, device,
                                 training_inputs(task, run.batch_size, seed, 1, device))
        losses[name] = float(step.step())
        if not math.isfinite(losses[name]):
            raise ValueError(f"method {name!r}: the first training step's loss is "
                             f"{losses[name]}")
        echo(f"{name}: builds and trains (first step's loss {losses[name]:.4g})")
    echo(f"dry run: {len(config.methods)} methods × {len(config.seeds)} seeds = "
         f"{len(config.methods) * len(config.seeds)} runs would train in {config.output_dir}")
    return losses
