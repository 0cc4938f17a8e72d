"""Which items each process reads, batch by batch, reproducibly and resumably.

Training batches follow :class:`~torch.utils.data.DistributedSampler`'s permutation of the
training split, seeded by (seed, epoch), so every epoch's order is fixed in advance and a resumed
run can skip exactly the batches it has already seen. Each process takes every
``world_size``-th item, so together the processes' batches at a step are the same global batch a
single process would read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

__all__ = ["budget_steps", "evaluation_batches", "make_loader", "steps_per_epoch",
           "training_batches"]


def steps_per_epoch(num_items: int, batch_size: int) -> int:
    """Full global batches in one epoch (the last partial batch is dropped)."""
    steps = num_items // batch_size
    if steps < 1:
        raise ValueError(
            f"batch_size ({batch_size}) is larger than the training split ({num_items} items)"
        )
    return steps


def budget_steps(max_steps: int | None, epochs: int, num_items: int, batch_size: int) -> int:
    """The optimiser steps of a budget: ``max_steps`` when set, else ``epochs`` of
    :func:`steps_per_epoch` (what the learning-rate schedule spans)."""
    return max_steps or epochs * steps_per_epoch(num_items, batch_size)


def training_batches(
    dataset: Dataset,
    batch_size: int,
    *,
    epoch: int,
    seed: int,
    rank: int = 0,
    world_size: int = 1,
    skip: int = 0,
) -> list[list[int]]:
    """This process's item indices for each remaining step of ``epoch``.

    Args:
        dataset: the training split.
        batch_size: the global batch; divisible by ``world_size``.
        epoch: seeds the permutation with ``seed``.
        seed: the run's seed.
        rank, world_size: this process and the number of processes.
        skip: steps of this epoch already done (a resumed run).

    Returns:
        One list of ``batch_size / world_size`` indices per remaining step.
    """
    if batch_size % world_size:
        raise ValueError(
            f"batch_size ({batch_size}) must be divisible by the number of processes "
            f"({world_size})"
        )
    steps = steps_per_epoch(len(dataset), batch_size)
    sampler = DistributedSampler(
        dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed, drop_last=True
    )
    sampler.set_epoch(epoch)
    indices = list(sampler)
    local = batch_size // world_size
    return [indices[i * local : (i + 1) * local] for i in range(skip, steps)]


def evaluation_batches(
    dataset: Dataset, batch_size: int, *, rank: int = 0, world_size: int = 1
) -> list[list[int]]:
    """This process's share of an evaluation split, in order: every item exactly once overall
    (no padding), so summed metrics over processes are exact."""
    indices = list(range(rank, len(dataset), world_size))
    return [indices[i : i + batch_size] for i in range(0, len(indices), batch_size)]


def make_loader(
    dataset: Dataset,
    batches: Sequence[Sequence[int]],
    collate: Callable[[list], Any],
    *,
    num_workers: int = 0,
    seed: int = 0,
    pin_memory: bool = False,
) -> DataLoader:
    """A DataLoader over precomputed batches.

    It gets its own generator: otherwise starting its iterator draws from torch's global
    generator, and a resumed run's dropout would drift from an uninterrupted one.
    """
    return DataLoader(
        dataset,
        batch_sampler=batches,
        collate_fn=collate,
        num_workers=num_workers,
        generator=torch.Generator().manual_seed(seed),
        pin_memory=pin_memory,
    )
