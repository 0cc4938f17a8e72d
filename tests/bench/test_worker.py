import os
import random
import signal
import time

import pytest

from filterformer.bench import BenchConfig, BenchShape
from filterformer.bench.fresh_process import WorkerFailed, run_isolated, start_method
from filterformer.bench.sweep import measure_in_fresh_process, measure_in_one_worker

CONFIG = BenchConfig("efficient", 24, "inference", shape=BenchShape.quick(), repeats=2,
                     min_run_s=0.01)


# What a worker may run instead of a measurement: module-level, so it can be sent to it.
def _crash():
    raise MemoryError("no memory left")


def _die():
    os.kill(os.getpid(), signal.SIGKILL)


def _hang():
    time.sleep(60)


def test_worker_measures_in_another_process():
    record = measure_in_fresh_process(CONFIG)
    assert record.measured and (record.method, record.N, record.mode) == ("efficient", 24,
                                                                          "inference")
    assert record.allocator == "reuse" and "in a fresh process" in record.memory
    first, second = (run_isolated(os.getpid, 120) for _ in range(2))
    assert first != second and first != os.getpid()  # a fresh process each time


def test_failures_name_what_happened():
    with pytest.raises(WorkerFailed, match="the worker failed: MemoryError: no memory left"):
        run_isolated(_crash, 120)
    with pytest.raises(WorkerFailed, match="killed by signal 9"):
        run_isolated(_die, 120)
    with pytest.raises(WorkerFailed, match=r"ran past its 0.5 s limit"):
        run_isolated(_hang, 0.5)


def test_a_failed_worker_gives_a_skipped_record():
    broken = BenchConfig("efficient", 24, "inference", shape=BenchShape(head_dim=-1))
    record = measure_in_fresh_process(broken)
    assert not record.measured and record.skipped.startswith("the worker failed: RuntimeError")
    assert (record.method, record.N, record.mode) == ("efficient", 24, "inference")
    assert record.failed


def test_cuda_workers_are_spawned_as_direct_children():
    # A fork of a process that touched CUDA cannot use it: a CUDA worker is spawned, not forked
    # from the server that preloads torch.
    assert start_method(cuda=True) == "spawn"
    assert run_isolated(os.getppid, 120, cuda=True) == os.getpid()
    if start_method() == "forkserver":  # the CPU path on a machine without CUDA
        assert run_isolated(os.getppid, 120) != os.getpid()


def test_the_cuda_start_path_measures_every_configuration_and_survives_a_failure():
    # The path a CUDA run takes (every configuration in one spawned worker), run on the CPU.
    seed = random.randrange(1000)
    good = [BenchConfig("efficient", N, "inference", shape=BenchShape.quick(), repeats=2,
                        min_run_s=0.01, seed=seed) for N in (16, 24)]
    broken = BenchConfig("sdpa", 16, "train", shape=BenchShape(head_dim=-1), seed=seed)
    after = BenchConfig("sdpa", 16, "inference", shape=BenchShape.quick(), min_run_s=0.01)
    records = measure_in_one_worker([good, [broken], [after]], cuda=True)
    assert [(r.method, r.N, r.mode) for r in records] == [
        ("efficient", 16, "inference"), ("efficient", 24, "inference"), ("sdpa", 16, "train"),
        ("sdpa", 16, "inference")]
    first, second, failed, last = records
    assert first.measured and second.measured and last.measured and not last.failed
    assert all(r.median_ms > 0 and r.peak_mb >= 0 for r in (first, second, last))
    assert not failed.measured and failed.failed and failed.skipped.startswith("RuntimeError")
