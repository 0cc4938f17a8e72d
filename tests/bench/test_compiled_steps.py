"""The compiled-step benchmark: every configuration recorded, compiled once (its timed steps
never recompile), with positive, finite times and speed-ups, and outputs equal to eager's.

Backend: ``aot_eager`` behind TorchDynamo's compile counter, as in
``tests/training/test_compilation.py`` (graph capture and AOTAutograd's traced backward, in
seconds); one test compiles with inductor, SAMSA's random draws included.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounterWithBackend

from filterformer.bench.compiled_steps import (
    QUICK_CONFIGURATIONS,
    CompiledStepSettings,
    measure_compiled_step,
    run_compiled_steps,
)
from filterformer.training import compilation

#: float32, as the target asks.
TOLERANCE = 1e-5


@pytest.fixture
def counter(monkeypatch) -> CompileCounterWithBackend:
    torch._dynamo.reset()
    backend = CompileCounterWithBackend("aot_eager")
    monkeypatch.setattr(compilation, "BACKEND", backend)
    yield backend
    torch._dynamo.reset()


def test_quick_run_records_every_configuration_compiled_once(counter):
    settings = CompiledStepSettings.quick()
    lines = []
    records = run_compiled_steps(settings, log=lines.append)
    assert [(r.method, r.N) for r in records] == list(QUICK_CONFIGURATIONS)
    assert len(lines) == len(records)
    # One graph per configuration, compiled by its first pass: no timed step recompiled.
    assert counter.frame_count == len(records)
    for record in records:
        assert record.max_abs_diff <= TOLERANCE
        assert len(record.round_eager_ms) == len(record.round_compiled_ms) == settings.rounds
        assert all(n >= 1 for n in record.steps_per_round)
        for value in (record.eager_ms, record.compiled_ms, record.speedup,
                      *record.speedup_spread, record.compile_s):
            assert math.isfinite(value) and value > 0
        assert record.to_dict()["speedup"] == record.speedup


def test_settings_need_two_rounds():
    with pytest.raises(ValueError, match="rounds must be >= 2"):
        CompiledStepSettings.quick(rounds=1)


@pytest.mark.slow
def test_inductor_outputs_equal_eager_with_random_draws():
    """SAMSA draws Gumbel noise while training: compiled with inductor's eager-compatible
    random ops, its outputs equal eager's."""
    torch._dynamo.reset()
    try:
        record = measure_compiled_step("samsa_hard", 32, CompiledStepSettings.quick(rounds=2))
    finally:
        torch._dynamo.reset()
    assert record.backend == "inductor"
    assert record.max_abs_diff <= TOLERANCE
