"""Markdown pieces: tables, heading anchors, links relative to the document."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

__all__ = ["anchor", "cell", "relative_link", "table"]


def cell(text: str) -> str:
    """Text as one table cell: on one line, with ``|`` escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table's lines."""
    lines = ["| " + " | ".join(map(cell, header)) + " |",
             "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return lines


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def relative_link(target: str | Path, document_dir: str | Path) -> str:
    """``target``'s path relative to the document's directory, with ``/`` separators (the
    same on every machine for the same layout)."""
    relative = os.path.relpath(Path(target).resolve(), Path(document_dir).resolve())
    return Path(relative).as_posix()
