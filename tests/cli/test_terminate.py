"""``kill`` (SIGTERM) stops ``filterformer compare`` and every worker process it started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .test_compare import tiny_budget

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def _children(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_sigterm_stops_the_workers_of_a_parallel_comparison(tmp_path):
    out = tmp_path / "out"
    command = [sys.executable, "-m", "filterformer.cli", "compare",
               "--config", str(tiny_budget(tmp_path)), "--methods", "softmax", "gfsa",
               "--seeds", "0", "--jobs", "2", "--output-dir", str(out), "--quiet",
               "--set", "max_steps=1000000"]
    # No pipes: a worker left running would hold them open.
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: set[int] = set()
    try:
        # Both runs under way: each worker has written its first training metrics.
        _wait_for(lambda: len(list(out.glob("runs/*/seed-0/metrics.jsonl"))) == 2, 180,
                  "both runs to start training")
        workers = _children(process.pid)
        assert len(workers) >= 2
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 128 + signal.SIGTERM
        _wait_for(lambda: not any(_alive(pid) for pid in workers), 30, "the workers to end")
    finally:
        for pid in [process.pid, *workers]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        process.wait()
