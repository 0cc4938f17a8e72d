"""Whether a test row was fixed before its results existed, from the claims file's git history.

A row's decisions are its method, metric, expectation, margin, ``versus`` setting and whether
it is an ``interaction``. Its results existed from two moments on: the commit recorded in the
``results.json`` (``provenance.commit``, the code the comparison ran from), and the commit that
first added that file to the repository (an earlier run at the same path counts: its numbers
were seen). A row is fixed before its results when the claims file held the same decisions for
the same setting at the recorded commit and at the parent of that first commit, for every
results file the row reads; otherwise it is *post hoc*. Without git, or with the claims file
outside a repository, or with neither moment known for a results file, the answer is unknown.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from .claims import ClaimTest

if TYPE_CHECKING:
    from ..training.compare.comparison_results import ComparisonResults

__all__ = ["FIXED", "POST_HOC", "UNKNOWN", "ClaimsHistory", "RowKey", "claim_row_key",
           "row_keys"]

FIXED = "fixed before"
POST_HOC = "post hoc"
UNKNOWN = "unknown"

#: A row's decisions on one setting: claim id, method, metric, expect, margin, versus,
#: interaction, setting.
RowKey = tuple[str, str, str, str, float | None, str | None, bool, str]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def row_keys(data: Any) -> set[RowKey]:
    """Every row's decisions in a claims file's content, read leniently (an older file need not
    pass today's checks: what cannot be read holds no row)."""
    keys: set[RowKey] = set()
    for claim in data if isinstance(data, list) else []:
        if not isinstance(claim, dict):
            continue
        settings = [s.get("results") for s in claim.get("settings") or []
                    if isinstance(s, dict)]
        for test in claim.get("tests") or []:
            if not isinstance(test, dict):
                continue
            versus = test.get("versus")
            interaction = test.get("interaction") is True  # absent (older files): not one
            chosen = test.get("settings") or settings
            for setting in chosen if isinstance(chosen, list) else []:
                if setting != versus:
                    keys.add((str(claim.get("id")), str(test.get("method")),
                              str(test.get("metric")), str(test.get("expect")),
                              _number(test.get("margin")), versus, interaction,
                              str(setting)))
    return keys


def claim_row_key(claim_id: str, test: ClaimTest, setting: str) -> RowKey:
    """The decisions of ``test`` on ``setting``, as :func:`row_keys` reads them."""
    return (claim_id, test.method, test.metric, test.expect, test.margin, test.versus,
            test.interaction, setting)


@dataclass(frozen=True)
class _Repository:
    root: Path

    def git(self, *args: str) -> str | None:
        """Git's output, or None when the command fails."""
        try:
            done = subprocess.run(["git", "-C", str(self.root), *args], capture_output=True,
                                  text=True, check=False)
        except OSError:
            return None
        return done.stdout if done.returncode == 0 else None


def _repository(path: Path) -> _Repository | None:
    try:
        done = subprocess.run(["git", "-C", str(path), "rev-parse", "--show-toplevel"],
                              capture_output=True, text=True, check=False)
    except OSError:  # no git on this machine
        return None
    if done.returncode != 0:
        return None
    return _Repository(Path(done.stdout.strip()).resolve())


class ClaimsHistory:
    """The claims file's history in its git repository.

    Args:
        claims_path: the claims file; None or outside a git repository: every row is unknown.
    """

    def __init__(self, claims_path: str | Path | None) -> None:
        self._repository = None
        if claims_path is not None:
            claims_path = Path(claims_path).resolve()
            self._repository = _repository(claims_path.parent)
        self._claims = (claims_path.relative_to(self._repository.root).as_posix()
                        if self._repository is not None else None)
        self._keys_at = cache(self._keys_at_uncached)
        self._anchors = cache(self._anchors_uncached)

    def _inside(self, path: Path) -> str | None:
        try:
            return path.resolve().relative_to(self._repository.root).as_posix()
        except ValueError:
            return None

    def _keys_at_uncached(self, commit: str) -> frozenset[RowKey]:
        text = self._repository.git("show", f"{commit}:{self._claims}")
        try:  # a claims file missing then, or unreadable, held no row
            return frozenset(row_keys(yaml.safe_load(text))) if text else frozenset()
        except yaml.YAMLError:
            return frozenset()

    def _anchors_uncached(self, path: Path, recorded: str | None) -> tuple[str, ...]:
        """The commits whose claims file must hold a row of results file ``path``."""
        anchors = []
        if recorded and self._repository.git("cat-file", "-e", f"{recorded}^{{commit}}") \
                is not None:
            anchors.append(recorded)
        inside = self._inside(path)
        added = self._repository.git("log", "--diff-filter=A", "--format=%H", "--",
                                     inside) if inside else None
        if added and added.split():
            first = added.split()[-1]  # git log lists the newest first
            parent = self._repository.git("rev-parse", "--verify", "--quiet", f"{first}^")
            anchors.append(parent.strip() if parent else "")  # "": no parent, no claims file
        return tuple(anchors)

    def status(self, key: RowKey, results: list[tuple[Path, ComparisonResults]]) -> str:
        """:data:`FIXED`, :data:`POST_HOC` or :data:`UNKNOWN` for a row's decisions ``key``
        judged from ``results`` (each results file's path and content)."""
        if self._repository is None or self._claims is None:
            return UNKNOWN
        known = True
        for path, content in results:
            anchors = self._anchors(path, (content.provenance or {}).get("commit"))
            known = known and bool(anchors)
            if any(not commit or key not in self._keys_at(commit) for commit in anchors):
                return POST_HOC
        return FIXED if known else UNKNOWN
