"""``dry_run``: every method built and stepped once, nothing written, failures named."""

from __future__ import annotations

import math
import random

import pytest
import torch

from filterformer.training.compare import dry_run, load_compare_config

from .helpers import majority_task

TINY = ["task=majority", "model.dim=16", "model.depth=2", "model.num_heads=2", "batch_size=16",
        "progress=false"]


def test_every_method_steps_once_and_nothing_is_written(tmp_path):
    seed = random.randint(0, 10_000)
    config = load_compare_config(None, [*TINY, f"output_dir={tmp_path / 'out'}"],
                                 methods=["softmax", "gfsa", "neutreno", "samsa_soft"],
                                 seeds=[seed])
    lines = []
    losses = dry_run(config, task=majority_task(seed=seed), echo=lines.append)
    assert list(losses) == ["softmax", "gfsa", "neutreno", "samsa_soft"]
    # Untrained 3-class models start near the uniform prediction's loss, log 3.
    assert all(abs(loss - math.log(3)) < 0.5 for loss in losses.values())
    # GFSA starts as plain attention (w0 = 0, w1 = 1, wK = 0): the same first loss.
    assert losses["gfsa"] == pytest.approx(losses["softmax"], rel=1e-5)
    assert len(lines) == 5 and "4 methods × 1 seeds" in lines[-1]
    assert not (tmp_path / "out").exists()


def test_a_method_whose_loss_is_not_finite_is_named(tmp_path, monkeypatch):
    config = load_compare_config(None, [*TINY, f"output_dir={tmp_path}"],
                                 methods=["softmax", "gfsa"], seeds=[0])
    original = torch.nn.functional.cross_entropy
    calls = []

    def second_call_nan(*args, **kwargs):  # the second method's loss is NaN
        calls.append(1)
        loss = original(*args, **kwargs)
        return loss * float("nan") if len(calls) == 2 else loss

    monkeypatch.setattr(torch.nn.functional, "cross_entropy", second_call_nan)
    with pytest.raises(ValueError, match=r"method 'gfsa'.*nan"):
        dry_run(config, task=majority_task(), echo=lambda line: None)
