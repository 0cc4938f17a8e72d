"""``benchmarks/host_overhead.py`` at two rounds of one step: what it writes, and its refusals."""

from __future__ import annotations

import json
import math

from filterformer.functional.triton_support import triton_available

from ..scripts import run_benchmark


def test_two_rounds_write_every_case_with_its_operations(tmp_path):
    result = run_benchmark("host_overhead", "--output", str(tmp_path), "--rounds", "2",
                           "--repeats", "1")
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "host_overhead.json").read_text())
    rows = {(row["case"], row["mode"]): row for row in report["rows"]}
    assert len(rows) == len(report["rows"]) == 14
    for row in rows.values():
        assert math.isfinite(row["us_per_step"]) and row["us_per_step"] > 0
        assert math.isfinite(row["ratio"]) and row["ratio"] > 0
        assert row["operations"] >= 1
    # One SDPA call in inference is one operation; every method's step runs more than that.
    assert rows[("sdpa", "inference")]["operations"] == 1
    assert all(row["operations"] > 1 for key, row in rows.items() if key[0] != "sdpa")
    # Training adds the backward's operations to the forward's.
    for case, _ in rows:
        assert rows[(case, "train")]["operations"] > rows[(case, "inference")]["operations"]
    table = (tmp_path / "host_overhead.md").read_text()
    assert report["machine"]["cpu"] in table and "| gfsa kernel (K=3) | train |" in table
    if not triton_available():
        assert report["cuda_path"] is None and "Triton is not installed" in table
        return
    paths = {(row["case"], row["mode"]): row for row in report["cuda_path"]}
    assert paths.keys() == rows.keys()
    for (case, mode), row in paths.items():
        (eager, eager_allocations), (kernels, kernel_allocations) = row["eager"], row["kernels"]
        assert 0 <= eager_allocations < eager and 0 <= kernel_allocations < kernels
        # Under autocast the inputs' casts join the step; no kernel of a method without one.
        assert eager >= rows[(case, mode)]["operations"]
        if case in ("sdpa", "softmax module"):  # no kernel of filterformer's
            assert kernels == eager and kernel_allocations == eager_allocations
        else:
            # GFSA's combination, AGF's layer, SAMSA's scores, gather and hard-mode attention:
            # a launch each where eager operations took several.
            assert kernels < eager
    assert "## Operations a step under bfloat16 autocast" in table


def test_a_round_count_below_two_is_refused_by_name(tmp_path):
    result = run_benchmark("host_overhead", "--output", str(tmp_path), "--rounds", "1")
    assert result.returncode == 2
    assert "--rounds" in result.stderr and not (tmp_path / "host_overhead.json").exists()


def test_an_output_that_is_a_file_is_refused_before_timing(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("")
    result = run_benchmark("host_overhead", "--output", str(taken))
    assert result.returncode == 2 and f"--output {taken} is a file" in result.stderr
