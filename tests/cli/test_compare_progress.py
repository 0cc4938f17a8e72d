"""``filterformer compare`` shows each run's progress while it trains, also from worker
processes (``--jobs 2``): plain lines naming the run, before the line of the finished run."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from .test_compare import tiny_budget


def test_worker_runs_report_their_steps_and_evaluations_while_they_train(tmp_path):
    command = [sys.executable, "-m", "filterformer.cli", "compare", "--config",
               str(tiny_budget(tmp_path)), "--methods", "softmax", "gfsa", "--seeds", "0",
               "--jobs", "2", "--output-dir", str(tmp_path / "out")]
    # Unbuffered, as under Docker or a job scheduler: every write reaches the pipe on its own.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYTHONUNBUFFERED": "1"}
    # One stream for both, so that the order in which lines were written is kept.
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, timeout=600)
    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    for method in ("softmax", "gfsa"):
        finished = next(i for i, line in enumerate(lines)
                        if re.match(rf"\[\d/2\] {method} seed 0 \(trained\)", line))
        own = [line for line in lines[:finished] if line.startswith(f"{method} seed 0: ")]
        assert own[0] == f"{method} seed 0: 3 steps, 1 epoch(s)", result.stdout
        assert f"{method} seed 0: step 3/3 (100%), evaluating on the validation split (16 items)" \
            in own, result.stdout
        assert any("validation accuracy" in line for line in own), result.stdout
        assert own[-2] == (f"{method} seed 0: testing the best checkpoint (step 3) on the test "
                           "split (16 items)"), result.stdout
        assert re.fullmatch(rf"{method} seed 0: test accuracy \d\.\d{{4}} \(evaluated in \d+ s\)",
                            own[-1]), result.stdout
    assert "\r" not in result.stdout
