"""The token ids of the ``text_lm`` task: bytes or characters, both ways.

- ``byte``: id = byte + 1 (vocabulary 257);
- ``char``: the characters seen in training, sorted, get ids 2, 3, …; any other character is 1.

Id 0 is padding in both. A run records its tokenizer (:meth:`TextTokenizer.to_dict`), so that
text can be encoded for, and decoded from, the model it trained.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["LEVELS", "TextTokenizer"]

LEVELS = ("byte", "char")
#: The id of a character the vocabulary lacks (``char`` level).
UNKNOWN_ID = 1


@dataclass(frozen=True)
class TextTokenizer:
    """Attributes:
    level: ``"byte"`` or ``"char"``.
    vocabulary: ``char`` level: the characters of ids 2, 3, … in code-point order; None for
        ``byte``.
    """

    level: str
    vocabulary: str | None = None

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}; got {self.level!r}")
        if (self.level == "char") != isinstance(self.vocabulary, str):
            takes = "a vocabulary string" if self.level == "char" else "no vocabulary"
            raise ValueError(f"a {self.level}-level tokenizer takes {takes}; got "
                             f"{self.vocabulary!r:.80}")

    @property
    def vocab_size(self) -> int:
        return 257 if self.vocabulary is None else len(self.vocabulary) + 2

    @staticmethod
    def codes(data: bytes, level: str) -> np.ndarray:
        """The bytes (``uint8``) or Unicode code points (``uint32``) of UTF-8 ``data``."""
        if level == "byte":
            return np.frombuffer(data, dtype=np.uint8)
        text = data.decode("utf-8", errors="replace")
        return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)

    def ids_of_codes(self, codes: np.ndarray) -> np.ndarray:
        """The ids of :meth:`codes`' output: ``int16`` bytes + 1, or ``int32`` character ids."""
        if self.vocabulary is None:
            return codes.astype(np.int16) + 1
        seen = np.frombuffer(self.vocabulary.encode("utf-32-le"), dtype=np.uint32)
        if not len(seen):
            return np.full(codes.shape, UNKNOWN_ID, dtype=np.int32)
        position = np.clip(np.searchsorted(seen, codes), 0, len(seen) - 1)
        known = seen[position] == codes
        return np.where(known, position + 2, UNKNOWN_ID).astype(np.int32)

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``."""
        return self.ids_of_codes(self.codes(text.encode("utf-8"), self.level)).tolist()

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``: padding (0) left out, an unknown character (``char``) or an
        incomplete UTF-8 sequence (``byte``) shown as U+FFFD."""
        ids = [int(i) for i in ids if int(i) != 0]
        bad = [i for i in ids if not 0 < i < self.vocab_size]
        if bad:
            raise ValueError(f"ids must lie in 1..{self.vocab_size - 1} for this {self.level}-"
                             f"level tokenizer; got {bad[:5]}")
        if self.vocabulary is None:
            return bytes(i - 1 for i in ids).decode("utf-8", errors="replace")
        return "".join("\ufffd" if i == UNKNOWN_ID else self.vocabulary[i - 2] for i in ids)

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "vocabulary": self.vocabulary}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TextTokenizer:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: for other keys or values.
        """
        if not isinstance(data, Mapping) or set(data) != {"level", "vocabulary"}:
            raise ValueError(f"a text tokenizer is {{'level', 'vocabulary'}}; got {data!r:.200}")
        return cls(data["level"], data["vocabulary"])
