import os
import signal
import time

import pytest

from filterformer.bench import BenchConfig, BenchShape
from filterformer.bench.fresh_process import WorkerFailed, run_isolated
from filterformer.bench.sweep import measure_in_fresh_process

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
