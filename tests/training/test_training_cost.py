"""A run's train time, step times and peak memory over every stretch of it (start and resumes)."""

from __future__ import annotations

import json
import random
import statistics

from filterformer.training import Trainer, load_checkpoint
from filterformer.training.compare import compare, load_compare_config
from filterformer.training.training_cost import MIXED_MEASURES, TrainingCost

from .helpers import majority_task, tiny_config

MEASURED = ("train_time_s", "step_time_s", "peak_memory_bytes", "memory_measure")


def _saved_cost(run_dir) -> TrainingCost:
    return TrainingCost.from_state(load_checkpoint(run_dir / "checkpoints" / "last.pt")["cost"])


def test_a_resumed_run_counts_every_stretch(tmp_path):
    task = majority_task(num_train=48, num_eval=16)
    total, stop = random.randint(4, 6), random.randint(1, 3)
    first = Trainer(tiny_config(tmp_path, max_steps=total, stop_after=stop), task=task).fit()
    before = _saved_cost(tmp_path)
    assert len(before.step_times_s) == stop and before.stretches == 1
    assert (first.train_time_s, first.step_time_s) == (before.train_time_s, before.step_time_s)
    result = Trainer(tiny_config(tmp_path, max_steps=total), task=task, resume=True).fit()
    after = _saved_cost(tmp_path)
    # Every step of both stretches is timed once, the first stretch's as it was.
    assert after.stretches == 2 and len(after.step_times_s) == total
    assert after.step_times_s[:stop] == before.step_times_s
    assert result.step_time_s == statistics.median(after.step_times_s)
    assert result.train_time_s == after.train_time_s > before.train_time_s
    assert result.train_time_s - before.train_time_s >= sum(after.step_times_s[stop:])
    assert result.peak_memory_bytes == after.peak_memory_bytes >= before.peak_memory_bytes
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert all(summary[key] == getattr(result, key) for key in MEASURED)


def test_resuming_a_finished_run_keeps_its_figures(tmp_path):
    task = majority_task(num_train=48, num_eval=16)
    config = tiny_config(tmp_path, max_steps=random.randint(2, 4))
    Trainer(config, task=task).fit()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["step_time_s"] is not None and summary["train_time_s"] > 0
    again = Trainer(config, task=task, resume=True).fit()
    assert again.completed and again.test == summary["test"]
    assert {key: getattr(again, key) for key in MEASURED} == {key: summary[key]
                                                              for key in MEASURED}
    rewritten = json.loads((tmp_path / "summary.json").read_text())
    assert {key: rewritten[key] for key in MEASURED} == {key: summary[key] for key in MEASURED}


def test_a_comparison_rerun_after_a_kill_before_the_summary_keeps_the_figures(tmp_path):
    task = majority_task(num_train=48, num_eval=16)
    config = load_compare_config(
        None, ["task=majority", "model.dim=16", "model.depth=2", "model.num_heads=2",
               "batch_size=16", f"max_steps={random.randint(2, 4)}", "progress=false",
               f"output_dir={tmp_path}"],
        methods=["softmax"], seeds=[0], diagnostics_batches=1, cost_rounds=0)
    first = compare(config, task=task, echo=lambda line: None)
    # Killed after the last checkpoint, before summary.json: the rerun resumes with nothing to
    # train.
    (tmp_path / "runs" / "softmax" / "seed-0" / "summary.json").unlink()
    lines = []
    again = compare(config, task=task, echo=lines.append)
    assert "(resumed)" in lines[0]
    keys = ("train_time_s", "train_step_time_s", "step_time_s", "peak_memory_bytes")
    assert {k: again.runs[0][k] for k in keys} == {k: first.runs[0][k] for k in keys}
    assert first.runs[0]["train_step_time_s"] is not None
    row, first_row = again.summary[0], first.summary[0]
    assert row["train_time_s_mean"] == first_row["train_time_s_mean"]
    assert row["step_time_s_median"] == first_row["step_time_s_median"]


def test_figures_unknown_for_a_stretch_stay_unknown():
    steps = [random.random() for _ in range(3)]
    known = TrainingCost().extended(1.5, steps, 100, "rss")
    assert (known.train_time_s, known.step_times_s, known.peak_memory_bytes) == (
        1.5, tuple(steps), 100)
    both = known.extended(2.0, [0.5], 300, "rss")
    assert (both.train_time_s, both.step_times_s, both.peak_memory_bytes) == (
        3.5, (*steps, 0.5), 300)
    # A checkpoint without figures: nothing added to it becomes a number.
    old = TrainingCost.from_state(None).extended(2.0, [0.5], 300, "rss")
    assert (old.train_time_s, old.step_time_s, old.peak_memory_bytes) == (None, None, None)
    # Peaks measured in different ways have no maximum.
    mixed = known.extended(2.0, [0.5], 300, "cuda")
    assert mixed.peak_memory_bytes is None and mixed.memory_measure == MIXED_MEASURES
    assert TrainingCost.from_state(both.to_state()) == both
