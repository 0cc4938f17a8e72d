"""``filterformer bench`` on CUDA: a case measured in this process, its extra memory read from
CUDA's allocator (``torch.cuda.max_memory_allocated``)."""

import random

import pytest
import torch

from filterformer.bench import BenchShape, Case, measure_cases
from filterformer.bench.measure import _first_step
from filterformer.bench.step_cases import BenchCase

pytestmark = pytest.mark.cuda


def test_the_first_step_reports_the_extra_memory_of_a_known_allocation(cuda_device):
    mib = random.randint(64, 256)
    kept = torch.zeros(2**20, device=cuda_device)  # allocated before: not the step's

    def forward():
        return [torch.ones(mib * 2**20 // 4, device=cuda_device).sum()]

    ms, extra = _first_step(BenchCase(forward, mode="inference"), cuda_device.type)
    assert ms > 0 and mib <= extra <= mib + 2  # the sum's own few bytes aside
    assert kept.sum().item() == 0


@pytest.mark.parametrize("mode", ["train", "inference"])
def test_two_cases_are_measured_side_by_side_on_cuda(mode, cuda_device):
    cases, device = [Case("sdpa", 64, mode), Case("gfsa", 64, mode)], cuda_device.type
    pair = measure_cases(cases, BenchShape.quick(), device, precision="bf16")
    assert [(r.method, r.device) for r in pair.records] == [("sdpa", device), ("gfsa", device)]
    assert all(r.measured and r.median_ms > 0 and r.peak_mb >= 0 for r in pair.records)
    assert pair.times is not None and len(pair.times.round_step_s) == 2
