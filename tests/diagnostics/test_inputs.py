"""Batches to diagnose on: random inputs of the model's kind, a task split's first samples,
tokenized text and random images."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import torch

from filterformer.diagnostics import (
    TASK_SPLITS,
    example_sentences,
    image_batches,
    random_batches,
    task_batches,
    text_batches,
)
from filterformer.models import TransformerConfig


def _config(**fields) -> TransformerConfig:
    return TransformerConfig(**{"dim": 8, "depth": 1, "num_heads": 2, "max_len": 16, **fields})


def test_token_batches_cover_the_samples_with_ids_in_range():
    vocab, seed = random.randint(3, 9), random.randrange(2**31)
    batches = list(random_batches(_config(vocab_size=vocab), 70, 32, 12, seed))
    assert [b["input_ids"].shape for b in batches] == [(32, 12), (32, 12), (6, 12)]
    ids = torch.cat([b["input_ids"] for b in batches])
    # 0 is padding: never drawn; every other id is drawn (840 draws of at most 8 values).
    assert set(ids.unique().tolist()) == set(range(1, vocab))
    for batch in batches:
        assert set(batch) == {"input_ids", "padding_mask"}
        assert batch["padding_mask"].dtype == torch.bool and batch["padding_mask"].all()
        assert batch["padding_mask"].shape == batch["input_ids"].shape


def test_the_seed_alone_decides_the_batches():
    config, seed = _config(vocab_size=50), random.randrange(2**31)
    first = [b["input_ids"] for b in random_batches(config, 10, 4, 8, seed)]
    torch.manual_seed(seed + 1)  # the global generator plays no part
    again = [b["input_ids"] for b in random_batches(config, 10, 4, 8, seed)]
    other = [b["input_ids"] for b in random_batches(config, 10, 4, 8, seed + 1)]
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=True))


@pytest.mark.parametrize(("fields", "key", "width"), [
    ({"input_dim": 5}, "inputs", 5),   # continuous features of the model's input size
    ({}, "inputs_embeds", 8),          # neither: ready embeddings of the model's width
])
def test_continuous_models_get_standard_normal_features(fields, key, width):
    batches = list(random_batches(_config(**fields), 200, 64, 16, random.randrange(2**31)))
    assert [set(b) for b in batches] == [{key, "padding_mask"}] * 4
    values = torch.cat([b[key] for b in batches])
    assert values.shape == (200, 16, width)
    # 200·16·width ≥ 16,000 draws: the mean and std are within 0.05 of 0 and 1 (> 6 s.e.).
    assert abs(values.mean().item()) < 0.05 and abs(values.std().item() - 1) < 0.05


def test_a_sequence_longer_than_the_model_is_refused_at_the_call():
    with pytest.raises(ValueError, match=r"seq-len \(17\) must be at most the model's max_len "
                                         r"\(16\)"):
        random_batches(_config(vocab_size=10), 4, 2, 17, 0)


def _task(sizes: dict[str, int]) -> SimpleNamespace:
    """A task whose examples are their own split and position, collated into tensors."""
    splits = {
        split: [{"split": i, "index": n} for n in range(sizes[split])]
        for i, split in enumerate(TASK_SPLITS)
    }

    def collate(items):
        return {key: torch.tensor([item[key] for item in items]) for key in ("split", "index")}

    return SimpleNamespace(**splits, collate=collate)


def test_task_batches_are_the_first_samples_of_the_split_in_order():
    sizes = {split: random.randint(20, 40) for split in TASK_SPLITS}
    task = _task(sizes)
    for position, split in enumerate(TASK_SPLITS):
        batches = list(task_batches(task, split, 13, 5))
        assert [len(b["index"]) for b in batches] == [5, 5, 3]
        assert torch.cat([b["index"] for b in batches]).tolist() == list(range(13))
        assert all((b["split"] == position).all() for b in batches)
        # asking for more than the split holds gives the whole split
        everything = torch.cat([b["index"] for b in task_batches(task, split, 1000, 7)])
        assert everything.tolist() == list(range(sizes[split]))


def test_an_unknown_split_names_the_valid_ones():
    with pytest.raises(ValueError, match=r"split must be one of train, validation, test; got "
                                         r"'dev'"):
        task_batches(_task(dict.fromkeys(TASK_SPLITS, 3)), "dev", 2, 2)


def test_the_example_sentences_are_ordinary_english_lines():
    sentences = example_sentences()
    assert len(sentences) == 16
    assert all(s[0].isupper() and s.endswith(".") and s == s.strip() for s in sentences)
    assert len(set(sentences)) == 16


class _WordTokenizer:
    """A stand-in for a Hugging Face tokenizer: one id per word, padded with 0."""

    def __call__(self, texts, *, padding, truncation, max_length, return_tensors):
        assert (padding, truncation, return_tensors) == (True, True, "pt")
        ids = [[len(word) for word in text.split()][:max_length] for text in texts]
        width = max(map(len, ids))
        return {
            "input_ids": torch.tensor([row + [0] * (width - len(row)) for row in ids]),
            "attention_mask": torch.tensor([[1] * len(row) + [0] * (width - len(row))
                                            for row in ids]),
        }


def test_text_batches_tokenize_in_order_batch_by_batch():
    texts = ["a bb ccc", "dddd", "ee f", "g hh iii jjjj kkkkk"]
    batches = text_batches(_WordTokenizer(), texts, 3, max_length=4)
    assert [b["input_ids"].tolist() for b in batches] == [
        [[1, 2, 3], [4, 0, 0], [2, 1, 0]], [[1, 2, 3, 4]],  # padded per batch, cut at 4
    ]
    assert batches[0]["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]]


def test_image_batches_are_seeded_standard_normal_images():
    seed = random.randrange(2**31)
    batches = list(image_batches(70, 32, (3, 8, 6), seed))
    assert [set(b) for b in batches] == [{"images"}] * 3
    assert [b["images"].shape for b in batches] == [(32, 3, 8, 6), (32, 3, 8, 6), (6, 3, 8, 6)]
    images = torch.cat([b["images"] for b in batches])
    assert abs(images.mean()) < 0.05 and abs(images.std() - 1) < 0.05
    torch.manual_seed(seed + 1)  # the global generator plays no part
    again = torch.cat([b["images"] for b in image_batches(70, 32, (3, 8, 6), seed)])
    assert torch.equal(images, again)
