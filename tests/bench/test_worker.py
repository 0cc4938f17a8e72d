import json
import os
import signal
import time

from filterformer.bench import BenchConfig, BenchShape
from filterformer.bench.fresh_process import main, run_in_worker

CONFIG = BenchConfig("efficient", 24, "inference", shape=BenchShape.quick(), repeats=2,
                     min_repeats=1)
# Measured in this process: leave its heap policy alone.
IN_PROCESS = BenchConfig("efficient", 24, "inference", shape=BenchShape.quick(), repeats=2,
                         min_repeats=1, allocator="system")


# What a worker may run instead of a measurement: module-level, so it can be sent to it.
def _crash(config):
    raise MemoryError("no memory left")


def _die(config):
    os.kill(os.getpid(), signal.SIGKILL)


def _hang(config):
    time.sleep(60)


def _report_pid(config):
    from filterformer.bench.measurement import skipped_record

    return skipped_record(config, f"pid {os.getpid()}")


def test_worker_measures_in_another_process():
    record = run_in_worker(CONFIG, timeout_s=120)
    assert record.measured and (record.method, record.N, record.mode) == ("efficient", 24,
                                                                          "inference")
    assert record.allocator == "reuse"
    first, second = (run_in_worker(CONFIG, 120, _report_pid).skipped for _ in range(2))
    assert first != second and first != f"pid {os.getpid()}"  # a fresh process each time


def test_failures_become_skipped_records_naming_what_happened():
    crashed = run_in_worker(CONFIG, 120, _crash)
    assert crashed.skipped == "the worker failed: MemoryError: no memory left"
    killed = run_in_worker(CONFIG, 120, _die)
    assert "killed by signal 9" in killed.skipped
    hung = run_in_worker(CONFIG, 0.5, _hang)
    assert "ran past its 0.5 s limit" in hung.skipped
    assert (hung.method, hung.N, hung.mode) == ("efficient", 24, "inference")


def test_command_line_worker_prints_one_json_record(capsys):
    assert main([json.dumps(IN_PROCESS.to_dict())]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["method"] == "efficient" and record["median_ms"] > 0
    assert record["allocator"] == "system"


def test_config_round_trips_through_json():
    config = BenchConfig("gfsa", 64, "train", shape=BenchShape(batch=3, heads=2, head_dim=16))
    assert BenchConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_command_line_usage_error(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err
