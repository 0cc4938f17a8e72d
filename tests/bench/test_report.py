import json
import random

from filterformer.bench import BenchRecord, Case, Target, markdown_report, save_bench
from filterformer.bench.figures import plot_records
from filterformer.bench.records import BENCH_VERSION
from filterformer.bench.report import quantity_table
from filterformer.bench.targets import TargetResult
from filterformer.machine import machine_info

MACHINE = {"device": "cpu", "cpu": "Test CPU", "cpu_count": 2, "torch_threads": 2}


def _records():
    common = {"device": "cpu", "batch": 2, "heads": 4, "dim": 64}
    return [
        BenchRecord("sdpa", 256, "train", median_ms=2.0, peak_mb=4.0, **common),
        BenchRecord("sdpa", 1024, "train", median_ms=20.0, peak_mb=16.0, **common),
        BenchRecord("gfsa", 256, "train", median_ms=5.0, peak_mb=10.0, **common),
        BenchRecord("gfsa", 1024, "train", skipped="over the time budget", **common),
        BenchRecord("sdpa", 1024, "inference", median_ms=8.0, peak_mb=1.0, **common),
    ]


def _results():
    target = Target("gfsa / sdpa", Case("gfsa", 4096, "train"), Case("sdpa", 4096, "train"),
                    2.1, "<=")
    # Away from the bound, where the value is written with two decimals (see the next tests).
    value = random.choice([random.uniform(1.0, 2.05), random.uniform(2.15, 3.0)])
    return [TargetResult(target, value, (value - 0.1, value + 0.1)),
            TargetResult(target, None, note="not measured here (CPU)")]


def test_table_has_a_row_per_method_a_column_per_length_and_baseline_ratios():
    table = quantity_table(_records(), "median_ms", "train").splitlines()
    assert table[0] == "| method | level | baseline | N=256 | N=1024 |"
    assert table[2] == "| sdpa | kernel |  | 2.00 | 20.0 |"
    assert table[3] == "| gfsa | kernel | sdpa | 5.00 (2.50×) | skip |"
    memory = quantity_table(_records(), "peak_mb", "train").splitlines()
    assert memory[3] == "| gfsa | kernel | sdpa | 10.0 (2.50×) | skip |"


def test_report_names_the_machine_and_lists_modes_targets_and_skipped_reasons():
    results = _results()
    text = markdown_report(_records(), results, MACHINE, "filterformer bench")
    assert "Test CPU" in text and "`filterformer bench`" in text
    assert "training (forward + backward)" in text and "inference (forward)" in text
    verdict = "pass" if results[0].value <= 2.1 else "**miss**"
    assert f"| gfsa / sdpa | train | {results[0].value:.2f} (" in text
    assert text.count(f"| <= 2.1 | {verdict} |") == 1
    assert "| gfsa / sdpa | train | — | <= 2.1 | not measured here (CPU) |" in text
    assert "- gfsa, N=1024, train: over the time budget" in text
    assert "(B=2, h=4, N, d=64)" in text and "D=256" in text
    commit = f"{random.getrandbits(160):040x}"
    for modified, tail in ((False, ""), (True, " (with uncommitted changes)")):
        machine = {**MACHINE, "source": {"commit": commit, "modified": modified}}
        text = markdown_report(_records(), results, machine, "filterformer bench")
        assert f"- Command: `filterformer bench` at commit {commit[:7]}{tail}\n" in text


def test_a_value_that_rounds_to_its_bound_is_written_with_the_decimals_that_tell_them_apart():
    bound = round(random.uniform(0.5, 2.0), 2)
    target = Target("eager / compiled", Case("model-gfsa", 4096, "train"),
                    Case("model-gfsa", 4096, "compiled"), bound, ">=")
    below = bound - random.uniform(1e-4, 4e-3)  # written with two decimals, it reads as the bound
    text = markdown_report([], [TargetResult(target, below, (below - 0.1, below + 0.1))], MACHINE,
                           "filterformer bench")
    row = next(line for line in text.splitlines() if line.startswith("| eager / compiled |"))
    value = row.split(" | ")[2].split(" (")[0]
    assert float(value) < bound and round(below, len(value.split(".")[1])) == float(value)
    assert row.endswith(f"| >= {bound:g} | **miss** |")
    exact = markdown_report([], [TargetResult(target, bound)], MACHINE, "filterformer bench")
    assert f"| {bound:.2f} | >= {bound:g} | pass |" in exact


def test_bench_json_holds_machine_records_and_targets(tmp_path):
    machine, records = machine_info("cpu"), _records()
    rows = [r.to_row() for r in _results()]
    path = save_bench(tmp_path / "bench.json", machine, records, rows)
    data = json.loads(path.read_text())
    assert set(data) == {"version", "complete", "machine", "records", "targets"}
    assert data["complete"] is True
    assert data["machine"]["cpu"] == machine["cpu"] and len(data["machine"]["load_average"]) == 3
    assert data["version"] == BENCH_VERSION and data["machine"] == json.loads(json.dumps(machine))
    assert [BenchRecord(**row) for row in data["records"]] == records
    assert data["targets"] == json.loads(json.dumps(rows))
    assert data["targets"][0]["passed"] is (rows[0]["value"] <= 2.1)


def test_bench_json_of_a_run_not_ended_says_so(tmp_path):
    path = save_bench(tmp_path / "bench.json", MACHINE, _records(), [], complete=False)
    assert json.loads(path.read_text())["complete"] is False


def test_an_unfinished_report_says_so_at_its_top_and_a_finished_one_does_not():
    why = f"{random.randint(1, 9)} configurations written"
    text = markdown_report(_records(), _results(), MACHINE, "filterformer bench", unfinished=why)
    assert text.splitlines()[2] == f"**Unfinished: {why}.**"
    finished = markdown_report(_records(), _results(), MACHINE, "filterformer bench")
    assert "Unfinished" not in finished


def test_a_gpu_run_names_the_gpu_in_its_title_and_beside_every_table():
    gpu = f"NVIDIA Test {random.randint(100, 999)}"
    machine = {**MACHINE, "device": "cuda", "gpu": gpu}
    text = markdown_report(_records(), _results(), machine, "filterformer bench")
    headings = [line for line in text.splitlines() if line.startswith("#")]
    titled = [line for line in headings if line.startswith("# ")]
    assert titled == [f"# filterformer bench — {gpu}"]
    tables = [line for line in headings if line.startswith("## ") and line not in (
        "## What one step runs", "## Skipped", "## Failed")]
    assert len(tables) == 5  # time and memory in two modes, and the targets
    assert all(line.endswith(f" — {gpu}") for line in tables)
    assert f"- Machine: {gpu} (cuda;" in text


def test_plot_writes_a_png(tmp_path):
    path = plot_records(_records(), tmp_path / "bench.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
