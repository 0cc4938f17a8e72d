"""The GPU targets' cases run their code on the CPU at tiny sizes (bf16 autocast too), and the
GPU targets are judged in a CUDA run only."""

import random

import torch

from filterformer.bench import (
    GPU_TARGETS,
    BenchSettings,
    BenchShape,
    Case,
    build_case,
    measure_cases,
)
from filterformer.bench.measure import Rounds
from filterformer.bench.model_cases import GENERATED_TOKENS
from filterformer.bench.run import run_targets

QUICK = BenchShape.quick()


def test_a_classifier_case_takes_optimiser_steps_and_generation_generates():
    N = random.randint(8, 24)
    case = build_case("bert-gfsa", QUICK, N, "train")
    before = [p.detach().clone() for p in case.module.parameters()]
    case.step()
    # The trainer's step: the update taken, then the gradients cleared.
    assert all(p.grad is None for p in case.module.parameters())
    assert any(not torch.equal(a, p) for a, p in zip(before, case.module.parameters(),
                                                     strict=True))
    generate = build_case("generate-gfsa", QUICK, N, "inference")
    (tokens,) = generate.forward()
    assert tokens.shape == (1, N + GENERATED_TOKENS)


def test_the_gpu_targets_cases_measure_side_by_side_under_bf16_on_the_cpu():
    rounds = Rounds(least=2, most=2)
    for target in (GPU_TARGETS[0], GPU_TARGETS[-2]):
        sides = [c._replace(N=16) for c in (target.numerator, target.denominator)]
        pair = measure_cases(sides, QUICK, precision=target.precision, rounds=rounds)
        assert all(r.measured and len(r.times_ms) == 2 for r in pair.records)


def test_gpu_targets_are_judged_on_cuda_only(monkeypatch):
    import torch.cuda

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    settings = BenchSettings(methods=(), device="cpu", targets="gpu")
    results = run_targets(settings)
    gpu = [r for r in results if r.target in GPU_TARGETS]
    assert [r.target for r in gpu] == list(GPU_TARGETS)
    assert all(r.value is None and r.passed is None and r.note == "not measured here (CPU)"
               for r in gpu)
    assert all(r.note == "not run (CPU targets)" for r in results if r.target not in GPU_TARGETS)


def test_a_quick_run_of_the_gpu_targets_runs_their_code_on_any_device(monkeypatch):
    from filterformer.bench import run

    monkeypatch.setattr(run, "GPU_TARGETS", (GPU_TARGETS[-1],))
    settings = BenchSettings(methods=(), device="cpu", targets="gpu", quick=True, target_s=0.01)
    *_, result = run_targets(settings)
    assert result.value > 0 and result.note == "tiny sizes (--quick): no verdict"
    assert [s.method for s in result.sides] == ["generate-gfsa", "generate-softmax"]
    assert all(side.N == 16 for side in result.sides)
    assert Case("generate-gfsa", 1024, "inference") == GPU_TARGETS[-1].numerator
