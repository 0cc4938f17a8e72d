"""Train / validation / test splits for sources that lack some of them.

Splits are carved with a fixed seed (:data:`SPLIT_SEED`), independent of the training seed, so
every run of every method sees the same validation and test sets.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..checks import check_integer

__all__ = [
    "SPLIT_SEED",
    "carve_validation",
    "check_split_fractions",
    "split_indices",
    "subsample",
    "three_way_split",
]

SPLIT_SEED = 0


def split_indices(
    num_items: int,
    fractions: Sequence[float],
    labels: Sequence[int] | np.ndarray | None = None,
    seed: int = SPLIT_SEED,
) -> list[np.ndarray]:
    """Partition ``range(num_items)`` at random into parts of the given sizes.

    Args:
        num_items: how many items to split.
        fractions: the share of each part; non-negative, summing to 1.
        labels: ``(num_items,)`` class labels; when given, every class is split in the same
            proportions (stratified), so small validation sets keep the class balance.
        seed: the permutation's seed.

    Returns:
        One sorted index array per fraction; together they cover every item exactly once.
    """
    shares = np.asarray(fractions, dtype=float)
    if shares.ndim != 1 or len(shares) < 2 or (shares < 0).any() or abs(shares.sum() - 1) > 1e-6:
        raise ValueError(
            f"fractions must be two or more non-negative shares summing to 1; got {fractions}"
        )
    rng = np.random.default_rng(seed)
    if labels is None:
        groups = [np.arange(num_items)]
    else:
        label_array = np.asarray(labels)
        if label_array.shape != (num_items,):
            raise ValueError(f"labels must have shape ({num_items},); got {label_array.shape}")
        groups = [np.flatnonzero(label_array == c) for c in np.unique(label_array)]
    parts: list[list[np.ndarray]] = [[] for _ in shares]
    bounds = np.cumsum(np.concatenate([[0.0], shares]))
    for group in groups:
        shuffled = rng.permutation(group)
        cuts = np.rint(bounds * len(group)).astype(int)
        for i in range(len(shares)):
            parts[i].append(shuffled[cuts[i] : cuts[i + 1]])
    return [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]


def carve_validation(
    num_items: int,
    fraction: float,
    labels: Sequence[int] | np.ndarray | None = None,
    seed: int = SPLIT_SEED,
) -> tuple[np.ndarray, np.ndarray]:
    """Split a training set into (train, validation) index arrays; see :func:`split_indices`."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"validation_fraction must be in (0, 1); got {fraction}")
    train, validation = split_indices(num_items, [1.0 - fraction, fraction], labels, seed)
    return train, validation


def subsample(indices: np.ndarray, size: int | None, seed: int) -> np.ndarray:
    """At most ``size`` of ``indices``, drawn at random with ``seed`` (all of them when None)."""
    if size is None or size >= len(indices):
        return indices
    check_integer("num_train", size, optional=True)
    chosen = np.random.default_rng(seed).choice(len(indices), size=size, replace=False)
    return indices[np.sort(chosen)]


def check_split_fractions(validation_fraction: float, test_fraction: float) -> float:
    """Validate the held-out shares of a source without splits; return the training share."""
    train_share = 1.0 - validation_fraction - test_fraction
    if not (0 < validation_fraction < 1 and 0 < test_fraction < 1 and train_share > 0):
        raise ValueError(
            "validation_fraction and test_fraction must be in (0, 1) with a sum below 1; "
            f"got {validation_fraction} and {test_fraction}"
        )
    return train_share


def three_way_split(
    labels: Sequence[int] | np.ndarray,
    validation_fraction: float,
    test_fraction: float,
    num_train: int | None,
    seed: int,
    *,
    stratify: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(train, validation, test) indices for a source with no splits of its own, stratified by
    class unless ``stratify`` is False (as for a real-valued target, where ``labels`` only give
    the number of items).

    The partition uses :data:`SPLIT_SEED`, so validation and test never depend on ``seed``;
    ``seed`` only draws the ``num_train`` training subset (all of it when None).
    """
    train_share = check_split_fractions(validation_fraction, test_fraction)
    train, validation, test = split_indices(
        len(labels), [train_share, validation_fraction, test_fraction],
        labels if stratify else None,
    )
    return subsample(train, num_train, seed), validation, test
