import torch

from filterformer.bench.measurement import cpu_peak_mb

MIB = 2**20


def _touch(mib):
    # ones() writes every page, so the pages are resident, not just reserved.
    return torch.ones(mib * MIB // 4, dtype=torch.float32)


def test_peak_counts_an_allocation_of_known_size():
    extra, how = cpu_peak_mb(lambda: _touch(96).sum())
    assert 90 <= extra <= 112
    assert "VmHWM" in how


def test_peak_is_the_largest_live_set_not_the_sum_of_allocations():
    def step():
        for _ in range(3):
            _touch(64).sum()  # each freed before the next

    extra, _ = cpu_peak_mb(step)
    assert 60 <= extra <= 90


def test_peak_is_measured_afresh_after_a_larger_earlier_peak():
    cpu_peak_mb(lambda: _touch(160).sum())
    extra, _ = cpu_peak_mb(lambda: _touch(32).sum())
    assert 30 <= extra <= 48
