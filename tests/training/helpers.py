"""A tiny synthetic task for the training tests: fast, learnable, with padding."""

from __future__ import annotations

import torch

from filterformer.data.datasets import SequenceDataset, collate_sequences
from filterformer.data.task import TaskData
from filterformer.training import TrainConfig

VOCAB = 12
NUM_CLASSES = 3


def _split(num_items: int, generator: torch.Generator) -> SequenceDataset:
    sequences, labels = [], []
    for _ in range(num_items):
        length = int(torch.randint(6, 17, (), generator=generator))
        tokens = torch.randint(1, VOCAB, (length,), generator=generator)
        # The label is the most frequent of the tokens 1, 2, 3 (ties to the smallest).
        counts = torch.stack([(tokens == t).sum() for t in (1, 2, 3)])
        sequences.append(tokens)
        labels.append(int(counts.argmax()))
    return SequenceDataset(sequences, labels)


def majority_task(num_train: int = 96, num_eval: int = 32, seed: int = 0) -> TaskData:
    """Classify the majority token of a padded sequence (3 classes, lengths 6–16)."""
    generator = torch.Generator().manual_seed(seed)
    return TaskData(
        name="majority",
        kind="classification",
        train=_split(num_train, generator),
        validation=_split(num_eval, generator),
        test=_split(num_eval, generator),
        collate=collate_sequences,
        num_classes=NUM_CLASSES,
        vocab_size=VOCAB,
        input_dim=None,
        max_len=16,
    )


def tiny_config(output_dir, **overrides):
    """A TrainConfig of a 2-layer width-16 model that trains in a second or two."""
    base = dict(
        task="majority",
        model={"dim": 16, "depth": 2, "num_heads": 2, "mlp_ratio": 2.0},
        batch_size=16,
        epochs=2,
        progress=False,
        output_dir=str(output_dir),
    )
    base.update(overrides)
    return TrainConfig.from_dict(base)
