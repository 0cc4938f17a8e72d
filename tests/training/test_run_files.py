"""Run files written whole or not at all; a damaged one named, with how to recover; a
``metrics.jsonl`` cut short in its last line resumed as if whole."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from filterformer.training import Trainer
from filterformer.training.metrics_log import read_metrics
from filterformer.training.run_files import (
    CorruptRunFileError,
    read_json,
    write_json,
    write_text,
)

from .helpers import majority_task, tiny_config


def _random_record(rng: np.random.Generator) -> dict:
    return {"step": int(rng.integers(1, 10**6)), "values": rng.normal(size=5).tolist()}


def test_a_write_that_fails_halfway_leaves_the_previous_file_and_no_temporary(tmp_path):
    rng = np.random.default_rng()
    path = tmp_path / "summary.json"
    before = _random_record(rng)
    write_json(path, before)
    # A lone surrogate cannot be encoded: the write fails after the text before it went out.
    with pytest.raises(UnicodeEncodeError):
        write_text(path, "x" * int(rng.integers(10_000, 100_000)) + "\udc80")
    assert read_json(path, recovery="-") == before
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_number_is_refused_naming_the_file(tmp_path, value):
    path = tmp_path / "cost.json"
    with pytest.raises(ValueError, match=rf"{path} was not written: .*\(NaN or infinity\)"):
        write_json(path, {"cost": {"step_time_s": [1.0, value]}})
    assert not path.exists()


def test_a_damaged_file_is_named_with_its_recovery(tmp_path):
    path = tmp_path / "summary.json"
    write_json(path, _random_record(np.random.default_rng()))
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(CorruptRunFileError, match=rf"^{path} is corrupt \(JSONDecodeError: .*\); "
                                                  r"delete it$") as damaged:
        read_json(path, recovery="delete it")
    assert damaged.value.path == path
    path.write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match=rf"{path} is corrupt \(it holds a list, not a dict\)"):
        read_json(path, recovery="delete it")


def test_a_resumed_run_drops_a_metrics_line_cut_short_and_reads_as_if_never_stopped(tmp_path):
    rng = np.random.default_rng()
    task = majority_task(seed=int(rng.integers(1000)))
    settings = dict(epochs=3, log_every=int(rng.integers(1, 4)))
    whole = Trainer(tiny_config(tmp_path / "whole", **settings), task=task).fit()
    stopped = Trainer(tiny_config(tmp_path / "parts", stop_after=int(rng.integers(2, 16)),
                                  **settings), task=task).fit()
    assert not stopped.completed
    # Killed while appending a record: half of a line, without its newline.
    metrics = tmp_path / "parts" / "metrics.jsonl"
    line = json.dumps({"step": stopped.steps + 1, "epoch": 9, "split": "train", "loss": 1.5})
    with open(metrics, "a") as f:
        f.write(line[: int(rng.integers(1, len(line) - 1))])
    assert read_metrics(metrics) == [json.loads(x) for x in metrics.read_text().splitlines()[:-1]]
    rest = Trainer(tiny_config(tmp_path / "parts", **settings), task=task, resume=True).fit()
    assert rest.completed and rest.test == whole.test
    assert metrics.read_text().endswith("}\n")
    assert read_metrics(metrics) == read_metrics(tmp_path / "whole" / "metrics.jsonl")


def test_a_damaged_metrics_line_before_the_last_is_refused_naming_file_and_line(tmp_path):
    task = majority_task()
    Trainer(tiny_config(tmp_path, stop_after=int(np.random.default_rng().integers(4, 12)),
                        log_every=1), task=task).fit()
    metrics = tmp_path / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    broken = int(np.random.default_rng().integers(len(lines) - 1))
    lines[broken] = lines[broken][:10] + "\n"
    metrics.write_text("".join(lines))
    with pytest.raises(CorruptRunFileError, match=rf"{metrics} is corrupt \(line {broken + 1}: "
                                                  r".*\); remove or repair that line"):
        Trainer(tiny_config(tmp_path, log_every=1), task=task, resume=True)
