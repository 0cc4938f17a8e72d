"""A comparison's runs in worker processes: the same weights and results as in one process, and
a failed run named, with the finished ones kept."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from filterformer.training import load_checkpoint
from filterformer.training.compare import compare, load_compare_config
from filterformer.training.compare.comparison_results import ComparisonResults
from filterformer.training.compare.execution import RunFailedError, available_cpus, default_jobs

from .helpers import majority_task

#: Per-run fields that measure the machine (time, memory) or name the directory, not the run.
MACHINE_FIELDS = ("run_dir", "step_time_s", "train_step_time_s", "train_time_s",
                  "peak_memory_bytes")


def tiny_comparison(out: Path, **options):
    settings = ["task=majority", "model.dim=16", "model.depth=2", "model.num_heads=2",
                "batch_size=16", "max_steps=4", "eval_every=2", "optimizer.lr=1e-2",
                "progress=false", f"output_dir={out}"]
    options = {"methods": ["softmax", "gfsa"], "seeds": [0, 1], "diagnostics_batches": 1,
               "cost_rounds": 0, **options}
    return load_compare_config(None, settings, **options)


def run_records(results: ComparisonResults) -> list[dict]:
    return [{k: v for k, v in run.items() if k not in MACHINE_FIELDS} for run in results.runs]


@pytest.mark.slow
def test_two_jobs_train_the_same_runs_as_one(tmp_path):
    # A fresh task each time: the property holds for any data.
    task = majority_task(num_train=64, num_eval=32, seed=int(np.random.default_rng().integers(99)))
    serial = compare(tiny_comparison(tmp_path / "one"), task=task, echo=lambda line: None, jobs=1)
    lines: list[str] = []
    parallel = compare(tiny_comparison(tmp_path / "two"), task=task, echo=lines.append, jobs=2)
    records = run_records(serial)
    assert records == run_records(parallel)
    assert [(r["method"], r["seed"]) for r in records] == \
        [("softmax", 0), ("softmax", 1), ("gfsa", 0), ("gfsa", 1)]
    for run in records:
        for name in ("last.pt", "best.pt"):
            one, two = (load_checkpoint(tmp_path / out / "runs" / run["method"] /
                                        f"seed-{run['seed']}" / "checkpoints" / name)["model"]
                        for out in ("one", "two"))
            assert one.keys() == two.keys()
            assert all(torch.equal(one[k], two[k]) for k in one), (run["method"], name)
    # Lines as runs finish: the count, and an estimate of the time left until the last.
    assert [line[:5] for line in lines] == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"]
    assert all(re.search(r"\(trained\): test accuracy \d\.\d{4}, [\d.]+ s; \d runs? left, "
                         r"about \d+ s$", line) for line in lines[:3]), lines
    assert lines[3].endswith(" s") and "left" not in lines[3]


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])
def test_a_failed_run_is_named_and_the_finished_ones_are_kept(tmp_path, jobs):
    task = majority_task(num_train=48, num_eval=16)
    config = tiny_comparison(tmp_path)
    # A stopped run whose checkpoint was damaged: resuming it fails.
    broken = Path(config.plan("gfsa", 1).config.output_dir) / "checkpoints" / "last.pt"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not a checkpoint")
    with pytest.raises(RunFailedError) as failed:
        compare(config, task=task, echo=lambda line: None, jobs=jobs)
    message = str(failed.value)
    assert re.search(r"run gfsa seed 1 failed \(.*gfsa/seed-1\): ValueError: checkpoint .*"
                     r"last.pt is corrupt", message), message
    assert "finished runs are kept" in message
    assert [name for name, _, _ in failed.value.failures] == ["gfsa seed 1"]
    # The runs that came before it finished and are reused by the next comparison.
    for seed in (0, 1):
        assert (Path(config.plan("softmax", seed).config.output_dir) / "summary.json").is_file()
    broken.unlink()
    lines: list[str] = []
    compare(config, task=task, echo=lines.append, jobs=1)
    assert sum("(reused)" in line for line in lines) >= 2
    assert any(line.startswith("[4/4] gfsa seed 1 (trained)") for line in lines), lines
    summaries = [json.loads((Path(config.plan(m, s).config.output_dir) / "summary.json")
                            .read_text()) for m in config.methods for s in config.seeds]
    assert all(summary["completed"] for summary in summaries)


def test_an_unpicklable_task_is_refused_for_workers(tmp_path):
    task = majority_task(num_train=32, num_eval=16)
    task.collate = lambda items: items  # a lambda cannot be sent to another process
    with pytest.raises(ValueError, match=r"jobs=2 sends the task to worker processes, but it "
                                         r"cannot be pickled .*use jobs=1"):
        compare(tiny_comparison(tmp_path), task=task, echo=lambda line: None, jobs=2)


@pytest.mark.parametrize("jobs", [0, -1, 1.5, True])
def test_jobs_must_be_a_positive_integer(tmp_path, jobs):
    with pytest.raises(ValueError, match=r"jobs must be a positive integer \(runs trained at "
                                         r"once\) or None"):
        compare(tiny_comparison(tmp_path), task=majority_task(32, 16), echo=lambda line: None,
                jobs=jobs)


def test_default_jobs_fill_the_cores_with_threads():
    cpus = available_cpus()
    for threads in range(1, cpus + 1):
        jobs = default_jobs("cpu", threads)
        assert jobs >= 1 and jobs * threads <= cpus < (jobs + 1) * threads
    assert default_jobs("cpu", cpus + 1) == 1


def test_a_task_whose_tensors_share_one_storage_is_sent_to_workers_once():
    from filterformer.training.compare.execution import task_from_bytes, task_to_bytes

    buffer = torch.randint(0, 255, (int(torch.randint(20_000, 40_000, ())),), dtype=torch.uint8)
    starts = torch.randint(0, buffer.numel() - 50, (500,)).tolist()
    views = [buffer[s : s + 50] for s in starts]  # as ListOps' sequences: views of one buffer
    data = task_to_bytes({"sequences": views, "labels": torch.arange(500)})
    # One copy of the buffer and small records per view, not one buffer per view.
    assert len(data) < buffer.numel() + 200 * len(views)
    loaded = task_from_bytes(data)
    assert all(torch.equal(a, b) for a, b in zip(loaded["sequences"], views, strict=True))
    assert torch.equal(loaded["labels"], torch.arange(500))
