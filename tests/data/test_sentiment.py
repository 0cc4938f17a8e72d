"""Sentence sentiment: fixture files, the sdist layout, WordPiece against MiniLM's vocabulary,
and the real Rotten Tomatoes counts."""

from __future__ import annotations

import io
import tarfile

import pytest
import torch

from filterformer.data import MissingSourceError, load_task, read_movie_snippets
from filterformer.data.sentiment import minilm_tokenizer_path

ROWS = [
    ("1", 2.5, "a gorgeous , witty film"),
    ("2", -1.25, "dull and far too long"),
    ("3", 0.0, "it is a movie"),
    ("4", 0.6, "surprisingly moving"),
    ("5", -3.0, "the worst script of the year"),
    ("6", 1.0, "charming performances all around"),
    ("7", -0.4, "forgettable"),
    ("8", 3.9, "a masterpiece"),
    ("9", -2.2, "painfully unfunny"),
    ("10", 1.7, "smart , sharp and funny"),
    ("11", -1.1, "a mess"),
    ("12", 2.0, "worth seeing twice"),
]


def snippets_bytes() -> bytes:
    # the real file ends its lines with a bare carriage return
    return "\r".join(f"{i}\t{r}\t{t}" for i, r, t in ROWS).encode()


def tar_with(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def snippets_file(tmp_path):
    path = tmp_path / "movieReviewSnippets_GroundTruth.txt"
    path.write_bytes(snippets_bytes())
    return path


def test_sdist_layout_is_read(tmp_path):
    inner = tar_with("hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt", snippets_bytes())
    sdist = tmp_path / "vaderSentiment-3.3.2.tar.gz"
    sdist.write_bytes(tar_with(
        "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz", inner))
    assert read_movie_snippets(sdist) == ROWS
    (tmp_path / "sources").mkdir()
    sdist.rename(tmp_path / "sources" / sdist.name)
    assert read_movie_snippets(cache_dir=tmp_path) == ROWS


def test_byte_task_drops_neutral_sentences_and_labels_by_sign(snippets_file):
    task = load_task("sentiment_bytes", path=snippets_file, validation_fraction=0.2,
                     test_fraction=0.2)
    expected = {t: int(r > 0) for _, r, t in ROWS if r != 0}
    seen = {}
    for split in (task.train, task.validation, task.test):
        for i in range(len(split)):
            item = split[i]
            text = bytes((item["input_ids"] - 1).tolist()).decode()
            seen[text] = int(item["labels"])
    assert seen == expected and task.vocab_size == 257


def test_wordpiece_ids_spell_the_sentence_in_minilm_vocabulary(snippets_file):
    task = load_task("sentiment", path=snippets_file, validation_fraction=0.2, test_fraction=0.2)
    vocabulary = (minilm_tokenizer_path() / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert task.vocab_size == len(vocabulary)
    texts = {t.replace(" ", "") for _, r, t in ROWS if r != 0}
    for split in (task.train, task.validation, task.test):
        for i in range(len(split)):
            pieces = [vocabulary[j] for j in split[i]["input_ids"].tolist()]
            assert pieces[0] == "[CLS]" and pieces[-1] == "[SEP]"
            assert "".join(p.removeprefix("##") for p in pieces[1:-1]) in texts
    batch = task.collate([task.train[i] for i in range(len(task.train))])
    assert (batch["input_ids"][~batch["padding_mask"]] == 0).all()
    assert vocabulary[0] == "[PAD]"


def test_missing_sdist_gives_the_download_command(tmp_path):
    with pytest.raises(MissingSourceError, match=r"pip download --no-binary :all: --no-deps "
                                                 r"vaderSentiment==3\.3\.2"):
        read_movie_snippets(cache_dir=tmp_path)


def test_real_rotten_tomatoes_counts():
    rows = read_movie_snippets()
    assert len(rows) == 10605
    assert sum(rating == 0 for _, rating, _ in rows) == 37
    assert all(-4 <= rating <= 4 for _, rating, _ in rows)
    task = load_task("sentiment_bytes")
    sizes = [len(task.train), len(task.validation), len(task.test)]
    assert sum(sizes) == 10605 - 37 and task.metadata["num_sentences"] == 10568


def test_real_wordpiece_task_keeps_every_sentence_whole():
    task = load_task("sentiment")
    assert len(task.train) + len(task.validation) + len(task.test) == 10568
    assert task.max_len < 128  # no sentence needed truncating


def test_a_sentences_file_that_is_missing_or_malformed_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=rf"task option path\) {tmp_path} is not a file"):
        read_movie_snippets(tmp_path)
    path = tmp_path / "snippets.txt"
    bad = str(torch.randint(2, 6, ()).item())
    lines = [f"{i}\t{torch.randn(()).item():.3f}\tsentence {i}" for i in range(1, 6)]
    lines[int(bad) - 1] = f"{bad}\tinf\tsentence"
    path.write_text("\r".join(lines) + "\r")
    with pytest.raises(ValueError, match=rf"{path}: line {bad} is not '<id>\\t<finite rating>"):
        read_movie_snippets(path)
    lines[int(bad) - 1] = f"{bad} no tabs"
    path.write_text("\r".join(lines) + "\r")
    with pytest.raises(ValueError, match=rf"{path}: line {bad} is not"):
        read_movie_snippets(path)
