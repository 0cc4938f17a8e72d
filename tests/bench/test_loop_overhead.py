"""The loop-overhead benchmark: the bare loop is the trainer's training (equal weights after
equal steps from one seed, across an epoch's end), the measured run is ``filterformer train``'s
default one with only the measurement's changes, and a quick run records both sides."""

from __future__ import annotations

import math

import torch

from filterformer.bench.loop_overhead import LoopSides, loop_config, measure_loop_overhead
from filterformer.training import TrainConfig
from filterformer.training.run_config import run_identity

from ..training.helpers import majority_task, tiny_config

#: Changed by loop_config; every other field stays filterformer train's.
CHANGED = {"output_dir", "device", "precision", "progress", "max_steps", "eval_every",
           "checkpoint_every", "stop_after", "schedule"}


def test_the_bare_loop_trains_the_same_weights_as_the_trainer(tmp_path):
    task = majority_task(num_train=64, num_eval=16)  # 4 steps an epoch of 16
    config = loop_config(tiny_config(tmp_path / "base"), output_dir=tmp_path / "run")
    sides = LoopSides(config, task)
    before = {k: v.clone() for k, v in sides.model.state_dict().items()}
    assert all(torch.equal(before[k], v) for k, v in sides.trainer.model.state_dict().items())
    for _ in range(6):
        sides.trainer_step()
        sides.move_batch()
        sides.bare_step()
    sides.trainer.context.close()
    assert (sides.trainer.step, sides.trainer.epoch) == (6, 1)
    trained = sides.trainer.model.state_dict()
    assert any(not torch.equal(before[k], v) for k, v in trained.items())
    for name, value in sides.model.state_dict().items():
        assert torch.equal(value, trained[name]), name


def test_the_measured_run_is_filterformer_trains_default_with_the_measurements_changes(
    tmp_path,
):
    config = loop_config(output_dir=tmp_path)
    default = TrainConfig().to_dict()
    measured = config.to_dict()
    assert {k: v for k, v in measured.items() if k not in CHANGED} == {
        k: v for k, v in default.items() if k not in CHANGED}
    assert (config.precision, config.progress, config.output_dir) == ("fp32", False,
                                                                      str(tmp_path))
    assert (config.schedule.warmup_steps, config.schedule.decay) == (0, "constant")
    assert config.checkpoint_every is None and config.stop_after is None
    # The schedule's shape changes; what the run trains otherwise does not.
    assert run_identity(measured)["optimizer"] == run_identity(default)["optimizer"]


def test_a_quick_run_records_both_sides_in_every_round(tmp_path):
    task = majority_task(num_train=64, num_eval=16)
    trainer, bare = measure_loop_overhead(tiny_config(tmp_path), task=task, rounds=3)
    assert [(r.method, r.N, r.mode, r.batch) for r in (trainer, bare)] == [
        ("loop-trainer", 16, "train", 16), ("loop-bare", 16, "train", 16)]
    assert trainer.baseline == "loop-bare" and trainer.round_group == bare.round_group
    for record in (trainer, bare):
        assert len(record.times_ms) == 3
        assert math.isfinite(record.median_ms) and record.median_ms > 0
    assert not any(tmp_path.iterdir())  # the trainer wrote to its own temporary directory
