"""Batches to diagnose a model on: random inputs of the model's own kind, a task's split, text
tokenized by a pretrained model's tokenizer, or random images for a ViT.

All are streams of batches (dicts of tensors) for :func:`~filterformer.diagnostics.diagnose`, so
several models shown the same stream can be drawn on the same axes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib import resources
from typing import Any

import torch

from ..models import TransformerConfig

__all__ = [
    "TASK_SPLITS",
    "example_sentences",
    "image_batches",
    "random_batches",
    "task_batches",
    "text_batches",
]

#: The splits of a task (``TaskData``) that :func:`task_batches` reads.
TASK_SPLITS = ("train", "validation", "test")


def random_batches(
    config: TransformerConfig, num_samples: int, batch_size: int, seq_len: int, seed: int
) -> Iterator[dict[str, torch.Tensor]]:
    """Random inputs for a model of ``config``, drawn from a generator seeded with ``seed``.

    Uniform token ids in ``[1, vocab_size)`` (0 is padding) as ``input_ids`` ``(B, seq_len)``;
    or standard normal features: ``inputs`` ``(B, seq_len, input_dim)``, or ready
    ``inputs_embeds`` ``(B, seq_len, dim)`` for a model with neither. Every batch has an
    all-True ``padding_mask`` ``(B, seq_len)``; ``B`` is ``batch_size``, the last batch holding
    what is left of ``num_samples``.

    Raises:
        ValueError: when ``seq_len`` exceeds the model's ``max_len`` (at the call, before any
            batch is drawn).
    """
    if seq_len > config.max_len:
        raise ValueError(f"seq-len ({seq_len}) must be at most the model's max_len "
                         f"({config.max_len})")
    return _random_batches(config, num_samples, batch_size, seq_len, seed)


def _random_batches(
    config: TransformerConfig, num_samples: int, batch_size: int, seq_len: int, seed: int
) -> Iterator[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    for start in range(0, num_samples, batch_size):
        size = min(batch_size, num_samples - start)
        mask = torch.ones(size, seq_len, dtype=torch.bool)
        if config.vocab_size is not None:
            ids = torch.randint(1, max(config.vocab_size, 2), (size, seq_len), generator=generator)
            yield {"input_ids": ids, "padding_mask": mask}
        elif config.input_dim is not None:
            inputs = torch.randn(size, seq_len, config.input_dim, generator=generator)
            yield {"inputs": inputs, "padding_mask": mask}
        else:
            inputs = torch.randn(size, seq_len, config.dim, generator=generator)
            yield {"inputs_embeds": inputs, "padding_mask": mask}


def task_batches(task: Any, split: str, num_samples: int, batch_size: int) -> Iterable[Any]:
    """The first ``num_samples`` examples of ``task``'s ``split`` (all when it has fewer), in
    order, in batches of ``batch_size`` made by the task's own ``collate``.

    Args:
        task: a ``TaskData`` (``filterformer.data.load_task``).
        split: one of :data:`TASK_SPLITS`.

    Raises:
        ValueError: for another split (naming the valid ones).
    """
    if split not in TASK_SPLITS:
        raise ValueError(f"split must be one of {', '.join(TASK_SPLITS)}; got {split!r}")
    dataset = getattr(task, split)
    subset = torch.utils.data.Subset(dataset, range(min(num_samples, len(dataset))))
    return torch.utils.data.DataLoader(
        subset, batch_size=batch_size, shuffle=False, collate_fn=task.collate
    )


def example_sentences() -> list[str]:
    """The package's built-in inputs for a text model: 16 ordinary English sentences, one per
    line of ``sentences.txt`` beside this module."""
    text = resources.files(__package__).joinpath("sentences.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip()]


def text_batches(
    tokenizer: Callable[..., Any], texts: Sequence[str], batch_size: int,
    max_length: int | None = None,
) -> list[dict[str, torch.Tensor]]:
    """``texts`` tokenized by a Hugging Face ``tokenizer``, ``batch_size`` texts per batch.

    Each batch is the tokenizer's own output as tensors (``input_ids``, ``attention_mask`` 1 at
    real tokens, and whatever else it returns, e.g. ``token_type_ids``), each ``(B, N)`` with
    ``N`` the batch's longest text, cut at ``max_length`` tokens (the tokenizer's limit when
    None). Padding never changes a metric: the attention mask is the padding mask.
    """
    return [
        dict(tokenizer(list(texts[start:start + batch_size]), padding=True, truncation=True,
                       max_length=max_length, return_tensors="pt"))
        for start in range(0, len(texts), batch_size)
    ]


def image_batches(
    num_samples: int, batch_size: int, image_shape: tuple[int, int, int], seed: int
) -> Iterator[dict[str, torch.Tensor]]:
    """Random images for a vision model: standard normal pixels (as if already normalised),
    drawn from a generator seeded with ``seed``, as ``images`` ``(B, C, H, W)`` with
    ``image_shape`` ``(C, H, W)``; ``B`` is ``batch_size``, the last batch holding what is left
    of ``num_samples``."""
    generator = torch.Generator().manual_seed(seed)
    for start in range(0, num_samples, batch_size):
        size = min(batch_size, num_samples - start)
        yield {"images": torch.randn(size, *image_shape, generator=generator)}
