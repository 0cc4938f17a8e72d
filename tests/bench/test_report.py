import json

from filterformer.bench import (
    BenchRecord,
    evaluate_targets,
    load_records,
    markdown_report,
    save_records,
)
from filterformer.bench.figures import plot_records
from filterformer.bench.markdown_report import quantity_table


def _records():
    common = {"device": "cpu", "batch": 2, "heads": 4, "dim": 64, "level": "kernel"}
    return [
        BenchRecord("sdpa", 256, "train", median_ms=2.0, peak_mb=4.0, **common),
        BenchRecord("sdpa", 1024, "train", median_ms=20.0, peak_mb=16.0, **common),
        BenchRecord("gfsa", 256, "train", median_ms=5.0, peak_mb=10.0, baseline="sdpa", **common),
        BenchRecord("gfsa", 1024, "train", skipped="over the time budget", baseline="sdpa",
                    **common),
        BenchRecord("sdpa", 1024, "inference", median_ms=8.0, peak_mb=1.0, **common),
    ]


def test_table_has_a_row_per_method_a_column_per_length_and_baseline_ratios():
    table = quantity_table(_records(), "median_ms", "train").splitlines()
    assert table[0] == "| method | level | baseline | N=256 | N=1024 |"
    assert table[2] == "| sdpa | kernel |  | 2.00 | 20.0 |"
    assert table[3] == "| gfsa | kernel | sdpa | 5.00 (2.50×) | skip |"
    memory = quantity_table(_records(), "peak_mb", "train").splitlines()
    assert memory[3] == "| gfsa | kernel | sdpa | 10.0 (2.50×) | skip |"


def test_report_lists_modes_targets_and_skipped_reasons():
    records = _records()
    machine = {"device": "cpu", "cpu": "Test CPU", "cpu_count": 2, "torch_threads": 2}
    text = markdown_report(records, evaluate_targets(records), machine, "filterformer bench")
    assert "Test CPU" in text and "`filterformer bench`" in text
    assert "training (forward + backward)" in text and "inference (forward)" in text
    assert "## Targets" in text and "not measured" in text
    assert "- gfsa, N=1024, train: over the time budget" in text
    assert "(B=2, h=4, N, d=64)" in text and "D=256" in text


def test_records_round_trip_through_json(tmp_path):
    records = _records()
    path = save_records(records, tmp_path / "bench.json")
    data = json.loads(path.read_text())
    assert isinstance(data, list) and {"method", "N", "mode", "device", "median_ms",
                                       "peak_mb"} <= set(data[0])
    assert load_records(path) == records


def test_plot_writes_a_png(tmp_path):
    path = plot_records(_records(), tmp_path / "bench.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
