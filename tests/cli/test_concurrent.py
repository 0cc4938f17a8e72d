"""Two commands on one output directory: the second is refused, naming the process of the
first, and the first finishes as if alone; a lock left by a killed command blocks nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from filterformer.cli import main
from filterformer.training.metrics_log import read_metrics

from .test_compare import tiny_budget
from .test_train import tiny_listops, write_yaml


def _wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _training(metrics: Path, process: subprocess.Popen) -> bool:
    """True once ``metrics`` holds a record; fails when ``process`` ended before."""
    if process.poll() is not None:
        raise AssertionError(f"the first command ended (exit {process.returncode}) early")
    return bool(read_metrics(metrics)) if metrics.exists() else False


@pytest.mark.slow
def test_a_second_comparison_in_a_busy_directory_is_refused_and_the_first_finishes(
        tmp_path, capsys):
    out, budget = tmp_path / "out", tiny_budget(tmp_path)
    steps = int(np.random.default_rng().integers(40, 80))
    argv = ["compare", "--config", str(budget), "--methods", "softmax", "gfsa", "--seeds", "0",
            "--output-dir", str(out), "--jobs", "1", "--set", f"max_steps={steps}"]
    first = subprocess.Popen([sys.executable, "-m", "filterformer.cli", *argv, "--quiet"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: _training(out / "runs" / "softmax" / "seed-0" / "metrics.jsonl", first),
                  300, "the first comparison to train")
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == ""  # no run (nor task loading) started
        assert re.fullmatch(
            rf"filterformer compare: error: output_dir {re.escape(str(out))} is in use by "
            rf"process {first.pid}, started [\d-]+ [\d:]+: filterformer compare .*--output-dir "
            rf"{re.escape(str(out))}.* \(lock .*\.filterformer\.lock\); wait for it to end, or "
            r"choose another output_dir\n", captured.err), captured.err
        stdout, stderr = first.communicate(timeout=600)
    finally:
        first.kill()
        first.wait()
    assert first.returncode == 0, stderr
    assert "compared 2 methods × 1 seeds" in stdout
    for method in ("softmax", "gfsa"):
        records = read_metrics(out / "runs" / method / "seed-0" / "metrics.jsonl")
        validations = [r["step"] for r in records if r["split"] == "validation"]
        assert validations == sorted(set(validations)) and validations[-1] == steps, method
        assert [r["split"] for r in records].count("test") == 1, method


@pytest.mark.slow
def test_a_second_train_in_a_busy_directory_is_refused_until_the_first_is_killed(
        tmp_path, capsys):
    out = tmp_path / "run"
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path,
                                                             max_steps=1_000_000))
    argv = ["train", "--config", str(config), "--output-dir", str(out)]
    first = subprocess.Popen([sys.executable, "-m", "filterformer.cli", *argv],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: _training(out / "metrics.jsonl", first) and
                  (out / "checkpoints" / "last.pt").exists(), 300, "the first run to train")
        assert main([*argv, "--resume"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"filterformer train: error: output_dir {out} is in use by "
                              f"process {first.pid}, started "), err
        assert f"filterformer.cli train --config {config} --output-dir {out} (lock " in err, err
        assert first.poll() is None  # the first trains on
    finally:
        first.kill()  # SIGKILL: no clean-up; the lock file stays behind
        first.wait()
    assert (out / ".filterformer.lock").read_text().startswith(f"{first.pid}, ")
    # The dead process's lock blocks nothing: its run resumes, for one step here.
    assert main([*argv, "--resume", "--set", "stop_after=1", "--quiet"]) == 0
    assert "run stopped (continue with --resume)" in capsys.readouterr().out
    assert (out / ".filterformer.lock").read_text().startswith(f"{os.getpid()}, ")
