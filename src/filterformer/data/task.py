"""The one shape every dataset takes: :class:`TaskData`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch.utils.data import Dataset

__all__ = ["GRAPH_KINDS", "TASK_KINDS", "TaskData"]

TASK_KINDS = ("classification", "language_modeling", "graph_classification", "graph_regression")
#: The kinds whose batches are :class:`~filterformer.graphs.GraphBatch` (Graph-Bridge models).
GRAPH_KINDS = ("graph_classification", "graph_regression")


@dataclass
class TaskData:
    """A task's three splits and what a model needs to know to consume them.

    Batches made by ``collate`` are dicts for sequence tasks: ``input_ids`` ``(B, N)`` long (padding
    id 0) **or** ``inputs`` ``(B, N, F)`` float, ``padding_mask`` ``(B, N)`` bool (True at real
    tokens) and ``labels`` ``(B,)`` long; for language modelling ``labels`` is ``(B, N)`` with the
    next token and -100 where ignored. Graph tasks give a :class:`filterformer.graphs.GraphBatch`,
    whose ``labels`` are ``(B,)`` long (classification) or float32 targets (regression).

    Attributes:
        name: the registry name.
        kind: one of :data:`TASK_KINDS`.
        train: training split.
        validation: model-selection split (never the test split).
        test: held-out split, for the final report only.
        collate: turns a list of items into a batch.
        num_classes: classes of a classification task, else None (a regression model has one
            output).
        vocab_size: for token inputs, ids lie in ``[0, vocab_size)``; None for continuous inputs.
        input_dim: features per token for continuous inputs, else None.
        max_len: the longest sequence in any split (tokens, patches, steps or graph tokens).
        metadata: free-form facts (source paths, class names, preprocessing statistics).
        target_mean: for regression, the mean of the training split's targets; the model
            predicts ``(target - target_mean) / target_std`` and reports in target units.
        target_std: for regression, the training targets' standard deviation (positive).
    """

    name: str
    kind: str
    train: Dataset
    validation: Dataset
    test: Dataset
    collate: Callable[[list], Any]
    num_classes: int | None
    vocab_size: int | None
    input_dim: int | None
    max_len: int
    metadata: dict = field(default_factory=dict)
    target_mean: float | None = None
    target_std: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in TASK_KINDS:
            raise ValueError(f"kind must be one of {TASK_KINDS}; got {self.kind!r}")
        if self.kind == "graph_regression" and not (
            self.target_mean is not None and math.isfinite(self.target_mean)
            and self.target_std is not None and math.isfinite(self.target_std)
            and self.target_std > 0
        ):
            raise ValueError(
                "a graph_regression task needs a finite target_mean and a positive, finite "
                f"target_std; got {self.target_mean!r} and {self.target_std!r}"
            )
