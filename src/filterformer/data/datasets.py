"""Dataset containers shared by every task, and the batch builder for sequence tasks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset

from ..checks import check_integer

__all__ = [
    "IGNORE_INDEX",
    "PAD_ID",
    "ItemDataset",
    "LanguageModelingDataset",
    "SequenceDataset",
    "as_long",
    "collate_sequences",
]

PAD_ID = 0
IGNORE_INDEX = -100  # the default ignore_index of torch.nn.functional.cross_entropy


def as_long(tensor: Tensor) -> Tensor:
    """Compactly stored token ids as the long tensor embeddings expect (a picklable transform)."""
    return tensor.long()


class SequenceDataset(Dataset):
    """Sequences with one class label each.

    Args:
        sequences: one tensor per item (a list, or a tensor indexed along dim 0): token ids
            ``(n,)`` or features ``(n, F)``; stored compactly and converted by ``transform``.
        labels: ``(num_items,)`` integer labels.
        key: the batch key of the sequence, ``"input_ids"`` or ``"inputs"``.
        transform: applied to a stored sequence when it is read (e.g. pixels to token ids).
    """

    def __init__(
        self,
        sequences: Sequence[Tensor] | Tensor,
        labels: Sequence[int] | Tensor,
        key: str = "input_ids",
        transform: Callable[[Tensor], Tensor] | None = None,
    ) -> None:
        if key not in ("input_ids", "inputs"):
            raise ValueError(f"key must be 'input_ids' or 'inputs'; got {key!r}")
        if len(sequences) != len(labels):
            raise ValueError(f"{len(sequences)} sequences but {len(labels)} labels")
        self.sequences = sequences
        self.labels = torch.as_tensor(labels, dtype=torch.long)
        self.key = key
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        sequence = self.sequences[index]
        if self.transform is not None:
            sequence = self.transform(sequence)
        return {self.key: sequence, "labels": self.labels[index]}


class LanguageModelingDataset(Dataset):
    """Consecutive non-overlapping windows of a token stream, each predicting its next tokens.

    Item ``i`` covers tokens ``[i·block_size, (i+1)·block_size]``: ``input_ids`` are the first
    ``block_size`` of them and ``labels`` the same shifted by one. The last window may be shorter.

    Args:
        tokens: ``(T,)`` integer token ids (any integer dtype; read as long).
        block_size: tokens per window.
    """

    def __init__(self, tokens: Tensor, block_size: int) -> None:
        check_integer("max_len", block_size)
        if tokens.dim() != 1 or len(tokens) < 2:
            shape = tuple(tokens.shape)
            raise ValueError(f"tokens must be a 1-D stream of at least 2 tokens; got {shape}")
        self.tokens = tokens
        self.block_size = block_size

    def __len__(self) -> int:
        return -(-(len(self.tokens) - 1) // self.block_size)

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        if not 0 <= index < len(self):
            raise IndexError(index)
        start = index * self.block_size
        window = self.tokens[start : start + self.block_size + 1].long()
        return {"input_ids": window[:-1], "labels": window[1:]}


class ItemDataset(Dataset):
    """A dataset over a ready list of items (e.g. :class:`filterformer.graphs.Graph`)."""

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = list(items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> Any:
        return self.items[index]


def collate_sequences(items: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Pad a list of sequence items into a batch.

    Args:
        items: dicts with ``input_ids`` ``(n,)`` or ``inputs`` ``(n, F)``, and ``labels`` (a scalar
            class, or ``(n,)`` per-token targets).

    Returns:
        ``input_ids`` ``(B, N)`` padded with 0 or ``inputs`` ``(B, N, F)`` padded with 0.0,
        ``padding_mask`` ``(B, N)`` bool (True at real tokens), and ``labels`` ``(B,)`` or
        ``(B, N)`` padded with -100.
    """
    if not items:
        raise ValueError("items must be a non-empty list of dataset items")
    key = "input_ids" if "input_ids" in items[0] else "inputs"
    sequences = [item[key] for item in items]
    lengths = torch.tensor([len(s) for s in sequences])
    padded = pad_sequence(sequences, batch_first=True, padding_value=PAD_ID)
    padding_mask = torch.arange(padded.shape[1]) < lengths[:, None]
    labels = [item["labels"] for item in items]
    if labels[0].dim() == 0:
        batch_labels = torch.stack(labels)
    else:
        batch_labels = pad_sequence(labels, batch_first=True, padding_value=IGNORE_INDEX)
    return {key: padded, "padding_mask": padding_mask, "labels": batch_labels}
