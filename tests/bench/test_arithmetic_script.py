"""``benchmarks/arithmetic.py``: its counts against closed forms, their proportion to the batch,
CUDA's arithmetic for SAMSA, what it writes, and its refusals."""

from __future__ import annotations

import inspect
import json

import pytest
import torch

from filterformer.bench.step_cases import BenchShape
from filterformer.bench.target_list import GPU_TARGETS
from filterformer.bench.targets import Case

from ..scripts import BENCHMARKS, load_script, run_benchmark

arithmetic = load_script("arithmetic", BENCHMARKS)
D128 = next(t for t in GPU_TARGETS if "D=128" in t.name)


def _integer(low: int, high: int) -> int:  # from torch's generator, seeded per test
    return int(torch.randint(low, high + 1, ()))


def _uniform(low: float, high: float) -> float:
    return float(torch.empty(()).uniform_(low, high))


def _shape(batch: int) -> BenchShape:
    return BenchShape(batch=batch, heads=2 ** _integer(0, 2), head_dim=8, depth=1,
                      mlp_ratio=2.0)


@pytest.mark.parametrize("mode", ["inference", "train"])
def test_the_softmax_module_counts_its_closed_form(mode):
    # qkv (D -> 3D) and output (D -> D) projections, 2·B·N·D·4D; attention's two products,
    # 2·(2·B·h·N²·d) = 4·B·N²·D forward. Training: each product's two gradients (x takes one),
    # and attention's backward of five products (2.5 times its forward).
    shape, N = _shape(_integer(1, 3)), _integer(5, 40)
    B, D = shape.batch, shape.width
    counts = arithmetic.count(Case("softmax-module", N, mode), shape)
    products, attention = 8 * B * N * D * D, 4 * B * N * N * D
    if mode == "train":
        products, attention = 3 * products, attention + 10 * B * N * N * D
    assert counts == {"products": products, "attention": attention}


@pytest.mark.parametrize("case", [
    Case("samsa-hard-k128", 200, "inference"), Case("samsa-hard-k128", 300, "train"),
    Case("agf", 64, "train"), Case("gfsa", 64, "train"), Case("gfsa-module", 64, "inference"),
    Case("bert-samsa-hard-k256", 512, "train"), Case("bert-agf", 64, "train"),
])
def test_counts_are_proportional_to_the_batch(case):
    # What lets the script count one sample and scale it to the target's batch.
    one = _shape(1)
    two = BenchShape(**{**one.__dict__, "batch": 2})
    single, double = arithmetic.count(case, one), arithmetic.count(case, two)
    assert single["products"] + single["attention"] > 0
    assert double == {kind: 2 * n for kind, n in single.items()}


def test_samsa_hard_evaluation_projects_every_token_as_on_cuda():
    # On CUDA the evaluation kernel reads every token's keys and values (4·B·N·D² to project
    # them); on the CPU only the k sampled rows a head are projected (4·B·k·D²), where h·k <= N.
    shape, N, k = BenchShape(batch=2, heads=2, head_dim=8), _integer(300, 400), 128
    case = Case("samsa-hard-k128", N, "inference")
    cuda, cpu = arithmetic.count(case, shape), arithmetic.count(case, shape, cuda=False)
    D = shape.width
    assert cuda["products"] - cpu["products"] == 4 * shape.batch * (N - k) * D * D
    assert cuda["attention"] == cpu["attention"] == 4 * shape.batch * N * k * D
    # A tree whose SAMSA has no such choice projects every token: counted as such.
    with pytest.MonkeyPatch.context() as patch:
        patch.delattr(arithmetic.SamplingAttention, "projects_own_rows")
        assert arithmetic.count(case, shape) == arithmetic.count(case, shape, cuda=False) == cuda
    # In training both paths project every token (the differentiable sample reads 2k rows a
    # head: h·2k > N here).
    train = Case("samsa-hard-k128", N, "train")
    assert arithmetic.count(train, shape) == arithmetic.count(train, shape, cuda=False)


def test_a_run_writes_each_target_with_its_measured_rates(tmp_path):
    # The value is the median of the rounds' ratios, which the medians' ratio need not equal.
    median_ms, value = [_uniform(0.1, 2.0), _uniform(0.1, 2.0)], _uniform(0.2, 3.0)
    bench = {"machine": {"gpu": "a GPU", "date": "today", "source": {"commit": "abc"}},
             "targets": [{"name": D128.name, "value": value,
                          "sides": [{"N": 1024, "median_ms": ms} for ms in median_ms]}]}
    (tmp_path / "bench.json").write_text(json.dumps(bench))
    result = run_benchmark("arithmetic", "--output", str(tmp_path / "out"), "--match", "D=128",
                           "--measured", str(tmp_path / "bench.json"))
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "out" / "arithmetic.json").read_text())
    (row,) = report["rows"]
    totals = [side["products"] + side["attention"] for side in row["sides"]]
    assert row["target"] == D128.name and row["batch"] == D128.shape.batch
    assert row["allowed"] == pytest.approx(totals[0] / totals[1])
    assert row["holds_at_one_rate"] == (row["allowed"] >= D128.bound)
    assert row["tflops"] == pytest.approx([t / (ms * 1e-3) / 1e12
                                           for t, ms in zip(totals, median_ms, strict=True)])
    # A >= bound limits the denominator: at the rate it needs, its time is scaled by the value
    # over the bound, which brings the value (numerator's time over its) to the bound.
    assert row["needed"]["side"] == "denominator" and row["measured"] == value
    needed_ms = totals[1] / (row["needed"]["tflops"] * 1e12) * 1e3
    assert needed_ms == pytest.approx(median_ms[1] * value / D128.bound)
    assert (row["needed"]["tflops"] > row["tflops"][1]) == (value < D128.bound)
    # Each side counted at batch 1 and scaled: the same as counting at the target's batch.
    for side, case in zip(row["sides"], (D128.numerator, D128.denominator), strict=True):
        at_batch = arithmetic.count(case, D128.shape)
        assert {kind: side[kind] for kind in at_batch} == at_batch
    table = (tmp_path / "out" / "arithmetic.md").read_text()
    assert D128.name in table and "a GPU" in table and "had not ended" not in table


@pytest.mark.parametrize("complete", [True, False, None])
def test_a_measured_file_says_whether_its_run_had_ended(tmp_path, complete):
    bench = {"targets": [{"name": D128.name, "value": _uniform(0.2, 3.0),
                          "sides": [{"median_ms": _uniform(0.1, 2.0)} for _ in range(2)]}]}
    if complete is not None:  # files written before the field existed were written at the end
        bench["complete"] = complete
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(bench))
    measured = arithmetic.read_measured(path)
    assert measured["complete"] is (complete is not False) and D128.name in measured["targets"]
    report = {"machine": {"cpu": "a CPU", "torch": "2", "date": "today"}, "command": "c",
              "commit": None, "modified": False, "rows": [], "not_counted": [],
              "measured": {"path": str(path), **measured}}
    assert (arithmetic.UNFINISHED in arithmetic._markdown(report)) is (complete is False)


@pytest.mark.parametrize("content", [
    "{not json", json.dumps({"records": []}), json.dumps({"targets": 3}),
    json.dumps({"targets": [{"value": 1.0}]}), json.dumps({"targets": [{"name": "t", "sides": 1}]}),
    json.dumps({"targets": [{"name": D128.name, "value": float("nan"),
                             "sides": [{"median_ms": 1.0}, {"median_ms": 2.0}]}]}),
    *(json.dumps({"complete": value, "targets": []}) for value in (0, "false", None)),
])
def test_a_measured_file_that_cannot_serve_is_refused(tmp_path, content):
    path = tmp_path / "bench.json"
    path.write_text(content)
    with pytest.raises(ValueError):  # json's decoding error is one
        arithmetic.read_measured(path)


def test_the_run_refuses_a_measured_file_by_name(tmp_path):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"targets": [{"name": D128.name, "value": float("inf"),
                                             "sides": [{"median_ms": 1.0}, {"median_ms": 2.0}]}]}))
    result = run_benchmark("arithmetic", "--output", str(tmp_path / "out"), "--match", "D=128",
                           "--measured", str(path))
    assert result.returncode == 2 and f"--measured {path}:" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("match", ["no such target", "cached generation"])
def test_a_match_of_no_counted_target_is_refused(tmp_path, match):
    result = run_benchmark("arithmetic", "--output", str(tmp_path), "--match", match)
    assert result.returncode == 2 and "--match: no counted GPU target" in result.stderr
    assert not (tmp_path / "arithmetic.json").exists()


def test_a_tree_whose_samsa_chooses_otherwise_is_refused(monkeypatch):
    # A projects_own_rows without kernels_allowed: CUDA's choice cannot be made on the CPU.
    def projects_own_rows(self, x):
        return False

    monkeypatch.setattr(arithmetic.SamplingAttention, "projects_own_rows", projects_own_rows)
    assert "kernels_allowed" not in inspect.signature(projects_own_rows).parameters
    with pytest.raises(arithmetic.CountError, match="kernels_allowed"):
        arithmetic.count(Case("samsa-hard-k128", 64, "inference"), _shape(1))


def test_a_bound_from_above_limits_the_numerator():
    # GFSA / SDPA <= 2.2: at the rate GFSA's side needs, its time is 2.2 × SDPA's as measured.
    flops = [_integer(10**9, 10**12), _integer(10**9, 10**12)]
    median_ms, value = [_uniform(0.1, 5.0), _uniform(0.1, 5.0)], _uniform(0.5, 4.0)
    row = {"target": "t", "direction": "<=", "bound": 2.2,
           "sides": [{"products": n - n // 3, "attention": n // 3} for n in flops]}
    rated = arithmetic.with_rates(row, {"targets": {"t": {"value": value,
                                                          "median_ms": median_ms}}})
    # The numerator's time is scaled by the bound over the value.
    assert rated["needed"]["side"] == "numerator"
    needed_ms = flops[0] / (rated["needed"]["tflops"] * 1e9)
    assert needed_ms == pytest.approx(median_ms[0] * 2.2 / value)
    assert (rated["needed"]["tflops"] > rated["tflops"][0]) == (value > 2.2)
    assert rated["tflops"] == pytest.approx([n / ms / 1e9 for n, ms in zip(flops, median_ms,
                                                                          strict=True)])
    assert arithmetic.with_rates(row, {"targets": {}}) is row  # not in that run: no rates
