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

from filterformer.bench import BenchShape
from filterformer.bench.compiled_steps import QUICK_CONFIGURATIONS, measure_compiled_step, run

#: float32, as the target asks.
TOLERANCE = 1e-5


def test_quick_run_records_every_configuration_compiled_once(compile_counter):
    records = run(quick=True, device="cpu")
    assert [(r.method, r.N, r.mode) for r in records] == [
        (f"step-{m}", N, mode) for m, N in QUICK_CONFIGURATIONS for mode in ("eager", "compiled")]
    # One graph per configuration, compiled by its first pass: no timed step recompiled.
    assert compile_counter.frame_count == len(QUICK_CONFIGURATIONS)
    for eager, compiled in zip(records[::2], records[1::2], strict=True):
        assert eager.round_group == compiled.round_group
        assert eager.compile_s is None and math.isfinite(compiled.compile_s)
        assert 0 <= compiled.max_abs_diff <= TOLERANCE
        for record in (eager, compiled):
            assert len(record.times_ms) == 3
            assert math.isfinite(record.median_ms) and record.median_ms > 0


@pytest.mark.slow
def test_inductor_outputs_equal_eager_with_random_draws():
    """SAMSA draws Gumbel noise while training: compiled with inductor's eager-compatible
    random ops, its outputs equal eager's."""
    torch._dynamo.reset()
    try:
        _, compiled = measure_compiled_step("samsa_hard", 32, BenchShape.quick(), rounds=2)
    finally:
        torch._dynamo.reset()
    assert "backend inductor" in compiled.notes
    assert compiled.max_abs_diff <= TOLERANCE
