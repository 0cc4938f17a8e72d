"""Targets judged on fixed synthetic measurements: the value each quantity reads, the verdict
each direction gives, and every target naming cases a run can build."""

import random

import pytest
import torch

from filterformer.bench import BENCH_METHODS, GPU_TARGETS, TARGETS, BenchRecord, Case, Target, judge
from filterformer.bench.step_cases import ALL_MODES
from filterformer.bench.targets import PairMeasurement
from filterformer.timing import PairedStepTimes

A, B = Case("a", 8, "train"), Case("b", 8, "inference")


def _record(case, ms=1.0, mb=1.0, first=1.0, skipped=None):
    return BenchRecord(case.method, case.N, case.mode, "cpu", median_ms=None if skipped else ms,
                       peak_mb=mb, first_ms=first, skipped=skipped)


def _rounds(count):
    return [float(x) for x in torch.empty(count).uniform_(1.0, 10.0)]


def test_a_time_ratio_is_the_median_of_the_rounds_ratios_and_the_direction_decides():
    a_rounds, b_rounds = _rounds(7), _rounds(7)
    ratios = sorted(x / y for x, y in zip(a_rounds, b_rounds, strict=True))
    pair = PairMeasurement([_record(A), _record(B)], PairedStepTimes([1, 1], [a_rounds, b_rounds]))
    bound = random.uniform(0.5, 2.0)
    at_most, at_least = (judge(Target("t", A, B, bound, d), pair) for d in ("<=", ">="))
    assert at_most.value == pytest.approx(ratios[3]) and at_least.value == at_most.value
    assert at_most.spread == pytest.approx((ratios[1] + (ratios[2] - ratios[1]) / 2,
                                            ratios[4] + (ratios[5] - ratios[4]) / 2))
    assert at_most.passed is (ratios[3] <= bound) and at_least.passed is (ratios[3] >= bound)
    info = judge(Target("t", A, B, bound, "info"), pair)
    assert info.value == at_most.value and info.passed is None
    backward = judge(Target("t", B, A, bound, "<="), pair)  # the sides in the other order
    assert backward.value == pytest.approx(sorted(y / x for x, y in zip(
        a_rounds, b_rounds, strict=True))[3]) and [s.method for s in backward.sides] == ["b", "a"]


def test_memory_and_first_step_read_their_own_quantities():
    a_mb, b_mb, first, median = (random.uniform(1.0, 100.0) for _ in range(4))
    pair = PairMeasurement([_record(A, mb=a_mb, first=first), _record(B, ms=median, mb=b_mb)],
                           PairedStepTimes([1, 1], [_rounds(3), _rounds(3)]))
    value = {q: judge(Target("t", A, B, 1.0, "<=", quantity=q), pair).value
             for q in ("memory", "first")}
    assert value == pytest.approx({"memory": a_mb / b_mb, "first": first / median})
    missing = PairMeasurement([_record(A, mb=None), _record(B, mb=b_mb)], pair.times)
    result = judge(Target("t", A, B, 1.0, "<=", quantity="memory"), missing)
    assert result.value is None and result.passed is None and "memory" in result.note


def test_a_side_that_was_not_measured_leaves_the_target_unjudged_saying_why():
    pair = PairMeasurement([_record(A), _record(B, skipped="too slow")])
    result = judge(Target("t", A, B, 2.0, ">="), pair)
    assert result.value is None and result.passed is None
    assert result.note == "not measured: b: too slow"


def test_bad_direction_and_quantity_are_rejected_naming_the_choices():
    with pytest.raises(ValueError, match="direction must be one of <=, >=, info"):
        Target("t", A, B, 1.0, "<")
    with pytest.raises(ValueError, match="quantity one of time, memory, first"):
        Target("t", A, B, 1.0, "<=", quantity="flops")
    for factor in (0.0, -random.random(), float("nan")):
        with pytest.raises(ValueError, match="time_factor must be > 0"):
            Target("t", A, B, 1.0, "<=", time_factor=factor)


def test_every_target_names_cases_a_run_can_build_and_the_gpu_ones_run_under_bf16():
    for target in TARGETS + GPU_TARGETS:
        for case in (target.numerator, target.denominator):
            assert case.method in BENCH_METHODS and case.mode in ALL_MODES
    assert {t.precision for t in TARGETS} == {"fp32"} and {t.precision for t in GPU_TARGETS} == {
        "bf16"}
    names = [t.name for t in TARGETS + GPU_TARGETS]
    assert len(set(names)) == len(names)
