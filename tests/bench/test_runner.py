import pytest

from filterformer.bench import BenchSettings, BenchShape, run_table
from filterformer.machine import resolve_device

QUICK = BenchShape.quick()


def _settings(**kwargs):
    base = {"shape": QUICK, "device": "cpu", "repeats": 2, "min_run_s": 0.01}
    return BenchSettings(**{**base, **kwargs})


def test_run_covers_every_mode_and_length_in_order():
    records = run_table(_settings(methods=("efficient",), lengths=(48, 16)))
    keys = [(r.method, r.mode, r.N) for r in records]
    assert keys == [("efficient", mode, N) for mode in ("train", "inference") for N in (16, 48)]
    assert all(r.measured and len(r.times_ms) >= 2 for r in records)


def test_once_a_length_is_not_measured_the_longer_ones_are_not_run():
    # Explicit N×N matrices: a forward at N=16384 would hold 40 GiB at B=2, h=4.
    records = run_table(_settings(methods=("gfsa-explicit",), lengths=(16, 16384, 32768),
                                  modes=("inference",)))
    assert [r.measured for r in records] == [True, False, False]
    assert "not run past N=8192" in records[1].skipped
    assert records[2].skipped == "not run: N=16384 was not measured" and records[2].N == 32768


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"methods": ("flash",)}, "valid choices"),
        ({"modes": ("eval",)}, "modes must be one of train, inference, compiled"),
        ({"lengths": (0,)}, "lengths"),
        ({"methods": (), "targets": "none"}, "at least one"),
        ({"repeats": 0}, "repeats must be >= 1"),
        ({"targets": "all"}, "targets must be one of cpu, gpu, none"),
    ],
)
def test_bad_settings_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _settings(**kwargs)


def test_auto_device_is_cuda_only_when_available(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="device must be one of auto, cpu, cuda"):
        resolve_device("tpu")


#: Run in a fresh interpreter: allocate, fill and free a tensor of argv[1] bytes 8 times, with
#: the bench's heap policy when argv[2] is ``keep`` (glibc's defaults otherwise); prints the
#: policy, then each time's minor page faults.
_REALLOCATIONS = """
import resource, sys
import torch
from filterformer.process_memory import keep_freed_memory
policy = keep_freed_memory() if sys.argv[2] == "keep" else "default"
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
counts = []
for _ in range(8):
    before = faults()
    torch.empty(int(sys.argv[1]) // 4).fill_(1.0)
    counts.append(faults() - before)
print(policy, *counts)
"""


def _reallocation_faults(size: int, policy: str) -> tuple[str, list[int]]:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _REALLOCATIONS, str(size), policy],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[0], [int(count) for count in out[1:]]


def test_a_cpu_run_keeps_freed_memory_so_a_large_tensor_does_not_fault_anew():
    """Each side in a fresh process, so that what this one allocated before cannot decide it.
    The first times may fault (the heap grows; an aligned block may not fit the block just
    freed); from then on, glibc's defaults map every block of 32 MiB or more afresh and fault
    all its pages again, the bench's policy reuses the pages it faulted."""
    import random
    import resource

    size = random.randint(40, 96) * 2**20  # over glibc's largest mmap threshold, 32 MiB
    pages = size // resource.getpagesize()
    policy, kept = _reallocation_faults(size, "keep")
    if policy == "system":
        pytest.skip("the C library is not glibc")
    _, default = _reallocation_faults(size, "default")
    assert min(default[-4:]) >= 0.9 * pages
    assert max(kept[-4:]) < pages // 8


def test_targets_reading_the_same_cases_share_one_measurement_in_either_order(monkeypatch):
    from filterformer.bench import Case, Target, run
    from filterformer.bench.measure import measure_cases

    a, b = Case("sdpa", 16, "inference"), Case("efficient", 16, "inference")
    calls = []

    def counted(cases, *args, **kwargs):
        calls.append(cases)
        return measure_cases(cases, *args, **kwargs)

    monkeypatch.setattr(run, "measure_cases", counted)
    monkeypatch.setattr(run, "TARGETS", (Target("a/b", a, b, 1.0, "<="),
                                         Target("b/a", b, a, 1.0, "<=")))
    monkeypatch.setattr(run, "GPU_TARGETS", ())
    forward, backward = run.run_targets(_settings(methods=(), target_s=0.01))
    assert calls == [[a, b]]
    assert forward.value == pytest.approx(1 / backward.value)  # five rounds: an odd median
    assert [s.method for s in backward.sides] == ["efficient", "sdpa"]
    assert forward.passed is (forward.value <= 1.0)


def test_a_target_with_a_time_factor_gets_that_many_times_the_runs_time_and_rounds(monkeypatch):
    import random

    from filterformer.bench import Case, Target, run
    from filterformer.bench.measure import measure_cases

    factor, budget = random.choice((2.0, 3.0, 4.0)), random.uniform(0.01, 0.02)
    plain = Target("plain", Case("sdpa", 16, "inference"), Case("efficient", 16, "inference"),
                   1.0, "<=")
    longer = Target("longer", Case("sdpa", 32, "inference"), Case("efficient", 32, "inference"),
                    1.0, "<=", time_factor=factor)
    seen = {}

    def recorded(cases, *args, rounds, **kwargs):
        seen[cases[0].N] = rounds
        return measure_cases(cases, *args, rounds=rounds, **kwargs)

    monkeypatch.setattr(run, "measure_cases", recorded)
    monkeypatch.setattr(run, "TARGETS", (plain, longer))
    monkeypatch.setattr(run, "GPU_TARGETS", ())
    results = run.run_targets(_settings(methods=(), target_s=budget))
    assert all(r.value is not None for r in results)
    assert (seen[16].budget_s, seen[16].most) == (budget, 15)
    assert seen[32].budget_s == pytest.approx(budget * factor)
    assert seen[32].most == round(15 * factor) and seen[32].least == seen[16].least


def test_the_compiled_step_targets_take_three_times_the_rounds():
    from filterformer.bench import TARGETS

    compiled = [t for t in TARGETS if "compiled" in (t.numerator.mode, t.denominator.mode)]
    assert len(compiled) == 8
    assert {t.time_factor for t in compiled} == {3.0}
    assert {t.time_factor for t in TARGETS if t not in compiled} == {1.0}
