"""The text_lm task's tokenizer: the ids the task trains on, and text back from them."""

from __future__ import annotations

import random

import pytest

from filterformer.data import load_task
from filterformer.data.text_tokenizer import TextTokenizer

ALPHABET = "abcdefgh é€ü\n🙂"


def _text(length: int, alphabet: str = ALPHABET) -> str:
    return "".join(random.choice(alphabet) for _ in range(length))


@pytest.mark.parametrize("level", ["byte", "char"])
def test_the_task_records_the_tokenizer_that_made_its_ids(tmp_path, level):
    text = _text(400)
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    task = load_task("text_lm", path=tmp_path / "t.txt", level=level, max_len=16,
                     validation_fraction=0.1, test_fraction=0.1)
    tokenizer = TextTokenizer.from_dict(task.metadata["text_tokenizer"])
    assert tokenizer.vocab_size == task.vocab_size
    stream = [i for split in (task.train, task.validation, task.test)
              for i in split.tokens.tolist()]
    assert tokenizer.encode(text) == stream
    assert tokenizer.decode(stream) == text


def test_char_ids_outside_the_vocabulary_and_padding():
    tokenizer = TextTokenizer("char", "".join(sorted(set(_text(50, "abcdef")))))
    ids = tokenizer.encode("zab")
    assert ids[0] == 1 and tokenizer.decode([0, *ids, 0]) == "\ufffdab"
    with pytest.raises(ValueError, match=r"ids must lie in 1\.\."):
        tokenizer.decode([tokenizer.vocab_size])
    byte = TextTokenizer("byte")
    assert byte.decode(byte.encode("é")[:1]) == "\ufffd"
    with pytest.raises(ValueError, match="a char-level tokenizer takes a vocabulary string"):
        TextTokenizer("char")
    with pytest.raises(ValueError, match="a text tokenizer is"):
        TextTokenizer.from_dict({"level": "byte"})
