"""The fenced code blocks of README.md, for the tests that run them as a reader would."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: its language, its text and the README line its code starts on."""

    language: str
    text: str
    line: int


def code_blocks(language: str, path: Path = README) -> list[CodeBlock]:
    """Every block fenced as ``language`` in ``path``, in the order of the file."""
    document = path.read_text()
    return [
        CodeBlock(found[1], found[2], document.count("\n", 0, found.start(2)) + 1)
        for found in _FENCE.finditer(document) if found[1] == language
    ]
