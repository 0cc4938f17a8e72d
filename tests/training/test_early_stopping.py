"""Early stopping (``patience``): where a run stops, the learning rates it trains with, exact
resume, the records it leaves, and the values ``patience`` takes."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

import pytest
import torch

from filterformer.training import Trainer, load_checkpoint, load_config
from filterformer.training.compare import compare, load_compare_config
from filterformer.training.metrics_log import read_metrics

from .helpers import majority_task, tiny_config

# 96 items in batches of 16: 6 steps per epoch, 24 in all; a validation every 2 steps, 12 in all.
EPOCHS, TOTAL_STEPS, EVAL_EVERY = 4, 24, 2
VALIDATIONS = TOTAL_STEPS // EVAL_EVERY


@dataclass
class Script:
    """Scripted validation metrics per validation step, and where ``patience`` stops them.

    Attributes:
        metrics: per validation step, its metrics.
        best_step: the step of the last validation that beats the best before it.
        stop_step: the step of the ``patience``-th validation in a row after it.
    """

    metrics: dict[int, dict[str, float]]
    best_step: int
    stop_step: int


def _script(rng: random.Random, patience: int) -> Script:
    """Validations that beat the best so far and validations that do not (a lower accuracy,
    or the same accuracy with a higher loss: a tie in accuracy goes to the lower loss): first
    stretches of fewer than ``patience`` validations without improvement, each ended by one
    that improves (at least one such stretch when ``patience`` > 1), then only validations
    without improvement, the ``patience``-th of them before the budget's last."""
    improves = [True]
    if patience > 1:  # a stretch without improvement that patience outlasts
        improves += [False] * rng.randint(1, patience - 1) + [True]
    while True:
        stretch = [False] * rng.randrange(patience) + [True]
        if len(improves) + len(stretch) + patience >= VALIDATIONS:
            break
        improves += stretch
    best_index = len(improves) - 1
    improves += [False] * (VALIDATIONS - len(improves))
    metrics, best = {}, {"accuracy": rng.uniform(0.2, 0.4), "loss": rng.uniform(0.5, 1.0)}
    for index, improving in enumerate(improves):
        if improving:
            best = {"accuracy": best["accuracy"] + rng.uniform(0.01, 0.05),
                    "loss": rng.uniform(0.5, 1.0)}
            values = best
        elif rng.random() < 0.5:
            values = {"accuracy": best["accuracy"], "loss": best["loss"] + rng.uniform(0.01, 1)}
        else:
            values = {"accuracy": best["accuracy"] - rng.uniform(0.001, 0.2),
                      "loss": rng.uniform(0.1, 1.0)}
        metrics[(index + 1) * EVAL_EVERY] = dict(values)
    return Script(metrics, (best_index + 1) * EVAL_EVERY,
                  (best_index + 1 + patience) * EVAL_EVERY)


def _script_validation(monkeypatch, script: Script) -> None:
    """Validation reads its metrics from ``script`` at each step; the test split is evaluated."""
    evaluate = Trainer._evaluate

    def scripted(self, split):
        return dict(script.metrics[self.step]) if split == "validation" else evaluate(self, split)

    monkeypatch.setattr(Trainer, "_evaluate", scripted)


def _draw(low: int, high: int) -> tuple[int, int, Script]:
    """A fresh seed, a patience from ``low`` to ``high`` and its script."""
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    patience = rng.randint(low, high)
    return seed, patience, _script(rng, patience)


def _config(run_dir, **overrides):
    return tiny_config(run_dir, epochs=EPOCHS, eval_every=EVAL_EVERY, seed=7, **overrides)


def test_patience_stops_after_exactly_that_many_validations_without_improvement(
        tmp_path, monkeypatch):
    seed, patience, script = _draw(1, 4)
    _script_validation(monkeypatch, script)
    task = majority_task()
    trainer = Trainer(_config(tmp_path / "early", patience=patience), task=task)
    result = trainer.fit()
    stop, best_step = script.stop_step, script.best_step
    assert (result.steps, result.best_step) == (stop, best_step), f"seed {seed}"
    assert result.stopped_early and result.completed and stop < TOTAL_STEPS
    assert result.best_validation == script.metrics[best_step]
    records = read_metrics(tmp_path / "early" / "metrics.jsonl")
    validations = [r["step"] for r in records if r["split"] == "validation"]
    assert validations == list(range(EVAL_EVERY, stop + 1, EVAL_EVERY))
    # The loss of the steps since the last training record is recorded at the stopping step.
    assert [r["step"] for r in records if r["split"] == "train"][-1] == stop
    summary = json.loads((tmp_path / "early" / "summary.json").read_text())
    assert (summary["stopped_early"], summary["steps"], summary["best_step"]) == (
        True, stop, best_step)
    # The best checkpoint is what was tested, not the weights at the stopping step.
    best = load_checkpoint(tmp_path / "early" / "checkpoints" / "best.pt")
    assert best["step"] == best_step
    tested = {k: v.detach().cpu() for k, v in trainer.model.state_dict().items()}
    assert all(torch.equal(tested[k], best["model"][k]) for k in best["model"])
    assert [r["split"] for r in records][-1] == "test"
    assert records[-1]["accuracy"] == summary["test"]["accuracy"] == result.test["accuracy"]
    # Without patience the same validations train the whole budget.
    whole = Trainer(_config(tmp_path / "whole"), task=task).fit()
    assert (whole.steps, whole.best_step, whole.stopped_early) == (TOTAL_STEPS, best_step, False)
    summary = json.loads((tmp_path / "whole" / "summary.json").read_text())
    assert (summary["stopped_early"], summary["steps"]) == (False, TOTAL_STEPS)


def test_each_step_taken_has_the_learning_rate_of_the_whole_budgets_schedule(
        tmp_path, monkeypatch):
    seed, patience, script = _draw(1, 3)
    _script_validation(monkeypatch, script)
    task = majority_task()
    settings = {"log_every": 1, "schedule": {"warmup_ratio": 0.2, "decay": "cosine"}}
    early = Trainer(_config(tmp_path / "early", patience=patience, **settings), task=task).fit()
    Trainer(_config(tmp_path / "whole", **settings), task=task).fit()

    def rates(run_dir):
        return [(r["step"], r["lr"]) for r in read_metrics(run_dir / "metrics.jsonl")
                if r["split"] == "train"]

    taken, budget = rates(tmp_path / "early"), rates(tmp_path / "whole")
    assert early.stopped_early and len(taken) == early.steps < TOTAL_STEPS, seed
    assert len(budget) == TOTAL_STEPS
    # Exactly the same rates, step by step: the schedule's horizon is the whole budget.
    assert taken == budget[:early.steps], seed

    def losses(run_dir):
        return [r["loss"] for r in read_metrics(run_dir / "metrics.jsonl") if r["split"] == "train"]

    # And so the same steps: the run is the whole budget's run cut short.
    assert losses(tmp_path / "early") == losses(tmp_path / "whole")[:early.steps]


def test_a_resumed_run_stops_at_the_same_step_with_the_same_best(tmp_path, monkeypatch):
    # Interrupted right after the first validation without improvement, between validations:
    # the count of validations without improvement must come back from the checkpoint.
    seed, patience, script = _draw(2, 4)
    _script_validation(monkeypatch, script)
    task = majority_task()
    chunk = script.best_step + EVAL_EVERY + 1
    whole = Trainer(_config(tmp_path / "whole", patience=patience), task=task).fit()
    assert whole.stopped_early, seed
    stopped = Trainer(_config(tmp_path / "parts", patience=patience, stop_after=chunk),
                      task=task).fit()
    assert (stopped.completed, stopped.stopped_early, stopped.steps) == (False, False, chunk)
    part = Trainer(_config(tmp_path / "parts", patience=patience), task=task, resume=True).fit()
    assert (part.steps, part.best_step, part.best_validation, part.stopped_early) == (
        whole.steps, whole.best_step, whole.best_validation, True), seed
    assert part.test == whole.test
    assert read_metrics(tmp_path / "parts" / "metrics.jsonl") == read_metrics(
        tmp_path / "whole" / "metrics.jsonl")
    # Resuming the finished run trains nothing and reports the same run.
    again = Trainer(_config(tmp_path / "parts", patience=patience), task=task, resume=True).fit()
    assert (again.steps, again.best_step, again.stopped_early, again.test) == (
        whole.steps, whole.best_step, True, whole.test)


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "3"])
def test_patience_takes_a_positive_integer_or_null(tmp_path, value):
    with pytest.raises(ValueError, match=r"^patience must be a positive integer \(validations "
                                         r"in a row without improvement that stop training\) "
                                         rf"or None; got {value!r}"):
        tiny_config(tmp_path, patience=value)


@pytest.mark.parametrize("text", ["0", "-1", "true", "1.5"])
def test_a_bad_patience_on_the_command_line_is_named(text):
    with pytest.raises(ValueError, match=r"^patience must be a positive integer"):
        load_config(None, [f"patience={text}"])


def test_patience_is_set_by_a_file_an_override_and_a_compared_method(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("task: majority\npatience: 4\n")
    assert load_config(path).patience == 4
    assert load_config(path, ["patience=2"]).patience == 2
    assert load_config(path, ["patience=null"]).patience is None
    assert load_config(None).patience is None
    config = load_compare_config(
        None, ["task=majority", "patience=3"], seeds=[0],
        methods=["softmax", {"name": "patient", "method": "gfsa", "set": {"patience": 5}}])
    assert config.plan("softmax", 0).config.patience == 3
    assert config.plan("patient", 0).config.patience == 5
    with pytest.raises(ValueError, match=r"method 'patient' \(its set\): patience must be a "
                                         r"positive integer"):
        load_compare_config(None, ["task=majority"], methods=[
            {"name": "patient", "method": "gfsa", "set": {"patience": 0}}])


def test_compare_records_where_each_run_stopped(tmp_path, monkeypatch):
    seed, patience, script = _draw(1, 3)
    _script_validation(monkeypatch, script)
    config = load_compare_config(
        None, ["task=majority", "model.dim=16", "model.depth=2", "model.num_heads=2",
               "batch_size=16", f"epochs={EPOCHS}", f"eval_every={EVAL_EVERY}",
               f"patience={patience}", "progress=false", f"output_dir={tmp_path}"],
        methods=["softmax", {"name": "whole", "method": "softmax", "set": {"patience": None}}],
        seeds=[0], diagnostics_batches=1, cost_rounds=0)
    lines = []
    compare(config, task=majority_task(), echo=lines.append)
    stop = script.stop_step
    runs = {run["method"]: run for run in
            json.loads((tmp_path / "results.json").read_text())["runs"]}
    assert (runs["softmax"]["stopped_early"], runs["softmax"]["steps"]) == (True, stop), seed
    assert runs["softmax"]["best_step"] == script.best_step
    assert (runs["whole"]["stopped_early"], runs["whole"]["steps"]) == (False, TOTAL_STEPS)
    outcomes = {name: [line for line in lines if f"{name} seed 0 (trained)" in line]
                for name in ("softmax", "whole")}
    assert f"stopped early at step {stop}," in outcomes["softmax"][0]
    assert "stopped early" not in outcomes["whole"][0]
    report = (tmp_path / "report.html").read_text()
    assert f"({TOTAL_STEPS} steps; fewer where {patience} validations in a row" in report
