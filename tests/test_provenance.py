"""Provenance: the commit and whether tracked files differ from it."""

import random
import subprocess

from filterformer.provenance import provenance, source_revision


def _git(directory, *args):
    return subprocess.run(["git", *args], cwd=directory, check=True, capture_output=True,
                          text=True).stdout.strip()


def test_commit_and_modified_state_of_a_checkout(tmp_path):
    _git(tmp_path, "init", "-q")
    tracked = tmp_path / "tracked.txt"
    tracked.write_text(str(random.random()))
    _git(tmp_path, "add", "tracked.txt")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    head = _git(tmp_path, "rev-parse", "HEAD")
    assert source_revision(tmp_path) == {"commit": head, "modified": False}
    (tmp_path / "untracked.txt").write_text("x")  # untracked files do not change the code
    assert source_revision(tmp_path)["modified"] is False
    tracked.write_text(str(random.random()) + "changed")
    assert source_revision(tmp_path) == {"commit": head, "modified": True}


def test_outside_a_checkout_nothing_is_claimed(tmp_path):
    assert source_revision(tmp_path) == {"commit": None, "modified": None}


def test_provenance_carries_the_command():
    command = f"filterformer compare --seeds {random.randint(0, 99)}"
    record = provenance(command)
    assert record["command"] == command
    assert set(record) == {"commit", "modified", "command"}
