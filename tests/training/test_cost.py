"""The paired time-per-step measurement of a comparison: the run records' times, a real tiny
run (the rounds themselves: ``tests/test_timing.py``)."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounterWithBackend

from filterformer.training import compilation
from filterformer.training.compare import compare, load_compare_config
from filterformer.training.compare.cost import (
    COST_FILE,
    cost_note,
    measure_cost,
    with_step_times,
)

from .helpers import majority_task

TINY = ["task=majority", "model.dim=16", "model.depth=2", "model.num_heads=2", "batch_size=16",
        "max_steps=2", "progress=false"]


def test_run_records_take_their_method_and_seeds_time():
    cost = {"measure": "paired", "seeds": {"0": {"step_time_s": {"a": 0.1, "b": 0.2}},
                                           "3": {"step_time_s": {"a": 0.3, "b": 0.4}}}}
    runs = [{"method": m, "seed": s, "step_time_s": None, "train_step_time_s": 9.0}
            for m in "ab" for s in (0, 3)]
    assert [r["step_time_s"] for r in with_step_times(runs, cost)] == [0.1, 0.3, 0.2, 0.4]
    fallback = with_step_times(runs, {"measure": "in-training"})
    assert [r["step_time_s"] for r in fallback] == [9.0] * 4
    assert "alternated in 6 rounds" in cost_note({**cost, "rounds": 6, "warmup_steps": 2,
                                                   "device": "cpu", "threads": 1})
    assert "during each run's own training" in cost_note({"measure": "in-training"})


def test_a_real_measurement_times_every_method_and_seed_and_is_kept(tmp_path):
    config = load_compare_config(None, [*TINY, f"output_dir={tmp_path}"],
                                 methods=["softmax", "gfsa", "samsa_hard"], seeds=[0, 1],
                                 cost_rounds=2, cost_warmup_steps=1)
    lines = []
    cost = measure_cost(config, majority_task(num_train=48, num_eval=16), echo=lines.append)
    assert cost["measure"] == "paired" and cost["rounds"] == 2 and cost["warmup_steps"] == 1
    assert cost["threads"] == torch.get_num_threads()
    for seed in ("0", "1"):
        times = cost["seeds"][seed]["step_time_s"]
        assert set(times) == {"softmax", "gfsa", "samsa_hard"}
        assert all(math.isfinite(t) and t > 0 for t in times.values())
        assert all(len(r) == 2 for r in cost["seeds"][seed]["round_step_time_s"].values())
    # The same comparison reads its measurement back; another measures again.
    assert json.loads((tmp_path / COST_FILE).read_text())["cost"] == cost
    assert measure_cost(config, majority_task(num_train=48, num_eval=16),
                        echo=lines.append) == cost
    assert "reused" in lines[-1]
    more = load_compare_config(None, [*TINY, f"output_dir={tmp_path}"],
                               methods=["softmax", "gfsa"], seeds=[0, 1], cost_rounds=2,
                               cost_warmup_steps=1)
    assert set(measure_cost(more, majority_task(num_train=48, num_eval=16),
                            echo=lines.append)["seeds"]["0"]["step_time_s"]) == {"softmax", "gfsa"}


@pytest.mark.parametrize("rounds", [2, 0])
def test_compare_reports_the_paired_time_or_says_it_is_the_in_training_one(tmp_path, rounds):
    config = load_compare_config(None, [*TINY, f"output_dir={tmp_path}"],
                                 methods=["softmax", "neutreno"], seeds=[0], cost_rounds=rounds,
                                 cost_warmup_steps=1, diagnostics_batches=1)
    results = compare(config, task=majority_task(num_train=48, num_eval=16),
                      echo=lambda line: None)
    assert results.cost["measure"] == ("paired" if rounds else "in-training")
    for run in results.runs:
        assert math.isfinite(run["step_time_s"]) and run["step_time_s"] > 0
        assert run["train_step_time_s"] > 0 and run["train_time_s"] > 0
        if rounds:
            paired = results.cost["seeds"]["0"]["step_time_s"][run["method"]]
            assert run["step_time_s"] == paired
        else:
            assert run["step_time_s"] == run["train_step_time_s"]
    report = (tmp_path / "report.html").read_text()
    assert ("alternated in 2 rounds" in report) == bool(rounds)


def test_cost_options_are_checked():
    with pytest.raises(ValueError, match="cost_rounds must be >= 0"):
        load_compare_config(None, TINY, cost_rounds=-1)
    with pytest.raises(ValueError, match="cost_warmup_steps >= 1"):
        load_compare_config(None, TINY, cost_warmup_steps=0)


def test_a_compiled_comparison_times_compiled_steps_and_keeps_them_apart(tmp_path, monkeypatch):
    """compile=true: every method's timed step is compiled, one graph per method for all the
    rounds' batches (lengths 6–16); an eager measurement is not read back for it, nor it for an
    eager one. Backend: aot_eager behind TorchDynamo's compile counter."""
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    monkeypatch.setattr(compilation, "BACKEND", counter)
    task = majority_task(num_train=48, num_eval=16)
    lines = []

    def measure(compiled: bool) -> dict:
        config = load_compare_config(None, [*TINY, f"output_dir={tmp_path}",
                                            f"compile={str(compiled).lower()}"],
                                     methods=["softmax", "gfsa"], seeds=[0], cost_rounds=3,
                                     cost_warmup_steps=1)
        return measure_cost(config, task, echo=lines.append)

    eager = measure(compiled=False)
    assert counter.frame_count == 0 and eager["compile"] is False
    compiled = measure(compiled=True)
    assert "reused" not in lines[-1]
    assert compiled["compile"] is True and counter.frame_count == 2
    assert "(compiled with torch.compile)" in cost_note(compiled)
    assert "compiled" not in cost_note(eager)
    measure(compiled=False)
    assert "reused" not in lines[-1]
    torch._dynamo.reset()
