"""Sequence batching and language-modelling windows."""

from __future__ import annotations

import pytest
import torch

from filterformer.data import (
    IGNORE_INDEX,
    LanguageModelingDataset,
    SequenceDataset,
    collate_sequences,
)


def test_token_sequences_are_padded_with_zero_and_masked():
    lengths = [3, 7, 1]
    sequences = [torch.randint(1, 50, (n,)) for n in lengths]
    batch = collate_sequences([d for d in SequenceDataset(sequences, [0, 1, 2])])
    assert batch["input_ids"].shape == (3, 7)
    assert batch["padding_mask"].sum(1).tolist() == lengths
    for row, sequence in enumerate(sequences):
        assert torch.equal(batch["input_ids"][row, : len(sequence)], sequence)
        assert (batch["input_ids"][row, len(sequence) :] == 0).all()
    assert batch["labels"].tolist() == [0, 1, 2]


def test_feature_sequences_are_padded_with_zeros():
    sequences = [torch.randn(n, 4) for n in (2, 5)]
    batch = collate_sequences([d for d in SequenceDataset(sequences, [1, 0], key="inputs")])
    assert batch["inputs"].shape == (2, 5, 4)
    assert torch.equal(batch["inputs"][0, :2], sequences[0])
    assert (batch["inputs"][0, 2:] == 0).all()


def test_windows_predict_the_next_token():
    tokens = torch.randint(1, 100, (53,))
    dataset = LanguageModelingDataset(tokens, block_size=10)
    assert len(dataset) == 6
    for i in range(len(dataset)):
        item = dataset[i]
        start = 10 * i
        assert torch.equal(item["input_ids"], tokens[start : start + 10][: len(item["labels"])])
        assert torch.equal(item["labels"], tokens[start + 1 : start + 11])
    batch = collate_sequences([dataset[i] for i in range(len(dataset))])
    assert (batch["labels"][-1, 2:] == IGNORE_INDEX).all()
    with pytest.raises(IndexError):
        dataset[6]


def test_bad_key_is_rejected():
    with pytest.raises(ValueError, match=r"input_ids.*inputs"):
        SequenceDataset([torch.ones(2)], [0], key="pixels")
