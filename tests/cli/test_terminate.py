"""``kill`` (SIGTERM) stops ``filterformer compare`` and every worker process it started;
``kill -9`` of the comparison ends its workers too, and a rerun then gives the records of an
uninterrupted run."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import torch

from filterformer.training import train
from filterformer.training.compare import load_compare_config
from filterformer.training.metrics_log import read_metrics

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


def _marked(mark: str) -> list[int]:
    """The live processes whose environment holds ``mark`` (every process a command started
    inherits it)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            marked = mark.encode() in environ.read_bytes().split(b"\0")
        except OSError:  # ended meanwhile, or not ours
            continue
        if marked and _alive(int(environ.parent.name)):
            found.append(int(environ.parent.name))
    return found


@pytest.mark.slow
def test_sigkill_of_a_parallel_comparison_ends_its_workers_and_a_rerun_finishes_it(tmp_path):
    out, budget = tmp_path / "out", tiny_budget(tmp_path)
    options = ["--methods", "softmax", "gfsa", "--seeds", "0", "--set", "max_steps=120"]
    command = [sys.executable, "-m", "filterformer.cli", "compare", "--config", str(budget),
               *options, "--jobs", "2", "--output-dir", str(out), "--quiet"]
    mark = f"FILTERFORMER_TEST_MARK={uuid.uuid4().hex}"
    env = {**os.environ, mark.split("=")[0]: mark.split("=")[1]}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        # Both runs under way: each worker has written its first validation record.
        _wait_for(lambda: all(read_metrics(path) for path in
                              out.glob("runs/*/seed-0/metrics.jsonl")) and
                  len(list(out.glob("runs/*/seed-0/metrics.jsonl"))) == 2, 300,
                  "both runs to start training")
        assert len(_marked(mark)) >= 3  # the comparison and its two workers
        process.kill()
        process.wait()
        unfinished = [run for run in ("softmax", "gfsa")
                      if not (out / "runs" / run / "seed-0" / "summary.json").exists()]
        assert unfinished, "the runs finished before the kill: nothing was interrupted"
        _wait_for(lambda: not _marked(mark), 10, "every process of the comparison to end")
        # Started at once, the rerun resumes the runs alone.
        rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        assert rerun.returncode == 0, rerun.stderr
    finally:
        for pid in _marked(mark):
            os.kill(pid, signal.SIGKILL)
        process.wait()
    config = load_compare_config(budget, ["max_steps=120", f"output_dir={out}"],
                                 methods=["softmax", "gfsa"], seeds=[0])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the comparison's runs train with one thread (--threads 1)
    try:
        for method in config.methods:
            run = config.plan(method, 0).config
            alone = train(dataclasses.replace(run, output_dir=str(tmp_path / method)))
            records = read_metrics(Path(run.output_dir) / "metrics.jsonl")
            assert [r["split"] for r in records].count("test") == 1, method
            assert records == read_metrics(Path(alone.run_dir) / "metrics.jsonl"), method
    finally:
        torch.set_num_threads(threads)
