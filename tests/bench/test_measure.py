"""Cases measured side by side: records for every case, rounds alternated, the first step's
extra memory, compiled steps beside eager ones, and what cannot be measured said so."""

import json
import math
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from filterformer.bench import BenchShape, Case, measure_cases, method_table
from filterformer.bench import measure as measure_module
from filterformer.bench.measure import Rounds
from filterformer.bench.method_table import xtransformers_encoder
from filterformer.bench.step_cases import BenchCase

QUICK = BenchShape.quick()
SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_two_cases_alternate_in_rounds_and_each_gets_its_record():
    N = random.choice((16, 24, 32))
    cases = [Case("gfsa", N, "train"), Case("sdpa", N, "train")]
    pair = measure_cases(cases, QUICK, rounds=Rounds(least=4, most=4))
    assert [(r.method, r.N, r.mode) for r in pair.records] == [tuple(c) for c in cases]
    assert len(pair.times.round_step_s[0]) == len(pair.times.round_step_s[1]) == 4
    for record, median_s in zip(pair.records, pair.times.median_s, strict=True):
        assert record.measured and math.isclose(record.median_ms, median_s * 1e3)
        assert len(record.times_ms) == 4 and record.first_ms > 0 and record.peak_mb >= 0
    assert (pair.records[0].batch, pair.records[0].heads, pair.records[0].dim) == (1, 2, 8)


def test_rounds_alternate_the_cases_blocks_each_timed_by_torch_utils_benchmark(monkeypatch):
    timed, means = [], iter(random.uniform(1e-3, 1e-2) for _ in range(6))

    class RecordingTimer:  # torch.utils.benchmark.Timer's interface: one block, its mean
        def __init__(self, stmt, globals, num_threads):
            assert stmt == "step()" and num_threads == torch.get_num_threads()
            self.step = globals["step"]

        def timeit(self, number):
            timed.append(self.step)
            return SimpleNamespace(mean=next(means))

    monkeypatch.setattr(measure_module, "Timer", RecordingTimer)
    pair = measure_cases([Case("sdpa", 16, "inference"), Case("efficient", 16, "inference")],
                         QUICK, rounds=Rounds(least=3, most=3))
    steps = list(dict.fromkeys(timed))
    assert len(steps) == 2 and timed == steps * 3  # each round: side 0's block, then side 1's
    rounds = pair.times.round_step_s
    assert pair.records[0].median_ms == pytest.approx(statistics.median(rounds[0]) * 1e3)
    assert pair.records[1].times_ms == pytest.approx([s * 1e3 for s in rounds[1]])


def test_blocks_of_long_steps_are_timed_whole_without_warm_up_steps(monkeypatch):
    class NoTimer:
        def __init__(self, *args, **kwargs):
            raise AssertionError("Timer.timeit warms up twice before every block")

    steps = []
    monkeypatch.setattr(measure_module, "Timer", NoTimer)
    monkeypatch.setattr(measure_module, "LONG_STEP_S", 0.0)  # every step counts as long
    rounds = random.randint(3, 5)
    pair = measure_cases([Case("sdpa", 16, "inference")], QUICK,
                         rounds=Rounds(least=rounds, most=rounds))
    (record,) = pair.records
    assert record.measured and len(record.times_ms) == rounds
    # With no warm-up, a block of n steps is exactly n calls: wrap the step and count them.
    built = measure_module._prepared(Case("sdpa", 16, "inference"), QUICK, "cpu", "fp32")
    step = built.step
    built.step = lambda: (steps.append(1), step())
    times = measure_module._alternated([built], [1.0], Rounds(least=rounds, most=rounds))
    assert len(steps) == rounds * times.steps_per_round[0]


#: Run in a fresh interpreter: whether glibc reuses a freed block for the next allocation depends
#: on what the process allocated before (and on a heap policy an earlier test may have set).
_FIRST_STEP = """
import json, sys, torch
from filterformer.bench.measure import _first_step
from filterformer.bench.step_cases import BenchCase
mib = int(sys.argv[1])

def forward():
    for _ in range(3):  # each freed before the next: the peak is one, not their sum
        torch.ones(mib * 2**20 // 4).sum()
    return []

print(json.dumps(_first_step(BenchCase(forward, mode="inference"), "cpu")))
"""


def test_the_first_step_reports_the_peak_extra_memory_of_a_known_allocation():
    mib = random.randint(64, 128)
    done = subprocess.run([sys.executable, "-c", _FIRST_STEP, str(mib)], capture_output=True,
                          text=True, check=True, env={**os.environ, "PYTHONPATH": SRC})
    ms, extra = json.loads(done.stdout.strip().splitlines()[-1])
    assert ms > 0 and mib - 6 <= extra <= mib + 16


def test_on_cuda_the_first_step_reports_the_peak_allocated_over_what_was_allocated_before(
        monkeypatch):
    mib = 2**20
    held, extra, stale = (random.randint(1, 4096) * mib for _ in range(3))
    memory = {"allocated": held, "peak": held + stale}  # a peak left by an earlier step
    calls = []

    def reset():
        calls.append("reset")
        memory["peak"] = memory["allocated"]

    def forward():  # allocates ``extra`` for a while, and frees it
        memory["peak"] = max(memory["peak"], memory["allocated"] + extra)
        return []

    for name in ("synchronize", "empty_cache"):
        monkeypatch.setattr(torch.cuda, name, lambda name=name: calls.append(name))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", reset)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda: memory["allocated"])
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: memory["peak"])
    monkeypatch.setattr(measure_module, "time_step", lambda step: step() or 1.5)
    ms, extra_mib = measure_module._first_step(BenchCase(forward, mode="inference"), "cuda")
    assert (ms, extra_mib) == (1.5, extra / mib)
    assert calls == ["synchronize", "empty_cache", "reset"]


def test_a_compiled_step_is_timed_beside_eager():
    cases = [Case("model-agf", 16, "compiled"), Case("model-agf", 16, "train")]
    pair = measure_cases(cases, QUICK, rounds=Rounds(least=2, most=2))
    assert all(r.measured for r in pair.records)
    assert [len(side) for side in pair.times.round_step_s] == [2, 2]


def test_past_a_methods_longest_length_nothing_runs_and_the_pair_is_not_timed():
    explicit, gfsa = measure_cases([Case("gfsa-explicit", 16384, "inference"),
                                    Case("gfsa", 16, "inference")], QUICK).records
    assert not explicit.measured and "not run past N=8192" in explicit.skipped
    assert not gfsa.measured and gfsa.skipped == "not timed: the case beside it was not measured"


def test_a_missing_peer_library_says_how_to_install_it_and_gives_a_skipped_record(monkeypatch):
    monkeypatch.setitem(sys.modules, "x_transformers", None)  # import raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'filterformer\[bench\]'"):
        xtransformers_encoder(16, 1, 2, 2.0)
    (record,) = measure_cases([Case("model-xtransformers", 16, "train")], QUICK).records
    assert not record.measured and not record.failed
    assert "x-transformers is not installed" in record.skipped


def test_a_case_that_raises_is_a_failed_record_naming_the_error():
    (record,) = measure_cases([Case("sdpa", 16, "train")], BenchShape(head_dim=-1)).records
    assert record.failed and not record.measured and record.skipped.startswith("RuntimeError")


def test_a_step_too_slow_for_the_limit_is_skipped_saying_so():
    (record,) = measure_cases([Case("sdpa", 16, "train")], QUICK,
                              rounds=Rounds(limit_s=1e-9)).records
    assert not record.measured and "exceed the limit of 1e-09 s" in record.skipped


def test_a_slow_first_step_is_judged_by_the_faster_of_two_unless_it_took_half_the_limit(
        monkeypatch):
    limit_s = random.uniform(0.5, 1.0)
    rounds = Rounds(least=3, most=3, budget_s=0.01, limit_s=limit_s)
    # One-time costs: 9 steps as slow as the first would pass the limit, the second is fast.
    monkeypatch.setattr(measure_module, "_first_step", lambda case, device: (limit_s * 250, 0.0))
    (record,) = measure_cases([Case("sdpa", 16, "train")], QUICK, rounds=rounds).records
    assert record.measured and record.first_ms == limit_s * 250
    monkeypatch.setattr(measure_module, "_first_step", lambda case, device: (limit_s * 600, 0.0))
    (record,) = measure_cases([Case("sdpa", 16, "train")], QUICK, rounds=rounds).records
    assert not record.measured
    assert record.skipped == (f"a step took {limit_s * 0.6:.1f} s; 9 steps exceed the limit of "
                              f"{limit_s:g} s")


@pytest.mark.parametrize("N", [16, 64, 200])
def test_a_case_is_built_afresh_after_a_priming_step_at_n_64_at_most(monkeypatch, N):
    builds = []

    def build(shape, length, mode, device):
        steps = []
        builds.append((length, steps))
        return BenchCase(lambda: steps.append(length) or [], mode="inference")

    method = method_table.BenchMethod("probe", "kernel", build, "a probe")
    monkeypatch.setitem(method_table.BENCH_METHODS, "probe", method)
    (record,) = measure_cases([Case("probe", N, "inference")], QUICK,
                              rounds=Rounds(least=2, most=2)).records
    assert record.measured
    (prime, primed_steps), (full, full_steps) = builds
    assert (prime, full) == (min(N, 64), N) and len(primed_steps) == 1 and len(full_steps) > 2
