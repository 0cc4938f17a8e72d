import argparse
import json

import pytest

from filterformer.cli import bench


def _run(argv):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return bench.run(parser.parse_args(argv))


def test_quick_run_writes_json_report_and_plot(tmp_path, capsys):
    out = tmp_path / "results"
    argv = ["--quick", "--methods", "sdpa", "gfsa", "--lengths", "16", "32",
            "--modes", "inference", "--output", str(out)]
    assert _run(argv) == 0
    records = json.loads((out / "bench.json").read_text())
    assert [(r["method"], r["N"]) for r in records] == [
        ("sdpa", 16), ("sdpa", 32), ("gfsa", 16), ("gfsa", 32)
    ]
    assert all(r["mode"] == "inference" and r["median_ms"] > 0 for r in records)
    report = (out / "bench.md").read_text()
    assert "filterformer bench --quick --methods sdpa gfsa --lengths 16 32" in report
    assert "## Targets" in report
    assert (out / "bench.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((out / "machine.json").read_text())["device"] == "cpu"
    assert "| gfsa | kernel | sdpa |" in capsys.readouterr().out


def test_unknown_method_is_a_value_error_listing_the_choices(tmp_path):
    with pytest.raises(ValueError, match="unknown benchmark method 'flash'; valid choices: sdpa"):
        _run(["--quick", "--methods", "flash", "--output", str(tmp_path)])


def test_list_prints_every_method(capsys):
    from filterformer.bench import method_names

    assert _run(["--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(method_names())


def test_quick_and_full_shapes_and_lengths():
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    settings = bench.settings_from_args(parser.parse_args(["--quick"]))
    assert (settings.shape.batch, settings.shape.heads, settings.shape.head_dim) == (1, 2, 8)
    assert settings.lengths == (32, 64) and settings.repeats == 2
    full = bench.settings_from_args(parser.parse_args([]))
    assert (full.shape.batch, full.shape.heads, full.shape.head_dim) == (2, 4, 64)
    assert 4096 in full.lengths and 16384 in full.lengths
