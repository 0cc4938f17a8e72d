"""Language modelling: windows, next-token labels, positional splits, the default corpora."""

from __future__ import annotations

import pytest
import torch

from filterformer.data import IGNORE_INDEX, MissingSourceError, load_task, read_austen
from filterformer.data.text import AUSTEN_DATA, PYTHON_DOCS_DIR

from .helpers import debian_source


@pytest.fixture
def corpus_dir(tmp_path):
    (tmp_path / "b.txt").write_text("second file, with é and ü\n" * 20)
    (tmp_path / "a.txt").write_text("first file says hello\n" * 30)
    (tmp_path / ".hidden").write_text("never read")
    return tmp_path


def stream_of(dataset) -> list[int]:
    """Rebuild the token stream from consecutive windows."""
    tokens = []
    for i in range(len(dataset)):
        item = dataset[i]
        assert torch.equal(item["labels"][:-1], item["input_ids"][1:])
        tokens.extend(item["input_ids"].tolist())
    tokens.append(int(dataset[len(dataset) - 1]["labels"][-1]))
    return tokens


def test_byte_windows_cover_the_text_in_order(corpus_dir):
    task = load_task("text_lm", path=corpus_dir, max_len=16, validation_fraction=0.1,
                     test_fraction=0.1)
    text = (corpus_dir / "a.txt").read_bytes() + b"\n" + (corpus_dir / "b.txt").read_bytes()
    parts = [stream_of(split) for split in (task.train, task.validation, task.test)]
    assert bytes(b - 1 for part in parts for b in part) == text
    assert abs(len(parts[2]) - 0.1 * len(text)) <= 1
    assert task.kind == "language_modeling" and task.vocab_size == 257


def test_char_level_maps_unseen_characters_to_one(tmp_path):
    (tmp_path / "t.txt").write_text("ab" * 45 + "abcz" * 3)
    task = load_task("text_lm", path=tmp_path / "t.txt", level="char", max_len=8,
                     validation_fraction=0.05, test_fraction=0.05)
    vocabulary = task.metadata["vocabulary"]
    assert vocabulary == "ab" and task.vocab_size == 4
    test_stream = stream_of(task.test)
    decoded = "".join(vocabulary[i - 2] if i >= 2 else "?" for i in test_stream)
    assert decoded == ("ab" * 45 + "abcz" * 3)[-len(decoded):].replace("c", "?").replace("z", "?")


def test_last_short_window_is_padded_with_ignored_labels(tmp_path):
    (tmp_path / "t.txt").write_bytes(bytes(range(65, 65 + 50)))
    task = load_task("text_lm", path=tmp_path / "t.txt", max_len=8, validation_fraction=0.1,
                     test_fraction=0.1)
    items = [task.train[i] for i in range(len(task.train))]
    batch = task.collate(items)
    assert batch["input_ids"].shape == (len(items), 8)
    short = len(items[-1]["input_ids"])
    assert short < 8
    assert (batch["labels"][-1, short:] == IGNORE_INDEX).all()
    assert (batch["input_ids"][-1, short:] == 0).all()
    assert not batch["padding_mask"][-1, short:].any()


def test_bad_level_lists_the_choices(tmp_path):
    with pytest.raises(ValueError, match=r"byte.*char"):
        load_task("text_lm", path=tmp_path, level="word")


def test_real_jane_austen_novels():
    debian_source(AUSTEN_DATA, "r-cran-janeaustenr")
    novels = read_austen()
    assert sorted(novels) == ["emma", "mansfieldpark", "northangerabbey", "persuasion",
                              "prideprejudice", "sensesensibility"]
    assert "It is a truth universally acknowledged" in novels["prideprejudice"]
    task = load_task("text_lm", corpus="austen", level="char", max_tokens=200_000)
    assert task.metadata["num_tokens"]["train"] == 180_000


def test_real_python_docs():
    debian_source(PYTHON_DOCS_DIR, "python3.11-doc")
    task = load_task("text_lm", corpus="python_docs", max_tokens=100_000, max_len=64)
    assert len(task.train) == -(-(90_000 - 1) // 64)
    text = bytes(b - 1 for b in task.train[0]["input_ids"].tolist())
    assert text.isascii()


def test_missing_corpus_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setattr("filterformer.data.sources.debian_path", lambda path, cache_dir=None: None)
    with pytest.raises(MissingSourceError, match="r-cran-janeaustenr"):
        load_task("text_lm", corpus="austen", cache_dir=tmp_path)
