"""Loading a task for training, and describing it in reports."""

from __future__ import annotations

from typing import Any

__all__ = ["describe_task", "load_task_data"]


def load_task_data(name: str, options: dict[str, Any]) -> Any:
    """``filterformer.data.load_task(name, **options)``: a ``TaskData``.

    Raises:
        ValueError: for an unknown task or option (from the data package, listing the valid ones).
    """
    # Imported on use: the data package pulls in its sources only when a run needs them.
    from ..data import load_task

    return load_task(name, **options)


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
    }
