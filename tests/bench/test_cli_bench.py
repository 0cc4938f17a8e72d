import argparse
import json

import pytest

from filterformer.bench.extras import EXTRAS
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
    assert [(r["method"], r["N"]) for r in records[:4]] == [
        ("sdpa", 16), ("sdpa", 32), ("gfsa", 16), ("gfsa", 32)
    ]
    assert all(r["mode"] == "inference" and r["median_ms"] > 0 for r in records[:4])
    # The extra benchmarks --quick runs: decoding and the training loop, alternated in rounds.
    extras = {(r["method"], r["mode"]): r for r in records[4:]}
    decoding = {m for m, mode in extras if mode == "decode"}
    assert decoding == {f"decode-{f}-{m}" for f in ("native", "hf-llama")
                        for m in ("softmax", "gfsa", "neutreno")}
    loop = [extras[m, "train"] for m in ("loop-trainer", "loop-bare")]
    assert all(r["median_ms"] > 0 and r["round_group"] == loop[0]["round_group"] for r in loop)
    assert not any(m.startswith("step-") for m, _ in extras)
    targets = {t["target"]: t for t in json.loads((out / "targets.json").read_text())}
    explicit = "authors' explicit GFSA / GFSA two-pass time"
    assert targets[f"{explicit} (N=8192; ceiling 32.5)"]["bound"] == 25.0
    assert targets[f"{explicit} (N=4096), beside its ceiling 16.5"]["op"] == "info"
    loop_target = targets["trainer / bare loop training step time (ListOps tiny)"]
    assert loop_target["paired"] > 0 and loop_target["passed"] is not None
    report = (out / "bench.md").read_text()
    assert "filterformer bench --quick --methods sdpa gfsa --lengths 16 32" in report
    assert "## Targets" in report
    assert all(f"## {EXTRAS[name].title}" in report for name in ("decoding", "loop"))
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


def test_extras_follow_quick_compile_and_extras(capsys):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)

    def extras(*argv):
        return bench.settings_from_args(parser.parse_args(list(argv))).extras

    assert extras() == ("decoding", "loop", "compiled")
    assert extras("--quick") == ("decoding", "loop")
    assert extras("--quick", "--compile") == ("decoding", "loop", "compiled")
    assert extras("--extras", "none") == ()
    assert extras("--quick", "--extras", "loop", "--compile") == ("loop", "compiled")
    with pytest.raises(SystemExit):
        parser.parse_args(["--extras", "gpu"])
    assert "argument --extras: invalid choice: 'gpu'" in capsys.readouterr().err


def test_a_run_in_which_every_configuration_fails_exits_2_and_says_why(tmp_path, monkeypatch,
                                                                       capsys):
    from filterformer.bench import BenchShape
    from filterformer.cli import main

    # Shapes no tensor can take: every configuration's worker raises.
    monkeypatch.setattr(BenchShape, "quick", classmethod(lambda cls: cls(head_dim=-1)))
    out = tmp_path / "results"
    argv = ["bench", "--quick", "--methods", "efficient", "sdpa", "--lengths", "16",
            "--modes", "inference", "--extras", "none", "--output", str(out)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "no configuration was measured (2 of 2 failed; the first: efficient, N=16" in (
        captured.err) and str(out / "bench.md") in captured.err
    report = (out / "bench.md").read_text()
    assert "**Failed: 2 of 2 configurations**" in report and "## Failed" in report
    assert "- sdpa, N=16, inference: the worker failed: RuntimeError" in report
    assert "**Failed: 2 of 2 configurations**" in captured.out  # the printed report says so too
    records = json.loads((out / "bench.json").read_text())
    assert [r["failed"] for r in records] == [True, True]


def test_gpu_targets_are_reported_unmeasured_on_the_cpu(tmp_path):
    from filterformer.bench.performance_targets import GPU_TARGETS

    out = tmp_path / "results"
    assert _run(["--quick", "--methods", "sdpa", "--lengths", "16", "--modes", "inference",
                 "--extras", "none", "--paired", "none", "--output", str(out)]) == 0
    targets = json.loads((out / "targets.json").read_text())
    gpu = [t for t in targets if t["note"] is not None]
    assert [t["target"] for t in gpu] == [t.name for t in GPU_TARGETS]
    assert all(t["note"] == "not measured here (CPU)" and t["ratio"] is None
               and t["passed"] is None for t in gpu)
    report = (out / "bench.md").read_text()
    line = next(ln for ln in report.splitlines() if ln.startswith(f"| {GPU_TARGETS[0].name} |"))
    assert line.endswith("| not measured here (CPU) |")
    assert "—" not in report.splitlines()[0]  # no GPU named on a CPU run


def test_gpu_targets_need_cuda_unless_quick(tmp_path, capsys):
    from filterformer.cli import main

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    quick = bench.settings_from_args(parser.parse_args(["--gpu-targets", "--quick"]))
    assert quick.methods == () and quick.extras == ("gpu-d768", "gpu-d128", "gpu-kernel",
                                                    "gpu-bert", "gpu-decoding")
    if bench.resolve_device("auto") == "cpu":
        assert main(["bench", "--gpu-targets", "--output", str(tmp_path)]) == 2
        assert "--gpu-targets measures GPU shapes" in capsys.readouterr().err
