"""``benchmarks/decoding_operations.py`` at a short prompt: NeuTRENO's decoding step runs
softmax's operations and one subtraction and one addition a later layer and token; refusals."""

from __future__ import annotations

import json

from filterformer.bench.model_cases import TOKENS
from filterformer.bench.target_list import DECODING_SHAPE

from ..scripts import run_benchmark


def test_neutreno_adds_two_operations_a_later_layer_and_token(tmp_path):
    result = run_benchmark("decoding_operations", "--output", str(tmp_path), "--prompt", "12",
                           "--methods", "neutreno")
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "decoding_operations.json").read_text())
    softmax, neutreno = report["methods"]
    assert softmax["method"] == "softmax" and neutreno["method"] == "neutreno"
    # λ(V⁰ − V) on every layer after the first (the first records V⁰): V⁰ − V, then the sum.
    per_step = (DECODING_SHAPE.depth - 1) * TOKENS
    assert neutreno["extra"] == {"aten.add.Tensor": per_step, "aten.sub.Tensor": per_step}
    assert neutreno["missing"] == {}
    assert neutreno["operations"] == softmax["operations"] + 2 * per_step
    table = (tmp_path / "decoding_operations.md").read_text()
    assert report["machine"]["cpu"] in table
    assert f"| neutreno | {neutreno['operations']} | aten.add.Tensor ×{per_step}" in table


def test_bad_arguments_exit_2_naming_them(tmp_path):
    bad_method = run_benchmark("decoding_operations", "--output", str(tmp_path), "--prompt", "4",
                               "--methods", "nope")
    assert bad_method.returncode == 2 and "--methods: unknown method 'nope'" in bad_method.stderr
    bad_prompt = run_benchmark("decoding_operations", "--output", str(tmp_path), "--prompt", "0")
    assert bad_prompt.returncode == 2 and "--prompt must be at least 1" in bad_prompt.stderr
    a_file = tmp_path / "file"
    a_file.write_text("")
    not_a_directory = run_benchmark("decoding_operations", "--output", str(a_file))
    assert not_a_directory.returncode == 2 and "is a file" in not_a_directory.stderr
