"""The training loop: exact resume, model selection on validation, logs, optimiser set-up."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounterWithBackend

from filterformer.data.datasets import LanguageModelingDataset, collate_sequences
from filterformer.data.task import TaskData
from filterformer.training import (
    Trainer,
    compilation,
    load_checkpoint,
    load_model_state,
    save_checkpoint,
)
from filterformer.training.batches import make_loader, training_batches
from filterformer.training.metrics_log import CSV_COLUMNS, read_metrics

from .helpers import majority_task, tiny_config

DROPOUT_MODEL = {"dim": 16, "depth": 2, "num_heads": 2, "dropout": 0.1, "attn_dropout": 0.1}


def _weights(run_dir) -> dict[str, torch.Tensor]:
    return load_checkpoint(run_dir / "checkpoints" / "last.pt")["model"]


def _same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# 96 items in batches of 16: 6 steps per epoch, 18 in all. Stops mid-epoch, right after a
# validation at an epoch's end, and twice in a row.
@pytest.mark.parametrize(("method", "stops"), [
    ("gfsa+neutreno", [7]),
    ("gfsa+neutreno", [6]),
    ("samsa_soft", [4, 5]),  # SAMSA draws Gumbel noise from the global generator every step
])
def test_interrupted_and_resumed_run_equals_an_uninterrupted_one(tmp_path, method, stops):
    task = majority_task()
    settings = dict(epochs=3, method=method, model=DROPOUT_MODEL, log_every=4)
    whole = Trainer(tiny_config(tmp_path / "whole", **settings), task=task).fit()
    for stop in stops:
        resume = (tmp_path / "parts" / "checkpoints" / "last.pt").exists()
        part = Trainer(tiny_config(tmp_path / "parts", stop_after=stop, **settings), task=task,
                       resume=resume).fit()
        assert not part.completed
        assert (tmp_path / "parts" / "summary.json").exists() is False
    # Each session ran exactly its stop_after steps.
    assert part.steps == sum(stops)
    assert not _same_weights(_weights(tmp_path / "whole"), _weights(tmp_path / "parts"))
    rest = Trainer(tiny_config(tmp_path / "parts", **settings), task=task, resume=True).fit()
    assert rest.completed and rest.steps == whole.steps == 18
    assert _same_weights(_weights(tmp_path / "whole"), _weights(tmp_path / "parts"))
    assert rest.test == whole.test
    # The logs read as if the run had never stopped.
    assert read_metrics(tmp_path / "parts" / "metrics.jsonl") == read_metrics(
        tmp_path / "whole" / "metrics.jsonl")


def test_resume_refuses_another_configuration(tmp_path):
    task = majority_task()
    Trainer(tiny_config(tmp_path, stop_after=3), task=task).fit()
    changed = tiny_config(tmp_path, optimizer={"lr": 0.01})
    with pytest.raises(ValueError, match=r"last.pt was saved with another configuration: "
                                         r"optimizer.lr: checkpoint 0.001, now 0.01"):
        Trainer(changed, task=task, resume=True)


def test_fresh_run_refuses_to_overwrite_and_resume_needs_a_checkpoint(tmp_path):
    task = majority_task()
    with pytest.raises(ValueError, match=r"cannot resume: .*last.pt does not exist"):
        Trainer(tiny_config(tmp_path / "new"), task=task, resume=True)
    Trainer(tiny_config(tmp_path / "old", stop_after=2), task=task).fit()
    with pytest.raises(ValueError, match=r"already holds a run .* pass resume"):
        Trainer(tiny_config(tmp_path / "old"), task=task)


def test_corrupt_checkpoint_stops_resume_with_its_name(tmp_path):
    task = majority_task()
    Trainer(tiny_config(tmp_path, stop_after=2), task=task).fit()
    last = tmp_path / "checkpoints" / "last.pt"
    last.write_bytes(last.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"checkpoint .*last.pt is corrupt"):
        Trainer(tiny_config(tmp_path), task=task, resume=True)


def _killed_while_writing(path) -> None:
    """A forked process starts :func:`save_checkpoint` on ``path`` and dies half-way through the
    write (``os._exit``: no clean-up runs, as under SIGKILL or a power cut)."""
    pid = os.fork()
    if pid == 0:  # the child: write some bytes, then vanish
        def half_then_die(state, file):
            file.write(os.urandom(64))
            file.flush()
            os._exit(9)

        torch.save = half_then_die
        save_checkpoint(path, {"step": -1})
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 9


@pytest.mark.parametrize("resume", [True, False])
def test_a_start_or_resume_removes_the_temporary_files_of_killed_checkpoint_writes(tmp_path,
                                                                                   resume):
    task = majority_task()
    run_dir, checkpoints = tmp_path / "run", tmp_path / "run" / "checkpoints"
    if resume:
        Trainer(tiny_config(run_dir, max_steps=3, stop_after=2), task=task).fit()
    for name in ("last.pt", "last.pt", "best.pt"):
        _killed_while_writing(checkpoints / name)
    leftovers = sorted(checkpoints.glob(".*.pt.*.tmp"))
    assert len(leftovers) == 3
    # What is not a leftover of this run's checkpoint writes stays, byte for byte.
    random_part = os.urandom(4).hex()
    unrelated = [checkpoints / "notes.txt", checkpoints / ".last.pt.tmp",
                 checkpoints / f".other.pt.{random_part}.tmp",
                 checkpoints / f"last.pt.{random_part}", run_dir / f".last.pt.{random_part}.tmp"]
    contents = {path: os.urandom(8) for path in unrelated}
    for path, content in contents.items():
        path.write_bytes(content)
    Trainer(tiny_config(run_dir, max_steps=3), task=task, resume=resume).fit()
    assert not any(path.exists() for path in leftovers)
    assert {path: path.read_bytes() for path in unrelated} == contents
    assert load_checkpoint(checkpoints / "last.pt")["step"] == 3


@torch.no_grad()
def _accuracy(model, dataset) -> float:
    """Independent evaluation: one item at a time, no padding."""
    model.eval()
    correct = 0
    for index in range(len(dataset)):
        item = dataset[index]
        logits = model(item["input_ids"][None]).logits
        correct += int(logits.argmax(-1).item() == item["labels"].item())
    return correct / len(dataset)


def test_best_validation_checkpoint_is_selected_and_tested(tmp_path):
    task = majority_task(num_train=128, num_eval=40)
    config = tiny_config(tmp_path, epochs=5, optimizer={"lr": 3e-3})
    trainer = Trainer(config, task=task)
    result = trainer.fit()
    records = read_metrics(tmp_path / "metrics.jsonl")
    validations = [r for r in records if r["split"] == "validation"]
    assert [r["step"] for r in validations] == [8, 16, 24, 32, 40]  # once per epoch
    # A tie in accuracy goes to the lower loss, a full tie to the first, as in the run.
    best = max(validations, key=lambda r: (r["accuracy"], -r["loss"]))
    assert result.best_step == best["step"]
    assert result.best_validation["accuracy"] == best["accuracy"]
    saved = load_checkpoint(tmp_path / "checkpoints" / "best.pt")
    assert saved["step"] == best["step"]
    # The test record is the best checkpoint's accuracy on the test split, nothing else.
    assert _accuracy(trainer.model, task.validation) == pytest.approx(best["accuracy"])
    assert [r["split"] for r in records].count("test") == 1
    assert records[-1]["accuracy"] == pytest.approx(_accuracy(trainer.model, task.test))
    assert result.test["accuracy"] == records[-1]["accuracy"]


def test_training_learns_the_task(tmp_path):
    task = majority_task(num_train=256, num_eval=64)
    result = Trainer(tiny_config(tmp_path, epochs=8, optimizer={"lr": 3e-3}), task=task).fit()
    assert result.test["accuracy"] >= 0.75  # chance is about 1/3


def test_metrics_csv_mirrors_the_json_lines(tmp_path):
    Trainer(tiny_config(tmp_path, log_every=2), task=majority_task()).fit()
    records = read_metrics(tmp_path / "metrics.jsonl")
    with open(tmp_path / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert len(rows) == len(records)
    for row, record in zip(rows, records, strict=True):
        for column in CSV_COLUMNS:
            value = record.get(column)
            assert row[column] == ("" if value is None else str(value))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert records[-1]["split"] == "test"
    assert summary["test"] == {k: records[-1][k] for k in ("loss", "accuracy")}


def test_weight_decay_skips_norms_biases_and_filter_coefficients(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, method="gfsa", optimizer={"weight_decay": 0.3}),
                      task=majority_task())
    decay_of = {id(p): g["weight_decay"] for g in trainer.optimizer.param_groups
                for p in g["params"]}
    for name, param in trainer.model.named_parameters():
        exempt = (param.ndim <= 1 or ".norm" in name or "embed" in name
                  or name.rsplit(".", 1)[-1] in ("w0", "w1", "wK"))
        assert decay_of[id(param)] == (0.0 if exempt else 0.3), name


def test_gradient_clipping_bounds_the_update(tmp_path):
    """With eps large against a clipped gradient, AdamW's update shrinks to nothing."""
    task = majority_task()
    changes = {}
    for clip in (None, 1e-12):
        config = tiny_config(tmp_path / str(clip), max_steps=1, grad_clip=clip,
                             optimizer={"eps": 0.5, "weight_decay": 0.0},
                             schedule={"warmup_steps": 0})
        trainer = Trainer(config, task=task)
        before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        trainer.fit()
        after = _weights(tmp_path / str(clip))
        changes[clip] = max((after[k] - before[k]).abs().max().item() for k in before)
    assert changes[None] > 1e-5
    assert changes[1e-12] < 1e-12


def test_mixed_precision_on_cpu_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"precision 'bf16' .* needs a GPU; valid on CPU: auto, "
                                         r"fp32"):
        Trainer(tiny_config(tmp_path, precision="bf16", device="cpu"), task=majority_task())


def test_language_modelling_reports_perplexity(tmp_path):
    generator = torch.Generator().manual_seed(1)
    # A stream that repeats a short random pattern: learnable, so perplexity must fall.
    pattern = torch.randint(1, 12, (7,), generator=generator)
    stream = pattern.repeat(60)
    task = TaskData(
        name="pattern", kind="language_modeling",
        train=LanguageModelingDataset(stream[:300], 10),
        validation=LanguageModelingDataset(stream[300:360], 10),
        test=LanguageModelingDataset(stream[360:], 10),
        collate=collate_sequences, num_classes=None, vocab_size=12, input_dim=None, max_len=10,
    )
    result = Trainer(tiny_config(tmp_path, batch_size=6, epochs=30, optimizer={"lr": 1e-2}),
                     task=task).fit()
    assert result.selection_metric == "perplexity"
    assert result.test["perplexity"] == pytest.approx(math.exp(result.test["loss"]))
    records = read_metrics(tmp_path / "metrics.jsonl")
    validations = [r for r in records if r["split"] == "validation"]
    assert result.best_validation["perplexity"] == min(r["perplexity"] for r in validations)
    # A uniform guess over the vocabulary gives 12.
    assert validations[-1]["perplexity"] < 2.0, validations[-1]


def test_a_compiled_run_trains_in_one_graph_and_resumes_eagerly(tmp_path, monkeypatch):
    """compile=true: one graph for every batch (the majority task's lengths vary from 6 to 16),
    checkpoints that load into an eager model, and a resume without compile (allowed: compile
    is no part of the run's identity) that ends where an eager run ends, up to round-off.

    Backend: aot_eager behind TorchDynamo's compile counter (inductor: tests/cli/test_train.py).
    """
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    monkeypatch.setattr(compilation, "BACKEND", counter)
    task = majority_task()
    settings = dict(epochs=1, batch_size=8)
    first = training_batches(task.train, 8, epoch=0, seed=0)[:4]
    lengths = {batch["input_ids"].shape[1] for batch in make_loader(task.train, first,
                                                                     task.collate)}
    assert len(lengths) > 1  # the compiled steps meet batches of several lengths
    eager = Trainer(tiny_config(tmp_path / "eager", **settings), task=task)
    eager.fit()
    parts = tiny_config(tmp_path / "parts", **settings)
    compiled = Trainer(dataclasses.replace(parts, compile=True, stop_after=4), task=task)
    assert not compiled.fit().completed
    assert counter.frame_count == 1  # one graph for all of them
    saved = load_checkpoint(tmp_path / "parts" / "checkpoints" / "last.pt")["model"]
    assert saved.keys() == eager.model.state_dict().keys()  # no _orig_mod. prefix
    load_model_state(eager.model, saved, "last.pt")
    rest = Trainer(parts, task=task, resume=True).fit()
    assert rest.completed and rest.steps == 12
    expected, resumed = _weights(tmp_path / "eager"), _weights(tmp_path / "parts")
    for name, weight in expected.items():
        torch.testing.assert_close(resumed[name], weight, rtol=0, atol=1e-5, msg=name)
    torch._dynamo.reset()
