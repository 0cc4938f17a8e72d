"""``benchmarks/recheck_targets.py``: a target measured again with its control (the target's
denominator over a second copy of itself), and its refusal of a name that matches nothing."""

from __future__ import annotations

import json
import math
import sys

import torch

from filterformer.bench import method_table
from filterformer.bench import run as bench_run
from filterformer.bench.model_cases import TOKENS
from filterformer.bench.step_cases import BenchShape
from filterformer.bench.targets import Case, Target

from ..scripts import BENCHMARKS, load_script, run_benchmark

TINY = BenchShape.quick()


def _decoding_target(N: int) -> Target:
    return Target(f"NeuTRENO / softmax decoding time per token (prompt N={N})",
                  Case("decode-neutreno", N, "inference"), Case("decode-softmax", N, "inference"),
                  1.05, "<=", shape=TINY)


def test_a_control_is_its_targets_denominator_built_again(monkeypatch):
    script = load_script("recheck_targets", BENCHMARKS)
    monkeypatch.setattr(method_table, "BENCH_METHODS", dict(method_table.BENCH_METHODS))
    target = _decoding_target(int(torch.randint(4, 12, ()).item()))
    its_control = script.control(target)
    assert its_control.denominator == target.denominator and its_control.direction == "info"
    assert its_control.shape == target.shape and its_control.quantity == target.quantity
    copy = its_control.numerator.method
    assert copy != target.denominator.method
    assert its_control.numerator[1:] == target.denominator[1:]
    # The copy builds what its row builds: the same model, layer by layer, at the same shape.
    built = [method_table.build_case(name, TINY, target.denominator.N, "inference")
             for name in (copy, target.denominator.method)]
    layers = [[(name, type(m)) for name, m in case.module.named_modules()] for case in built]
    shapes = [{k: v.shape for k, v in case.module.state_dict().items()} for case in built]
    assert layers[0] == layers[1] and shapes[0] == shapes[1]
    outputs = [case.forward()[0] for case in built]
    assert outputs[0].shape == outputs[1].shape == (TINY.batch, TOKENS)
    # Registering twice keeps one copy.
    assert script.control(target) == its_control
    assert [name for name in method_table.BENCH_METHODS if name.startswith("decode-softmax")
            ] == ["decode-softmax", "decode-softmax again"]


def test_a_run_with_controls_writes_the_target_and_its_control(tmp_path, monkeypatch):
    script = load_script("recheck_targets", BENCHMARKS)
    monkeypatch.setattr(method_table, "BENCH_METHODS", dict(method_table.BENCH_METHODS))
    target = _decoding_target(8)
    monkeypatch.setattr(bench_run, "TARGETS", (target,))
    monkeypatch.setattr(bench_run, "GPU_TARGETS", bench_run.GPU_TARGETS)  # main() empties it
    monkeypatch.setattr(sys, "argv", ["recheck_targets.py", "--output", str(tmp_path),
                                      "--target-s", "0.2", "--control", "decoding"])
    assert script.main() == 0
    rows = json.loads((tmp_path / "bench.json").read_text())["targets"]
    assert [row["name"] for row in rows] == [target.name, script.control(target).name]
    for row in rows:
        assert math.isfinite(row["value"]) and row["value"] > 0
    assert rows[0]["passed"] in (True, False) and rows[1]["passed"] is None
    assert rows[1]["numerator"][0] == "decode-softmax again"
    assert rows[1]["denominator"] == rows[0]["denominator"]
    assert "decode-softmax again" in (tmp_path / "bench.md").read_text()


def test_a_name_that_matches_no_target_is_refused(tmp_path):
    result = run_benchmark("recheck_targets", "--output", str(tmp_path), "--control",
                           "no such target")
    assert result.returncode == 2
    assert "no CPU target's name contains any of ['no such target']" in result.stderr
    assert not (tmp_path / "bench.json").exists()
