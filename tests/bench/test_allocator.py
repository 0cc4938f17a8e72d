import resource

import torch

from filterformer.bench import BenchConfig, BenchShape
from filterformer.bench.fresh_process import run_in_worker
from filterformer.bench.measurement import skipped_record
from filterformer.bench.step_measures import reuse_freed_memory

MIB = 2**20


def _page_faults_of_a_large_tensor_after_others(config):
    """Runs in a worker: page faults of a 64 MiB tensor allocated after two were freed."""
    if config.allocator == "reuse":
        assert reuse_freed_memory()
    for _ in range(2):  # the heap grows to hold one, then serves it again
        torch.ones(64 * MIB // 4).sum()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.ones(64 * MIB // 4).sum()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    return skipped_record(config, str(faults))


def _faults(allocator):
    config = BenchConfig("sdpa", 16, "inference", shape=BenchShape.quick(), allocator=allocator)
    return int(run_in_worker(config, 120, _page_faults_of_a_large_tensor_after_others).skipped)


def test_reuse_serves_a_large_tensor_from_freed_memory():
    system, reuse = _faults("system"), _faults("reuse")
    # glibc maps a fresh region for every tensor of 32 MiB or more: its 16384 pages fault again.
    assert system >= 64 * MIB // 4096 // 2
    assert reuse * 100 < system
