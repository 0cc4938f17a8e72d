"""Byte- and character-level language modelling on any text file or directory.

Documented default corpora, both Debian packages (installed, or unpacked by ``scripts/setup.sh``):

- ``python_docs``: ``python3.11-doc``, 11 MB of reStructuredText under
  ``/usr/share/doc/python3.11/html/_sources``;
- ``austen``: ``r-cran-janeaustenr``, Jane Austen's six novels (4 MB) in an R lazy-load database,
  read with the PyPI package ``rdata``.

The text is split by position, not at random, so that no window of validation or test text is
also seen in training: the first part trains, the next validates, the last tests.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import numpy as np
import torch

from .datasets import LanguageModelingDataset, collate_sequences
from .sources import (
    MissingSourceError,
    debian_fetch_command,
    require_debian_path,
    require_module,
)
from .splits import check_split_fractions
from .task import TaskData
from .text_tokenizer import LEVELS, TextTokenizer

__all__ = [
    "AUSTEN_DATA",
    "CORPORA",
    "LEVELS",
    "PYTHON_DOCS_DIR",
    "load_text_lm",
    "read_austen",
    "read_corpus",
    "read_text_path",
]

PYTHON_DOCS_DIR = "/usr/share/doc/python3.11/html/_sources"
AUSTEN_DATA = "/usr/lib/R/site-library/janeaustenr/data"
CORPORA = ("python_docs", "austen")
_CORPUS_PACKAGES = {"python_docs": "python3.11-doc", "austen": "r-cran-janeaustenr"}


def read_text_path(path: str | os.PathLike) -> bytes:
    """The bytes of a file, or of every non-hidden file under a directory, in sorted path order
    and joined by newlines."""
    source = Path(path).expanduser()
    if source.is_file():
        return source.read_bytes()
    if not source.is_dir():
        raise FileNotFoundError(f"path {source} is neither a file nor a directory")
    files = sorted(
        p for p in source.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(source).parts)
    )
    if not files:
        raise FileNotFoundError(f"path {source} holds no files")
    return b"\n".join(p.read_bytes() for p in files)


def read_austen(cache_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """Jane Austen's novels from the janeaustenr R package: ``{name: text}``.

    R stores package data as a lazy-load database: ``Rdata.rdx`` (an RDS index of byte ranges)
    and ``Rdata.rdb``, where each range is a 4-byte big-endian length and a zlib stream of one
    serialized R object, here a character vector of lines.
    """
    folder = require_debian_path(
        AUSTEN_DATA, "Jane Austen's novels", "r-cran-janeaustenr", cache_dir
    )
    require_module("rdata", "rdata")
    import rdata

    index = rdata.read_rds(folder / "Rdata.rdx")
    database = (folder / "Rdata.rdb").read_bytes()
    novels = {}
    for name, (offset, length) in sorted(index["variables"].items(), key=lambda kv: kv[1][0]):
        chunk = database[int(offset) : int(offset) + int(length)]
        (size,) = struct.unpack(">I", chunk[:4])
        serialized = zlib.decompress(chunk[4:])
        if len(serialized) != size:
            raise ValueError(f"janeaustenr entry {name!r} is corrupt")
        lines = rdata.conversion.convert(rdata.parser.parse_data(serialized, extension=".rds"))
        novels[str(name)] = "\n".join(str(line) for line in lines)
    return novels


def read_corpus(name: str, cache_dir: str | os.PathLike | None = None) -> tuple[bytes, str]:
    """A default corpus as UTF-8 bytes, and where it came from."""
    if name not in CORPORA:
        raise ValueError(f"corpus must be one of {CORPORA}; got {name!r}")
    if name == "austen":
        return "\n\n".join(read_austen(cache_dir).values()).encode("utf-8"), AUSTEN_DATA
    folder = require_debian_path(
        PYTHON_DOCS_DIR, "the Python 3.11 documentation sources", "python3.11-doc", cache_dir
    )
    return read_text_path(folder), str(folder)


def _default_corpus(cache_dir: str | os.PathLike | None) -> tuple[bytes, str, str]:
    errors = []
    for name in CORPORA:
        try:
            data, source = read_corpus(name, cache_dir)
        except MissingSourceError as error:
            errors.append(str(error))
            continue
        return data, source, name
    raise MissingSourceError(
        "a default text corpus (python_docs or austen)",
        "the Debian package python3.11-doc or r-cran-janeaustenr, or any text file or "
        "directory passed as path",
        debian_fetch_command("python3.11-doc", cache_dir),
    ) from FileNotFoundError("; ".join(errors))


def load_text_lm(
    *,
    path: str | os.PathLike | None = None,
    corpus: str | None = None,
    level: str = "byte",
    max_len: int = 256,
    max_tokens: int | None = None,
    seed: int = 0,
    validation_fraction: float = 0.05,
    test_fraction: float = 0.05,
    cache_dir: str | os.PathLike | None = None,
) -> TaskData:
    """Next-token prediction on windows of ``max_len`` bytes or characters.

    Args:
        path: a text file or a directory of them; overrides ``corpus``.
        corpus: ``"python_docs"`` or ``"austen"``; by default the first of them found.
        level: ``"byte"`` (ids = byte + 1, vocabulary 257) or ``"char"`` (ids 2.. for the
            characters seen in training, 1 for an unseen one): :class:`TextTokenizer`, which
            ``metadata["text_tokenizer"]`` holds as a dict.
        max_len: tokens per window.
        max_tokens: use only the first this many tokens of the text (CPU-sized runs).
        seed: recorded for the run; the split is by position.
        validation_fraction: share of the text, after the training part, for model selection.
        test_fraction: share of the text, at the end, for the final test.
        cache_dir: cache root, where unpacked Debian packages are looked for.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}; got {level!r}")
    if corpus is not None and corpus not in CORPORA:
        raise ValueError(f"corpus must be one of {CORPORA}; got {corpus!r}")
    check_split_fractions(validation_fraction, test_fraction)
    if path is not None:
        data, source, corpus_name = read_text_path(path), str(path), None
    elif corpus is not None:
        (data, source), corpus_name = read_corpus(corpus, cache_dir), corpus
    else:
        data, source, corpus_name = _default_corpus(cache_dir)

    stream = TextTokenizer.codes(data, level)
    stream = stream[:max_tokens] if max_tokens is not None else stream
    total = len(stream)
    cut_train = round(total * (1 - validation_fraction - test_fraction))
    cut_validation = round(total * (1 - test_fraction))
    parts = {"train": stream[:cut_train], "validation": stream[cut_train:cut_validation],
             "test": stream[cut_validation:]}
    vocabulary = None if level == "byte" else "".join(chr(c) for c in np.unique(parts["train"]))
    tokenizer = TextTokenizer(level, vocabulary)
    ids = {k: torch.from_numpy(tokenizer.ids_of_codes(v)) for k, v in parts.items()}
    datasets = {k: LanguageModelingDataset(v, max_len) for k, v in ids.items()}
    return TaskData(
        name="text_lm",
        kind="language_modeling",
        train=datasets["train"],
        validation=datasets["validation"],
        test=datasets["test"],
        collate=collate_sequences,
        num_classes=None,
        vocab_size=tokenizer.vocab_size,
        input_dim=None,
        max_len=max_len,
        metadata={"source": source, "corpus": corpus_name, "level": level, "seed": seed,
                  "vocabulary": vocabulary, "num_tokens": {k: len(v) for k, v in ids.items()},
                  "text_tokenizer": tokenizer.to_dict()},
    )
