import random
from dataclasses import replace

import pytest

from filterformer.bench import BenchRecord, evaluate_targets
from filterformer.bench.extras import EXTRAS, GPU_EXTRAS
from filterformer.bench.gpu_rows import BERT, DECODE, GPU_GROUPS, _alternate, _module_side
from filterformer.bench.performance_targets import GPU_TARGETS, TARGETS
from filterformer.bench.step_cases import BenchShape


def _gpu_rows():
    """Every (row, N, mode) a full run of the GPU extras writes, from their data."""
    rows = {(f"{g.prefix}{m}", N, mode) for g in GPU_GROUPS.values() for m in g.methods
            for N in g.lengths for mode in g.modes}
    rows |= {(f"{BERT.prefix}{side[0]}", BERT.N, "train") for side in BERT.sides}
    rows |= {(f"{DECODE.prefix}{m}", DECODE.prompt, "warm") for m in DECODE.methods}
    return rows | {(f"{DECODE.prefix}{DECODE.methods[0]}", DECODE.prompt, "first")}


def test_every_gpu_target_reads_rows_a_gpu_run_writes_and_is_bound_to_cuda():
    rows = _gpu_rows()
    for target in GPU_TARGETS:
        assert target.device == "cuda"
        for measure in (target.numerator, target.denominator):
            assert (measure.method, measure.N, measure.mode) in rows
    assert all(target.device is None for target in TARGETS)
    names = [(t.name, t.numerator.mode) for t in GPU_TARGETS]
    assert len(set(names)) == len(names)


def test_gpu_targets_are_judged_on_cuda_only():
    # Fresh made-up times for every row the GPU targets read: each ratio is computed on CUDA.
    times = {row: random.uniform(0.5, 5.0) for row in _gpu_rows()}
    records = [BenchRecord(m, N, mode, "cuda", median_ms=ms) for (m, N, mode), ms in times.items()]
    on_cuda = evaluate_targets(records, GPU_TARGETS, device="cuda")
    for result in on_cuda:
        num, den = result.target.numerator, result.target.denominator
        expected = times[num.method, num.N, num.mode] / times[den.method, den.N, den.mode]
        assert result.ratio == pytest.approx(expected) and result.passed is not None
        assert result.note is None
    on_cpu = evaluate_targets(records, GPU_TARGETS, device="cpu")
    assert all(r.ratio is None and r.passed is None and r.note == "not measured here (CPU)"
               for r in on_cpu)


def test_gpu_kernel_rows_alternate_in_one_group_on_the_cpu():
    records = EXTRAS["gpu-kernel"].run(True, "cpu")
    assert [(r.method, r.mode) for r in records] == [("gpu-kernel-sdpa", "train"),
                                                      ("gpu-kernel-gfsa", "train")]
    assert all(r.measured and r.median_ms > 0 and len(r.times_ms) == 2 for r in records)
    assert records[0].round_group == records[1].round_group
    assert records[1].baseline == "gpu-kernel-sdpa" and "bf16 autocast" in records[1].notes
    assert set(GPU_EXTRAS) <= set(EXTRAS)


def test_a_side_that_fails_is_recorded_and_the_others_still_alternate():
    group = GPU_GROUPS["gpu-kernel-"].quick()
    N = random.choice((16, 24, 32))
    good = _module_side(group, "sdpa", N, "inference", "cpu")
    broken = _module_side(replace(group, shape=BenchShape(head_dim=-1)), "gfsa", N, "inference",
                          "cpu")
    records, first = _alternate([broken, good], device="cpu", rounds=2, warmup=1)
    failed, measured = records
    assert failed.method == "gpu-kernel-gfsa" and failed.failed and not failed.measured
    assert failed.skipped.startswith("RuntimeError")
    assert measured.method == "gpu-kernel-sdpa" and measured.measured and measured.N == N
    assert first[0] is None and first[1] > 0


def test_a_run_of_gpu_rows_alone_judges_the_gpu_targets_alone(tmp_path):
    import json

    from filterformer.bench import BenchSettings, run_and_write

    settings = BenchSettings(methods=(), extras=("gpu-kernel",), quick_extras=True,
                             device="cpu", shape=BenchShape.quick())
    report = run_and_write(settings, tmp_path, paired="none", log=lambda line: None)
    targets = json.loads((tmp_path / "targets.json").read_text())
    assert [t["target"] for t in targets] == [t.name for t in GPU_TARGETS]
    assert all(t["note"] == "not measured here (CPU)" for t in targets)
    assert f"## {EXTRAS['gpu-kernel'].title}" in report and "| gpu-kernel-gfsa | kernel |" in report
    records = json.loads((tmp_path / "bench.json").read_text())
    assert {r["method"] for r in records} == {"gpu-kernel-sdpa", "gpu-kernel-gfsa"}
    assert all(r["gpu"] is None and r["median_ms"] > 0 for r in records)
