"""Chance level and the majority-class score, against counts made directly from the labels."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from filterformer.data import load_task
from filterformer.data.reference_scores import reference_scores
from filterformer.data.task import TaskData


def _collate(items: list[tuple[torch.Tensor, int]]) -> dict[str, torch.Tensor]:
    return {"inputs": torch.stack([x for x, _ in items]),
            "labels": torch.tensor([y for _, y in items])}


def _task(train: np.ndarray, test: np.ndarray, num_classes: int,
          kind: str = "classification") -> TaskData:
    def split(labels: np.ndarray) -> list[tuple[torch.Tensor, int]]:
        return [(torch.randn(3, 2), int(y)) for y in labels]

    return TaskData(name="synthetic", kind=kind, train=split(train), validation=split(test[:1]),
                    test=split(test), collate=_collate, num_classes=num_classes,
                    vocab_size=None, input_dim=2, max_len=3)


def test_the_majority_class_comes_from_training_and_is_scored_on_test() -> None:
    rng = np.random.default_rng()
    num_classes = int(rng.integers(3, 9))
    weights = rng.dirichlet(np.ones(num_classes))
    train = rng.choice(num_classes, size=int(rng.integers(300, 700)), p=weights)
    test = rng.choice(num_classes, size=int(rng.integers(300, 700)))  # another distribution
    scores = reference_scores(_task(train, test, num_classes))
    counts = np.bincount(train, minlength=num_classes)
    expected = int(np.argmax(counts))  # argmax returns the first (smallest) of tied classes
    assert scores is not None
    assert scores.majority_class == expected
    assert scores.majority_accuracy == pytest.approx(float(np.mean(test == expected)), abs=0)
    assert scores.chance_accuracy == pytest.approx(1 / num_classes)


def test_a_tie_goes_to_the_smallest_label_and_an_empty_split_is_refused() -> None:
    scores = reference_scores(_task(np.array([2, 1, 2, 1, 0]), np.array([1, 1, 2]), 3))
    assert scores is not None and scores.majority_class == 1
    assert scores.majority_accuracy == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="non-empty train and test"):
        reference_scores(_task(np.array([0, 1]), np.array([], dtype=int), 2))


def test_a_task_without_classes_has_no_reference_scores() -> None:
    task = _task(np.array([0, 1]), np.array([1]), 2)
    task.num_classes = None
    assert reference_scores(task) is None


def test_the_digits_task_is_scored_from_its_own_labels() -> None:
    task = load_task("digits")
    scores = reference_scores(task)
    train = np.array([int(task.collate([item])["labels"][0]) for item in task.train])
    test = np.array([int(task.collate([item])["labels"][0]) for item in task.test])
    assert scores is not None and scores.chance_accuracy == pytest.approx(0.1)
    assert scores.majority_class == int(np.argmax(np.bincount(train, minlength=10)))
    assert scores.majority_accuracy == pytest.approx(float(np.mean(test == scores.majority_class)))
