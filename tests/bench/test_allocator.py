import resource
from functools import partial

import torch

from filterformer.bench.fresh_process import run_isolated
from filterformer.bench.measurement import reuse_freed_memory

MIB = 2**20


def _page_faults_of_a_large_tensor_after_others(reuse):
    """Runs in a worker: page faults of a 64 MiB tensor allocated after five were freed."""
    if reuse:
        assert reuse_freed_memory()
    # The heap grows to hold them (64-byte aligned blocks fit a freed one only now and then),
    # then serves them from what was freed.
    for _ in range(5):
        torch.ones(64 * MIB // 4).sum()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.ones(64 * MIB // 4).sum()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def _faults(reuse):
    return run_isolated(partial(_page_faults_of_a_large_tensor_after_others, reuse), 120)


def test_reuse_serves_a_large_tensor_from_freed_memory():
    system, reuse = _faults(False), _faults(True)
    # glibc maps a fresh region for every tensor of 32 MiB or more: its 16384 pages fault again.
    assert system >= 64 * MIB // 4096 // 2
    assert reuse * 100 < system
