import pytest
import torch

from filterformer.bench import TARGETS, BenchRecord, Target, evaluate_targets
from filterformer.bench.performance_targets import Measure


def _record(method, N, mode, ms, mb=1.0, skipped=None):
    return BenchRecord(method, N, mode, "cpu", median_ms=None if skipped else ms,
                       peak_mb=None if skipped else mb, skipped=skipped)


def test_ratio_and_verdict_follow_the_bound():
    records = [_record("gfsa", 4096, "train", 30.0), _record("sdpa", 4096, "train", 15.0)]
    target = Target("t", Measure("gfsa", 4096, "train"), Measure("sdpa", 4096, "train"), "<=", 2.1)
    (result,) = evaluate_targets(records, (target,))
    assert result.ratio == pytest.approx(2.0) and result.passed is True
    strict = Target("t", target.numerator, target.denominator, "<=", 1.9)
    assert evaluate_targets(records, (strict,))[0].passed is False
    at_least = Target("t", target.numerator, target.denominator, ">=", 2.0)
    assert evaluate_targets(records, (at_least,))[0].passed is True


def test_memory_ratio_reads_peak_memory():
    records = [_record("a", 8, "train", 1.0, mb=500.0), _record("b", 8, "train", 9.0, mb=20.0)]
    target = Target("t", Measure("a", 8, "train", "peak_mb"), Measure("b", 8, "train", "peak_mb"),
                    ">=", 10)
    assert evaluate_targets(records, (target,))[0].ratio == pytest.approx(25.0)


def test_missing_or_skipped_side_is_not_measured():
    records = [_record("gfsa", 4096, "train", 30.0),
               _record("sdpa", 4096, "train", 0.0, skipped="over budget")]
    results = evaluate_targets(records)
    assert len(results) == len(TARGETS)
    assert all(r.ratio is None and r.passed is None for r in results)


def test_every_target_names_a_measurable_configuration():
    from filterformer.bench import BENCH_METHODS
    from filterformer.bench.compiled_steps import FULL_CONFIGURATIONS
    from filterformer.bench.decoding_latency import CONTEXTS, DECODING_METHODS, FAMILIES
    from filterformer.training import TrainConfig
    from filterformer.training.model_building import load_task_data

    # The rows a full run of the extra benchmarks writes; the loop's N is its task's longest
    # sequence.
    loop_N = load_task_data(TrainConfig().task, TrainConfig().task_options).max_len
    extras = {(f"decode-{f}-{m}", C, "decode") for f in FAMILIES for m in DECODING_METHODS
              for C in CONTEXTS}
    extras |= {(f"loop-{side}", loop_N, "train") for side in ("trainer", "bare")}
    extras |= {(f"step-{m}", N, mode) for m, N in FULL_CONFIGURATIONS
               for mode in ("eager", "compiled")}
    for target in TARGETS:
        for measure in (target.numerator, target.denominator):
            if measure is not None and measure.method not in BENCH_METHODS:
                assert (measure.method, measure.N, measure.mode) in extras


def test_bad_quantity_and_operator_are_rejected():
    with pytest.raises(ValueError, match="quantity must be one of median_ms, peak_mb, max_abs"):
        Measure("sdpa", 8, "train", "flops")
    with pytest.raises(ValueError, match="op must be one of <=, >=, info"):
        Target("t", Measure("a", 8, "train"), Measure("b", 8, "train"), "<", 1.0)


def test_a_target_reads_its_own_modes_only():
    target = Target("t", Measure("a", 8, "train"), Measure("b", 8, "inference"), ">=", 2)
    a_ms, b_ms = (float(x) for x in torch.empty(2).uniform_(1.0, 10.0))
    records = [_record("a", 8, "train", a_ms), _record("b", 8, "inference", b_ms),
               _record("a", 8, "inference", 1.0), _record("b", 8, "train", 1.0)]
    (result,) = evaluate_targets(records, (target,))
    assert (result.ratio, result.mode) == (pytest.approx(a_ms / b_ms), "train")
    assert result.passed is (a_ms / b_ms >= 2)
    skipped = [_record("a", 8, "train", 0.0, skipped="too slow"), *records[1:]]
    (result,) = evaluate_targets(skipped, (target,))
    assert result.ratio is None and result.passed is None


def test_target_configurations_are_the_modes_the_targets_read():
    from filterformer.bench.performance_targets import target_configurations

    keys = target_configurations()
    assert {("gfsa", 4096, "train"), ("sdpa", 4096, "train"), ("agf", 2048, "train"),
            ("gfsa-explicit", 4096, "inference"), ("gfsa", 4096, "inference"),
            ("gfsa-explicit", 8192, "inference"), ("gfsa", 8192, "inference"),
            ("samsa-hard-k256", 4096, "inference")} <= keys
    assert ("sdpa", 4096, "inference") not in keys
    assert ("gfsa-explicit", 4096, "train") not in keys


def test_a_target_without_denominator_bounds_the_value_itself():
    record = BenchRecord("step-agf", 64, "compiled", "cpu", median_ms=1.0, max_abs_diff=3e-7)
    target = Target("t", Measure("step-agf", 64, "compiled", "max_abs_diff"), None, "<=", 1e-5)
    (result,) = evaluate_targets([record], (target,))
    assert result.ratio == pytest.approx(3e-7) and result.passed is True
