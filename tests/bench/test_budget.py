import pytest

from filterformer.bench import BenchConfig, BenchRecord, BenchShape, Budget, get_method
from filterformer.bench.sweep import skip_reason


def _config(method, N, mode="train", warmup=1, min_repeats=3, allocator="system"):
    return BenchConfig(method, N, mode, shape=BenchShape(), warmup=warmup,
                       min_repeats=min_repeats, allocator=allocator)


def _previous(method, N, median_ms, peak_mb, mode="train"):
    return BenchRecord(method, N, mode, "cpu", median_ms=median_ms, peak_mb=peak_mb)


def test_nothing_measured_and_no_matrices_fits():
    assert skip_reason(get_method("gfsa"), _config("gfsa", 16384), None, Budget()) is None


def test_explicit_matrices_alone_can_exceed_the_memory_budget():
    # Two (B=2, h=4, 16384, 16384) float32 matrices: 16 GiB, before anything runs.
    floor = 2 * 2 * 4 * 16384**2 * 4 / 2**20
    method = get_method("gfsa-explicit")
    reason = skip_reason(method, _config("gfsa-explicit", 16384), None,
                         Budget(memory_mb=floor - 1))
    assert reason is not None and "explicit N×N" in reason and "memory budget" in reason
    assert skip_reason(method, _config("gfsa-explicit", 16384), None,
                       Budget(memory_mb=floor + 1)) is None


def test_time_is_projected_with_the_methods_exponent():
    # sdpa grows as N²: 1 s at N=1024 -> 16 s at 4096; the memory step (long enough to be the
    # warm-up) + 3 repeats.
    method, previous = get_method("sdpa"), _previous("sdpa", 1024, 1000.0, 1.0)
    total_s = 16 * 4
    over = skip_reason(method, _config("sdpa", 4096), previous, Budget(config_s=total_s - 1))
    assert over is not None and "16.0 s per step" in over and "N^2" in over
    assert skip_reason(method, _config("sdpa", 4096), previous,
                       Budget(config_s=total_s + 1)) is None


def test_a_changed_heap_policy_costs_one_warm_up_step_even_for_long_steps():
    method, previous = get_method("sdpa"), _previous("sdpa", 1024, 1000.0, 1.0)
    config = _config("sdpa", 4096, allocator="reuse")  # 16 s steps: memory + 1 + 3 repeats
    assert skip_reason(method, config, previous, Budget(config_s=16 * 5 - 1)) is not None
    assert skip_reason(method, config, previous, Budget(config_s=16 * 5 + 1)) is None


def test_short_steps_count_their_warm_up():
    # 10 ms at N=256 -> 160 ms at 1024: memory step + 2 warm-up + 3 repeats = 6 steps.
    config = _config("sdpa", 1024, warmup=2)
    previous = _previous("sdpa", 256, 10.0, 1.0)
    assert skip_reason(get_method("sdpa"), config, previous, Budget(config_s=0.95)) is not None
    assert skip_reason(get_method("sdpa"), config, previous, Budget(config_s=0.97)) is None


def test_cubic_method_projects_faster_than_quadratic():
    previous_ms = 100.0
    budget = Budget(config_s=4 * previous_ms * 4**2.5 / 1e3)  # between N² and N³ growth
    explicit = _previous("gfsa-explicit", 1024, previous_ms, 1.0)
    sdpa = _previous("sdpa", 1024, previous_ms, 1.0)
    assert skip_reason(get_method("gfsa-explicit"), _config("gfsa-explicit", 4096), explicit,
                       budget) is not None
    assert skip_reason(get_method("sdpa"), _config("sdpa", 4096), sdpa, budget) is None


def test_memory_is_projected_from_the_previous_length():
    previous = _previous("gfsa-explicit", 2048, 1.0, 300.0)
    # N² growth: 300 MiB -> 1200 MiB at 4096, above the 512 MiB of its matrices.
    reason = skip_reason(get_method("gfsa-explicit"), _config("gfsa-explicit", 4096), previous,
                         Budget(memory_mb=1100))
    assert reason is not None and "≈1200 MiB" in reason
    assert skip_reason(get_method("gfsa-explicit"), _config("gfsa-explicit", 4096), previous,
                       Budget(memory_mb=1300)) is None


@pytest.mark.parametrize("field", ["config_s", "memory_mb"])
def test_budget_must_be_positive(field):
    with pytest.raises(ValueError, match=field):
        Budget(**{field: 0})
