"""Batches per process: the same global batches as one process, skippable, exhaustive."""

from __future__ import annotations

import pytest
import torch

from filterformer.training.batches import evaluation_batches, steps_per_epoch, training_batches


class _Items(torch.utils.data.Dataset):
    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> int:
        return index


@pytest.mark.parametrize(("size", "batch", "world"), [(50, 8, 2), (37, 6, 3), (64, 16, 4)])
def test_processes_share_out_the_single_process_batches(size, batch, world):
    dataset = _Items(size)
    single = training_batches(dataset, batch, epoch=3, seed=11)
    shards = [training_batches(dataset, batch, epoch=3, seed=11, rank=r, world_size=world)
              for r in range(world)]
    assert len(single) == size // batch == steps_per_epoch(size, batch)
    for step, whole in enumerate(single):
        parts = [shard[step] for shard in shards]
        assert all(len(p) == batch // world for p in parts)
        assert sorted(i for p in parts for i in p) == sorted(whole)
    # No item twice in an epoch.
    seen = [i for b in single for i in b]
    assert len(seen) == len(set(seen))


def test_order_depends_on_seed_and_epoch_only():
    dataset = _Items(40)
    first = training_batches(dataset, 8, epoch=0, seed=1)
    assert first == training_batches(dataset, 8, epoch=0, seed=1)
    assert first != training_batches(dataset, 8, epoch=1, seed=1)
    assert first != training_batches(dataset, 8, epoch=0, seed=2)


def test_skip_resumes_mid_epoch():
    dataset = _Items(40)
    full = training_batches(dataset, 8, epoch=2, seed=5, rank=1, world_size=2)
    assert training_batches(dataset, 8, epoch=2, seed=5, rank=1, world_size=2, skip=3) == full[3:]


@pytest.mark.parametrize("world", [1, 2, 3])
def test_evaluation_covers_every_item_once(world):
    dataset = _Items(23)
    items = [i for r in range(world)
             for b in evaluation_batches(dataset, 4, rank=r, world_size=world) for i in b]
    assert sorted(items) == list(range(23))


def test_bad_batch_sizes_are_explained():
    with pytest.raises(ValueError, match=r"batch_size \(9\) must be divisible .* \(2\)"):
        training_batches(_Items(40), 9, epoch=0, seed=0, world_size=2)
    with pytest.raises(ValueError, match=r"batch_size \(64\) is larger than the training split"):
        steps_per_epoch(40, 64)
