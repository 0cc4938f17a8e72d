"""Where a result came from: the source revision of the code that made it, and the command.

Results that a project publishes (a comparison's ``results.json``) record both, so that anyone
can check out the same commit and run the same command again.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

__all__ = ["provenance", "source_revision"]


def _git(args: list[str], directory: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=directory, capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def source_revision(directory: str | Path | None = None) -> dict[str, Any]:
    """The git commit checked out in ``directory`` (default: this package's source tree).

    Returns:
        ``{"commit": sha or None, "modified": bool or None}``: ``modified`` is True when tracked
        files differ from the commit, so the commit alone does not reproduce the code; both are
        None outside a git checkout (an installed wheel) or without git.
    """
    directory = Path(directory) if directory is not None else Path(__file__).resolve().parent
    commit = _git(["rev-parse", "HEAD"], directory)
    if commit is None:
        return {"commit": None, "modified": None}
    status = _git(["status", "--porcelain", "--untracked-files=no"], directory)
    return {"commit": commit, "modified": None if status is None else bool(status)}


def provenance(command: str | None) -> dict[str, Any]:
    """The source revision and ``command`` (the command line that made a result, or None)."""
    return {**source_revision(), "command": command}
