"""Carved splits partition the items, keep class shares and never depend on the run's seed."""

from __future__ import annotations

import numpy as np
import pytest

from filterformer.data import carve_validation, split_indices
from filterformer.data.splits import subsample


def test_parts_partition_the_items_with_the_requested_sizes():
    parts = split_indices(1000, [0.7, 0.2, 0.1])
    assert sorted(np.concatenate(parts).tolist()) == list(range(1000))
    assert [len(p) for p in parts] == [700, 200, 100]


def test_stratified_parts_keep_each_class_share():
    labels = np.random.default_rng(0).choice(3, size=900, p=[0.6, 0.3, 0.1])
    train, validation = carve_validation(900, 0.2, labels=labels)
    overall = np.bincount(labels, minlength=3) / 900
    held_out = np.bincount(labels[validation], minlength=3) / len(validation)
    np.testing.assert_allclose(held_out, overall, atol=0.01)
    assert not set(train) & set(validation)


def test_splits_are_fixed_by_the_split_seed_alone():
    first, again = split_indices(50, [0.5, 0.5]), split_indices(50, [0.5, 0.5])
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    other = split_indices(50, [0.5, 0.5], seed=1)
    assert not np.array_equal(other[0], split_indices(50, [0.5, 0.5])[0])


@pytest.mark.parametrize("fractions", [[0.5, 0.6], [1.0], [-0.1, 1.1]])
def test_bad_fractions_are_rejected(fractions):
    with pytest.raises(ValueError, match="fractions"):
        split_indices(10, fractions)


def test_subsample_draws_a_seeded_subset():
    indices = np.arange(100, 200)
    chosen = subsample(indices, 10, seed=3)
    assert len(set(chosen)) == 10 and set(chosen) <= set(indices)
    assert np.array_equal(chosen, subsample(indices, 10, seed=3))
    assert subsample(indices, None, seed=3) is indices
