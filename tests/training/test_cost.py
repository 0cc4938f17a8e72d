"""The paired time-per-step measurement of a comparison: rounds, medians, a real tiny run."""

from __future__ import annotations

import json
import math
import statistics

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounterWithBackend

from filterformer.timing import round_orders
from filterformer.training import compilation
from filterformer.training.compare import compare, load_compare_config
from filterformer.training.compare.cost import (
    COST_FILE,
    cost_note,
    measure_cost,
    paired_step_times,
    with_step_times,
)

from .helpers import majority_task

TINY = ["task=majority", "model.dim=16", "model.depth=2", "model.num_heads=2", "batch_size=16",
        "max_steps=2", "progress=false"]


class FakeSteps:
    """Steps that log which side ran on which round's batch; a timer that reports each side's
    next given duration (ms) instead of reading a clock."""

    def __init__(self, durations: list[list[float]]) -> None:
        self.durations = [iter(d) for d in durations]
        self.batch = [None] * len(durations)
        self.ran: list[tuple[int, int]] = []

    def steps(self):
        return [lambda side=side: self.ran.append((side, self.batch[side]))
                for side in range(len(self.durations))]

    def prepare(self, side: int, index: int) -> None:
        self.batch[side] = index

    def timer(self, step) -> float:
        step()
        side, _ = self.ran[-1]
        return next(self.durations[side])


def test_medians_are_taken_over_the_rounds_means_by_hand():
    # Warm-up: 30 and 14 ms (fastest 12): the second side runs round(30 / 12) = 2 steps a round.
    fake = FakeSteps([[30.0, 31.0, 10.0, 30.0, 20.0], [14.0, 12.0, 4.0, 6.0, 5.0, 9.0, 1.0, 2.0]])
    measured = paired_step_times(fake.steps(), rounds=3, warmup_steps=2, timer=fake.timer)
    assert measured.steps_per_round == [1, 2]
    # Rounds: first side 10, 30, 20 ms; second side (4 + 6) / 2, (5 + 9) / 2, (1 + 2) / 2 ms.
    assert measured.round_step_s == [pytest.approx([0.010, 0.030, 0.020]),
                                     pytest.approx([0.005, 0.007, 0.0015])]
    assert measured.median_s == pytest.approx([0.020, 0.005])


def test_every_round_runs_each_method_once_in_alternating_orders_on_the_rounds_batch():
    sides = int(torch.randint(2, 6, ()))
    rounds = int(torch.randint(2, 7, ()))
    warmup = int(torch.randint(1, 3, ()))
    warm_ms = torch.empty(sides).uniform_(5.0, 60.0)
    longest = float(warm_ms.max())
    repeats = [min(8, round(longest / float(ms))) for ms in warm_ms]
    timed = [torch.empty(rounds, count, dtype=torch.float64).uniform_(1.0, 100.0)
             for count in repeats]
    fake = FakeSteps([[float(warm_ms[side])] * warmup + timed[side].flatten().tolist()
                      for side in range(sides)])
    measured = paired_step_times(fake.steps(), rounds=rounds, warmup_steps=warmup,
                                 timer=fake.timer, prepare=fake.prepare)
    assert measured.steps_per_round == repeats
    # Warm-up rounds run one step each, then each timed round runs every method once, as one
    # block of its steps, on that round's batch; consecutive rounds change the order.
    warm_orders, orders = round_orders(sides, warmup), round_orders(sides, rounds)
    expected = [(side, index) for index, order in enumerate(warm_orders) for side in order]
    expected += [(side, index) for index, order in enumerate(orders) for side in order
                 for _ in range(repeats[side])]
    assert fake.ran == expected
    assert all(orders[i] != orders[i + 1] for i in range(rounds - 1))
    reference = [statistics.median(t.mean(1).tolist()) / 1e3 for t in timed]
    assert measured.median_s == pytest.approx(reference, rel=1e-12)
    with pytest.raises(ValueError, match="rounds and warmup_steps must be >= 1"):
        paired_step_times(fake.steps(), rounds=0, warmup_steps=1, timer=fake.timer)


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
    assert results["cost"]["measure"] == ("paired" if rounds else "in-training")
    for run in results["runs"]:
        assert math.isfinite(run["step_time_s"]) and run["step_time_s"] > 0
        assert run["train_step_time_s"] > 0 and run["train_time_s"] > 0
        if rounds:
            paired = results["cost"]["seeds"]["0"]["step_time_s"][run["method"]]
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
