"""The task registry: every dataset by name, with its options checked up front."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from .b3db import load_b3db
from .images import load_digits_task, load_fashion_mnist
from .listops import load_listops
from .pathfinder import load_pathfinder
from .sentiment import load_sentiment, load_sentiment_bytes
from .task import TaskData
from .text import load_text_lm
from .uea import load_uea

__all__ = ["TASKS", "load_task", "task_option_hints", "task_options"]

_BUILDERS: dict[str, Callable[..., TaskData]] = {
    "listops": load_listops,
    "pathfinder": load_pathfinder,
    "uea": load_uea,
    "fashion_mnist": load_fashion_mnist,
    "digits": load_digits_task,
    "sentiment": load_sentiment,
    "sentiment_bytes": load_sentiment_bytes,
    "text_lm": load_text_lm,
    "b3db": load_b3db,
}
TASKS: tuple[str, ...] = tuple(_BUILDERS)


def _builder(name: str) -> Callable[..., TaskData]:
    if name not in _BUILDERS:
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(TASKS)}")
    return _BUILDERS[name]


def task_options(name: str) -> dict[str, Any]:
    """The options a task accepts, with their defaults."""
    parameters = inspect.signature(_builder(name)).parameters
    return {option: p.default for option, p in parameters.items()}


def task_option_hints(name: str) -> dict[str, Any]:
    """The type hint of each option of a task (e.g. ``int | None`` for ``num_train``)."""
    hints = typing.get_type_hints(_builder(name))
    return {option: hints.get(option, Any) for option in task_options(name)}


def load_task(name: str, /, **options: Any) -> TaskData:
    """Build a task by name.

    Args:
        name: one of :data:`TASKS` (positional, so that a task may take a ``name`` option, as
            ``load_task("uea", name="JapaneseVowels")`` does).
        **options: the task's options (see :func:`task_options`), e.g. ``seed``, ``preset``,
            ``num_train``, ``max_len``, ``patch_size``, ``cache_dir``.

    Raises:
        ValueError: an unknown task name or option; the message lists the valid ones.
    """
    valid = task_options(name)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for task {name!r}; valid options: "
                         f"{sorted(valid)}")
    return _builder(name)(**options)
