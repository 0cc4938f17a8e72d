"""The learning-rate schedule against its closed form."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from filterformer.training import ScheduleConfig, build_scheduler, lr_factor


def _reference(step: int, warmup: int, total: int, decay: str, low: float) -> float:
    """Written independently: warm-up (step+1)/W, then decay over the remaining T - W steps."""
    if step < warmup:
        return (step + 1) / warmup
    t = (step - warmup) / (total - warmup)
    shape = {"cosine": (1 + math.cos(math.pi * t)) / 2, "linear": 1 - t, "constant": 1.0}[decay]
    return shape if decay == "constant" else low + (1 - low) * shape


@pytest.mark.parametrize("decay", ["cosine", "linear", "constant"])
@pytest.mark.parametrize(("warmup_steps", "warmup_ratio"), [(4, 0.0), (None, 0.25), (0, 0.0)])
def test_factor_matches_closed_form(decay, warmup_steps, warmup_ratio):
    total = 20
    schedule = ScheduleConfig(warmup_steps=warmup_steps, warmup_ratio=warmup_ratio, decay=decay,
                              min_lr_ratio=0.1)
    warmup = warmup_steps if warmup_steps is not None else round(warmup_ratio * total)
    for step in range(total):
        expected = _reference(step, warmup, total, decay, 0.1)
        assert lr_factor(step, schedule, total) == pytest.approx(expected, abs=1e-12)


def test_schedule_shape_invariants():
    schedule = ScheduleConfig(warmup_steps=5, decay="cosine")
    factors = [lr_factor(s, schedule, 50) for s in range(50)]
    assert factors[4] == 1.0  # the peak is reached on the last warm-up step
    assert all(a < b for a, b in itertools.pairwise(factors[:5]))  # rises
    assert all(a >= b for a, b in itertools.pairwise(factors[4:]))  # then falls
    assert 0.0 < factors[-1] < factors[-2]  # no step trains at zero


def test_scheduler_sets_the_optimizer_learning_rate():
    parameter = torch.nn.Parameter(torch.zeros(3))
    optimizer = torch.optim.AdamW([parameter], lr=0.02)
    schedule = ScheduleConfig(warmup_steps=3, decay="linear")
    scheduler = build_scheduler(optimizer, schedule, total_steps=10)
    for step in range(10):
        expected = 0.02 * lr_factor(step, schedule, 10)
        assert optimizer.param_groups[0]["lr"] == pytest.approx(expected)
        optimizer.step()
        scheduler.step()
