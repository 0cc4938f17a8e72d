"""What a classifier scores without learning anything: chance level and the majority class.

A comparison's accuracies mean little without them: 30 % on a 10-class task is three times
chance, but below a model that always answers the most frequent class when that class is a third
of the data. The majority class is taken from the training split (a model that learned nothing
else would have learned that much) and scored on the test split.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from torch.utils.data import Dataset

from .task import TaskData

__all__ = ["ReferenceScores", "reference_scores", "split_labels"]

#: Items collated at once while reading a split's labels.
_CHUNK = 256
_CLASSIFICATION_KINDS = ("classification", "graph_classification")


@dataclass(frozen=True)
class ReferenceScores:
    """Scores of classifiers that learn nothing from the inputs.

    Attributes:
        chance_accuracy: ``1 / num_classes``, a uniform random guess's expected accuracy.
        majority_class: the training split's most frequent label (the smallest on a tie).
        majority_accuracy: test accuracy of always answering ``majority_class``.
    """

    chance_accuracy: float
    majority_class: int
    majority_accuracy: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def split_labels(task: TaskData, split: Dataset) -> list[int]:
    """The integer labels of a classification split, read through the task's ``collate``."""
    labels: list[int] = []
    items = [split[i] for i in range(len(split))]
    for start in range(0, len(items), _CHUNK):
        batch = task.collate(items[start:start + _CHUNK])
        chunk = batch["labels"] if isinstance(batch, dict) else batch.labels
        if chunk.dim() != 1:
            raise ValueError(f"task {task.name!r}: expected one label per item, got labels of "
                             f"shape {tuple(chunk.shape)}")
        labels.extend(int(label) for label in chunk.tolist())
    return labels


def reference_scores(task: TaskData) -> ReferenceScores | None:
    """Chance level and the majority-class score of a classification task; None otherwise.

    Raises:
        ValueError: when the training or test split is empty.
    """
    if task.kind not in _CLASSIFICATION_KINDS or not task.num_classes:
        return None
    train, test = split_labels(task, task.train), split_labels(task, task.test)
    if not train or not test:
        raise ValueError(f"task {task.name!r}: reference scores need non-empty train and test "
                         f"splits; got {len(train)} and {len(test)} items")
    counts = Counter(train)
    majority = min(counts, key=lambda label: (-counts[label], label))
    return ReferenceScores(
        chance_accuracy=1.0 / task.num_classes,
        majority_class=majority,
        majority_accuracy=sum(label == majority for label in test) / len(test),
    )
