"""One process at a time in a run or comparison directory; a dead holder's lock blocks nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from filterformer.training.directory_lock import (
    LOCK_FILE,
    DirectoryInUseError,
    directory_lock,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="directories are not locked")

#: Holds the directory argv[1] with the command argv[2] until its stdin closes.
HOLDER = """
import sys
from filterformer.training.directory_lock import directory_lock
with directory_lock(sys.argv[1], command=sys.argv[2]):
    print("held", flush=True)
    sys.stdin.read()
"""


def _hold(directory, command: str) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(directory), command],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    return holder


def test_a_held_directory_is_refused_naming_the_holder_until_it_is_killed(tmp_path):
    directory = tmp_path / "runs" / uuid.uuid4().hex
    command = f"filterformer compare --output-dir {directory} --seeds {os.getpid() % 97}"
    holder = _hold(directory, command)
    try:
        with pytest.raises(DirectoryInUseError) as refused, \
                directory_lock(directory, name="--output-dir"):
            pass
        assert str(refused.value).startswith(
            f"--output-dir {directory} is in use by process {holder.pid}, started ")
        assert f": {command} (lock {directory / LOCK_FILE}); wait for it to end" in \
            str(refused.value)
        assert refused.value.holder.startswith(f"{holder.pid}, started ")
    finally:
        holder.kill()  # no clean-up: the lock file keeps the dead process's record
        holder.wait()
    assert (directory / LOCK_FILE).read_text().startswith(f"{holder.pid}, ")
    with directory_lock(directory, command="mine") as path:
        assert path.read_text().endswith(": mine\n")
        assert path.read_text().startswith(f"{os.getpid()}, ")


def test_the_lock_is_released_when_the_block_ends_even_by_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="inside"), directory_lock(tmp_path):
        raise RuntimeError("inside")
    holder = _hold(tmp_path, "second")  # another process takes it at once
    holder.stdin.close()
    assert holder.wait() == 0


def test_a_second_lock_in_the_same_process_is_refused_too(tmp_path):
    refused = pytest.raises(DirectoryInUseError, match=rf"process {os.getpid()}, .*: outer")
    with directory_lock(tmp_path, command="outer"), refused, directory_lock(tmp_path):
        pass


def test_an_unusable_directory_is_refused_by_name_before_anything_is_created(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ValueError, match=rf"output_dir {blocker}/run cannot be created: "
                                         rf"{blocker} is not a directory"), \
            directory_lock(blocker / "run"):
        pass
    assert blocker.read_text() == "not a directory"
