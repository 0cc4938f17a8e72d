import pytest

from filterformer.bench import BenchSettings, BenchShape, run_benchmarks

QUICK = BenchShape.quick()


def _settings(**kwargs):
    base = {"shape": QUICK, "device": "cpu", "repeats": 2, "min_repeats": 1, "warmup": 0}
    return BenchSettings(**{**base, **kwargs})


def test_each_cpu_configuration_runs_in_its_own_worker():
    (record,) = run_benchmarks(_settings(methods=("gfsa",), lengths=(32,), modes=("train",)))
    assert record.measured and record.median_ms > 0 and record.peak_mb >= 0
    assert (record.method, record.N, record.mode, record.device) == ("gfsa", 32, "train", "cpu")
    assert (record.batch, record.heads, record.dim, record.level) == (1, 2, 8, "kernel")
    assert 1 <= len(record.times_ms) <= 2 and record.threads >= 1
    assert "fresh process" in record.memory
    assert record.allocator == "reuse"


def test_in_process_run_covers_every_mode_and_length_in_order():
    records = run_benchmarks(_settings(methods=("efficient",), lengths=(48, 16), isolate=False))
    keys = [(r.method, r.mode, r.N) for r in records]
    assert keys == [("efficient", mode, N) for mode in ("train", "inference") for N in (16, 48)]
    assert all(r.measured for r in records)
    assert all("in-process" in r.memory and r.allocator == "system" for r in records)


def test_configurations_over_budget_are_skipped_with_a_reason_without_running():
    # Explicit N×N matrices at N=4096 need 512 MiB for the two alone.
    records = run_benchmarks(
        _settings(methods=("gfsa-explicit",), lengths=(4096,), modes=("inference",),
                  shape=BenchShape(batch=2, heads=4, head_dim=8), memory_budget_mb=100.0)
    )
    assert not records[0].measured and "memory budget" in records[0].skipped


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"methods": ("flash",)}, "valid choices"),
        ({"modes": ("eval",)}, "modes must be one of train, inference"),
        ({"lengths": (0,)}, "lengths"),
        ({"methods": ()}, "at least one"),
    ],
)
def test_bad_settings_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _settings(**kwargs)


def test_configurations_a_target_reads_get_the_target_budget():
    # AGF at N=2048 (training) is read by the growth target; N=4096 is not.
    records = run_benchmarks(_settings(methods=("agf",), lengths=(32, 2048, 4096),
                                       modes=("train",), config_budget_s=1e-6,
                                       target_budget_s=600.0))
    assert [r.measured for r in records] == [True, True, False]
    assert "budget of 0 s" in records[2].skipped


def test_target_lengths_join_the_requested_ones():
    records = run_benchmarks(_settings(methods=("agf",), lengths=(32,), modes=("train",),
                                       target_lengths=True, isolate=False))
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
