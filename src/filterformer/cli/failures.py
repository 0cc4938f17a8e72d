"""How the command line reports what went wrong: one line per failure or warning, no traceback.

Errors raised on purpose (``ValueError``, and ``OSError`` for files) already name the file or
argument; anything else is a fault the message cannot explain as well, so its type is shown and
``--debug`` offered for the traceback.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

__all__ = ["command_warnings", "describe_failure"]

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
_TRACEBACK_HINT = "run with --debug for the traceback"


def _first_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


def describe_failure(err: BaseException) -> str:
    """The one-line (or, for a missing source, the few-line) message ``err`` ends a command with.

    Args:
        err: the exception that ended the command.
    """
    if isinstance(err, ValueError):
        return str(err) or f"{type(err).__name__} ({_TRACEBACK_HINT})"
    if isinstance(err, OSError):
        if err.filename is not None and err.strerror:
            target = f" -> {err.filename2}" if err.filename2 is not None else ""
            return f"{err.filename}{target}: {err.strerror}"
        return str(err) or f"{type(err).__name__} ({_TRACEBACK_HINT})"
    if isinstance(err, KeyError):
        key = err.args[0] if err.args else None
        return f"missing key {key!r} (KeyError; {_TRACEBACK_HINT})"
    detail = _first_line(str(err))
    return f"{type(err).__name__}: {detail} ({_TRACEBACK_HINT})" if detail else (
        f"{type(err).__name__} ({_TRACEBACK_HINT})")


@contextlib.contextmanager
def command_warnings(command: str) -> Iterator[None]:
    """While a command runs, show this package's warnings as ``filterformer COMMAND: warning: …``
    lines on stderr (others keep Python's format)."""
    with warnings.catch_warnings():
        default = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None) -> None:
            try:
                ours = Path(filename).resolve().is_relative_to(_PACKAGE_DIR)
            except (OSError, ValueError):
                ours = False
            if not ours:
                default(message, category, filename, lineno, file, line)
                return
            print(f"filterformer {command}: warning: {message}", file=file or sys.stderr)

        warnings.showwarning = show
        yield
