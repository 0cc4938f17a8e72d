import pytest

from filterformer.bench import BenchSettings, BenchShape, run_benchmarks

QUICK = BenchShape.quick()


def _settings(**kwargs):
    base = {"shape": QUICK, "device": "cpu", "repeats": 2, "min_run_s": 0.01}
    return BenchSettings(**{**base, **kwargs})


def test_each_cpu_configuration_runs_in_its_own_worker():
    (record,) = run_benchmarks(_settings(methods=("gfsa",), lengths=(32,), modes=("train",)))
    assert record.measured and record.median_ms > 0 and record.peak_mb >= 0
    assert (record.method, record.N, record.mode, record.device) == ("gfsa", 32, "train", "cpu")
    assert (record.batch, record.heads, record.dim, record.level) == (1, 2, 8, "kernel")
    assert len(record.times_ms) >= 1 and record.threads >= 1
    assert min(record.times_ms) <= record.median_ms <= max(record.times_ms)
    assert "fresh process" in record.memory
    assert record.allocator == "reuse"


def test_run_covers_every_mode_and_length_in_order():
    records = run_benchmarks(_settings(methods=("efficient",), lengths=(48, 16)))
    keys = [(r.method, r.mode, r.N) for r in records]
    assert keys == [("efficient", mode, N) for mode in ("train", "inference") for N in (16, 48)]
    assert all(r.measured for r in records)


def test_past_a_methods_longest_length_in_a_mode_nothing_runs():
    # Explicit N×N matrices: a forward at N=16384 would hold 40 GiB at B=2, h=4.
    inference, train = run_benchmarks(_settings(methods=("gfsa-explicit",), lengths=(16384,)))[::-1]
    assert not inference.measured and "not run past N=8192" in inference.skipped
    assert not train.measured and "not run past N=4096" in train.skipped


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"methods": ("flash",)}, "valid choices"),
        ({"modes": ("eval",)}, "modes must be one of train, inference"),
        ({"lengths": (0,)}, "lengths"),
        ({"methods": ()}, "at least one"),
        ({"repeats": 0}, "repeats must be >= 1"),
    ],
)
def test_bad_settings_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _settings(**kwargs)


def test_configurations_a_target_reads_get_the_target_limit_and_longer_ones_are_not_run():
    # AGF at N=2048 (training) is read by the growth target; N=4096 is not, nor is 8192.
    records = run_benchmarks(_settings(methods=("agf",), lengths=(2048, 4096, 8192),
                                       modes=("train",), limit_s=1e-6, target_limit_s=600.0))
    assert [r.measured for r in records] == [True, False, False]
    assert "per-configuration limit of 1e-06 s" in records[1].skipped
    assert records[2].skipped == "not run: N=4096 was not measured"


def test_target_lengths_join_the_requested_ones():
    records = run_benchmarks(_settings(methods=("agf",), lengths=(32,), modes=("train",),
                                       target_lengths=True))
    assert [r.N for r in records] == [32, 2048, 16384]


def test_auto_device_is_cuda_only_when_available():
    import torch

    from filterformer.bench.sweep import resolve_device

    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == "cpu"
    if torch.cuda.is_available():
        assert resolve_device("cuda") == "cuda"
    else:
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")
    with pytest.raises(ValueError, match="device must be one of auto, cpu, cuda"):
        resolve_device("tpu")
